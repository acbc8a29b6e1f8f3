package envoy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/llmgw/gateway/envoy"
)

// versionMentions are the files that name the pinned Envoy release for operators.
var versionMentions = []string{
	"README.md",
	"envoy/README.md",
	"envoy/envoy.yaml",
	"deploy/README.md",
	"docs/operations.md",
	"deploy/base/envoy/envoy.yaml",
	"deploy/base/gateway/deployment.yaml",
}

// envoyRelease finds what reads as an Envoy release: an image tag, a func-e version, or a
// dotted release in a line about Envoy (go-control-plane's module version is not one).
var envoyRelease = regexp.MustCompile(`envoyproxy/envoy:v?([0-9A-Za-z.-]*[0-9A-Za-z])|func-e use ([^\s` + "`" + `]+)|\bv?(1\.[0-9]+\.[0-9]+|1\.[0-9]+-latest)\b`)

func TestVersionIsOneRelease(t *testing.T) {
	if !regexp.MustCompile(`^1\.37\.([6-9]|[1-9][0-9])$`).MatchString(envoy.Version) {
		t.Fatalf("envoy/VERSION = %q, want a 1.37 patch release at or after 1.37.6", envoy.Version)
	}
	for _, name := range versionMentions {
		b, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "go-control-plane") || !strings.Contains(strings.ToLower(line+name), "envoy") {
				continue
			}
			for _, m := range envoyRelease.FindAllStringSubmatch(line, -1) {
				got := m[1] + m[2] + m[3]
				if got != envoy.Version {
					t.Errorf("%s:%d names Envoy %q, want %q (envoy/VERSION): %s", name, n+1, got, envoy.Version, strings.TrimSpace(line))
				}
			}
		}
	}
}
