package app

import (
	"fmt"
	"os"
	"strings"
)

// loadTokens reads a role's tokens: from file when file is not empty (one token per
// line; blank lines and lines starting with '#' skipped), else from the environment
// variable env (comma-separated). Surrounding whitespace is trimmed. The content never
// appears in errors.
func loadTokens(file, env string, getenv func(string) string) ([]string, error) {
	var parts []string
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read token file: %w", err)
		}
		parts = strings.Split(string(b), "\n")
	} else {
		parts = strings.Split(getenv(env), ",")
	}
	var out []string
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		out = append(out, p)
	}
	if file != "" && len(out) == 0 {
		return nil, fmt.Errorf("token file %s is empty", file)
	}
	return out, nil
}
