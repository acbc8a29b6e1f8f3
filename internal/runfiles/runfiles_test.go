package runfiles

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteThenRead(t *testing.T) {
	t.Chdir(t.TempDir())
	if got, err := Read(BaseURLFile); got != "" || err != nil {
		t.Fatalf("without a run directory: %q, %v", got, err)
	}
	if err := os.Mkdir(Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// An earlier run's link is replaced, not written through.
	other := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(other, []byte("keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, Path(BaseURLFile)); err != nil {
		t.Fatal(err)
	}
	if err := Write(Dir, BaseURLFile, "http://127.0.0.1:18081/v1"); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(BaseURLFile); got != "http://127.0.0.1:18081/v1" || err != nil {
		t.Errorf("Read = %q, %v", got, err)
	}
	if b, _ := os.ReadFile(other); string(b) != "keep\n" {
		t.Errorf("written through a link: %q", b)
	}
	// A hand-edited file: surrounding space and later lines are ignored.
	if err := os.WriteFile(Path(AccountingAddrFile), []byte("  127.0.0.1:60052 \nnotes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := Read(AccountingAddrFile); got != "127.0.0.1:60052" {
		t.Errorf("Read = %q", got)
	}
}

func TestBaseURL(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv(EnvBaseURL, "")
	if got, err := BaseURL(); got != DefaultBaseURL || err != nil {
		t.Errorf("without a file or variable: %q, %v", got, err)
	}
	if err := os.Mkdir(Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Write(Dir, BaseURLFile, "http://127.0.0.1:18081/v1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := BaseURL(); got != "http://127.0.0.1:18081/v1" {
		t.Errorf("from the file: %q", got)
	}
	t.Setenv(EnvBaseURL, "http://gateway.example/v1")
	if got, _ := BaseURL(); got != "http://gateway.example/v1" {
		t.Errorf("the variable does not win: %q", got)
	}
}
