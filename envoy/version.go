// Package envoy holds the Envoy release the gateway is pinned to. envoy.yaml, the deploy
// manifests, the READMEs, docs/operations.md and the Envoy test front all name this one
// version; a test in this directory and one in deploy/ fail when any mention disagrees
// with the VERSION file.
package envoy

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var versionFile string

// Version is the pinned Envoy release, e.g. "1.37.11" (no leading v). Its changelog is in
// Envoy's docs under version_history/v1.37; 1.37.6 and later carry the ext_proc
// use-after-free fixes the gateway needs.
var Version = strings.TrimSpace(versionFile)

// Image is the official container image of Version.
func Image() string { return "envoyproxy/envoy:v" + Version }
