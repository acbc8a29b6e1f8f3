// Package runfiles is the one home of what `make run` leaves for its clients in its run
// directory (.run at the repository root): the admin token, where accounting listens and
// the gateway's base URL. The local stack (e2e/stack) writes them at every start;
// gatewayctl and the SDK examples read them, relative to the working directory, when
// no flag or environment variable says otherwise, so that they follow a stack whose
// ports were moved.
//
// It imports only the standard library: gatewayctl, the examples and the launcher all
// use it.
package runfiles

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Dir is the local stack's run directory, relative to the repository root.
const Dir = ".run"

// The files of the run directory that clients read.
const (
	// AdminTokenFile holds the admin token (owner-readable only).
	AdminTokenFile = "admin-token"
	// AccountingAddrFile holds what accounting's clients dial: one address, or the
	// replicas' as a comma-separated list.
	AccountingAddrFile = "accounting-addr"
	// BaseURLFile holds the gateway's base URL, ending in /v1.
	BaseURLFile = "base-url"
)

// EnvBaseURL names the gateway's base URL for the SDK examples, and DefaultBaseURL is
// the local stack's at its default port.
const (
	EnvBaseURL     = "GATEWAY_BASE_URL"
	DefaultBaseURL = "http://127.0.0.1:8080/v1"
)

// BaseURL is the gateway's base URL (ending in /v1) for a client run from the
// repository root: $GATEWAY_BASE_URL, else the one make run left in .run/base-url,
// else DefaultBaseURL.
func BaseURL() (string, error) {
	if env := strings.TrimSpace(os.Getenv(EnvBaseURL)); env != "" {
		return env, nil
	}
	base, err := Read(BaseURLFile)
	if err != nil || base != "" {
		return base, err
	}
	return DefaultBaseURL, nil
}

// Path is the file name of the run directory, relative to the working directory.
func Path(name string) string { return filepath.Join(Dir, name) }

// Read returns the first line of the file name in the run directory under the working
// directory, trimmed; "" with a nil error when there is no such file.
func Read(name string) (string, error) {
	b, err := os.ReadFile(Path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line), nil
}

// Write replaces the file name in dir with value and a newline, readable by everyone
// who may read dir: an address or a URL is no secret. Whatever was at the path (an
// earlier run's file, a link) is replaced, not written through.
func Write(dir, name, value string) error {
	path := filepath.Join(dir, name)
	tmp := path + ".new"
	_ = os.Remove(tmp)
	if err := os.WriteFile(tmp, []byte(value+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
