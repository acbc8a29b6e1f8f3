package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMakeTestSaysEachStep runs `make test` with a stand-in for the go command (it
// records its arguments and does nothing) and a browser given by CHROMIUM, so that only
// the Makefile's own steps run: a first `make test` compiles for many minutes and may
// install a browser, and it must say so as it goes, one line per step, in order, each
// step then running what it announced.
func TestMakeTestSaysEachStep(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on this machine")
	}
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	stub := filepath.Join(dir, "go")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\necho \"$*\" >> '"+calls+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "--no-print-directory", "test", "GO="+stub)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CHROMIUM="+stub)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make test: %v\n%s", err, out)
	}
	steps := regexp.MustCompile(`(?m)^==> (\w+): .+$`).FindAllStringSubmatch(string(out), -1)
	var names []string
	for _, s := range steps {
		names = append(names, s[1])
	}
	if got, want := strings.Join(names, " "), "lint browser tests manifests"; got != want {
		t.Errorf("make test announced steps %q, want %q:\n%s", got, want, out)
	}
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	ran := string(b)
	for _, want := range []string{"vet -tags vtprotobuf ./...", "test -tags vtprotobuf -count=1", "test -count=1 ./..."} {
		if !strings.Contains(ran, want) {
			t.Errorf("make test did not run go %s; it ran:\n%s", want, ran)
		}
	}
}
