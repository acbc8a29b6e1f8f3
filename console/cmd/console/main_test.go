package main

import (
	"os"
	"path/filepath"
	"testing"
)

// A secret file holds one line; its trailing newline is ignored, a second line or an
// empty file is refused.
func TestOneLine(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]string{"s3cret\n": "s3cret", "s3cret": "s3cret", "s3cret\r\n": "s3cret", "a\nb\n": "", "": "", "\n": ""} {
		f := filepath.Join(dir, "f")
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := oneLine(f, "secret")
		if got != want || (want == "") != (err != nil) {
			t.Errorf("%q: %q %v, want %q", content, got, err, want)
		}
	}
}
