package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	svcOld = "service-token-old-0123456789"
	svcNew = "service-token-new-0123456789"
	admOld = "admin-token-old-0123456789"
)

func TestLoadTokens(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		file    string
		env     string
		want    []string
		wantErr string
	}{
		{name: "one token in the env", env: svcOld, want: []string{svcOld}},
		{name: "comma-separated env", env: " " + svcOld + " ,," + svcNew + " ", want: []string{svcOld, svcNew}},
		{name: "unset env", env: "", want: nil},
		{name: "one per line", file: write("two", "# rotating\n"+svcOld+"\n\n"+svcNew+"\r\n"), want: []string{svcOld, svcNew}},
		{name: "file wins over env", file: write("one", svcNew+"\n"), env: svcOld, want: []string{svcNew}},
		{name: "empty file", file: write("empty", "\n# nothing\n"), wantErr: "is empty"},
		{name: "missing file", file: filepath.Join(dir, "nope"), wantErr: "read token file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := loadTokens(tt.file, "X", func(string) string { return tt.env })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
