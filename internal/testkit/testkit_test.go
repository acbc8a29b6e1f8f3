package testkit_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNotImportedByProductionCode: a test fixture in a binary would be a test's
// shortcut in production; only _test.go files and other test-support packages may
// import this package.
func TestNotImportedByProductionCode(t *testing.T) {
	if testing.Short() {
		t.Skip("lists every package of the module")
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "github.com/llmgw/gateway/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || isTestSupport(fields[0]) {
			continue
		}
		for _, imp := range fields[1:] {
			if isTestSupport(imp) {
				t.Errorf("%s imports the test-support package %s", fields[0], imp)
			}
		}
	}
}

// isTestSupport tells the packages built for tests only.
func isTestSupport(path string) bool {
	switch path {
	case "github.com/llmgw/gateway/internal/testkit", "github.com/llmgw/gateway/e2e/internal/bootstraptest":
		return true
	}
	return false
}
