package failover_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

// binary is the accounting binary TestMain built for every test of the package.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "failover-accounting-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "accounting")
	build := exec.Command("go", "build", "-tags", "vtprotobuf", "-o", binary, "github.com/llmgw/gateway/accounting/cmd/accounting")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	code := 1
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "build the accounting binary: %v\n", err)
	} else {
		code = tablestest.Run(m)
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
