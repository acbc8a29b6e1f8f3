package catalog

import (
	"strings"
	"testing"
)

// TestBasePath: a channel's base_path is a plain path prefix; on the vertex formats it
// names the project and location (by default gcp's: none is required); video takes none.
func TestBasePath(t *testing.T) {
	for _, c := range []struct {
		format Format
		path   string
		want   string // "" when valid
	}{
		{Format("openai"), "", ""},
		{Format("openai"), "/openai/v1", ""},
		{Format("openai"), "/api/v1", ""},
		{Format("gemini"), "/v1beta/openai", ""},
		{Format("vertex-gemini"), "/v1/projects/demo-project/locations/us-central1", ""},
		{Format("vertex-anthropic"), "", ""},
		{Format("vertex-gemini"), "/v1beta", "must be \"/v1/projects/"},
		{Format("openai"), "/openai/v1/", "no trailing slash"},
		{Format("openai"), "openai/v1", "must be a path"},
		{Format("openai"), "/v1?x=1", "must be a path"},
		{Format("openai"), "/a/../b", ". or .. segments"},
		{Format("openai"), "/a//b", "must be a path"},
		{Format("video"), "/v1", "does not apply"},
	} {
		got := basePathProblem(c.format, c.path)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s %q: %q, want %q", c.format, c.path, got, c.want)
		}
	}
}
