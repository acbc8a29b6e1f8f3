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
		{FormatOpenAI, "", ""},
		{FormatOpenAI, "/openai/v1", ""},
		{FormatOpenAI, "/api/v1", ""},
		{FormatGemini, "/v1beta/openai", ""},
		{FormatVertexGemini, "/v1/projects/demo-project/locations/us-central1", ""},
		{FormatVertexAnthropic, "", ""},
		{FormatVertexGemini, "/v1beta", "must be \"/v1/projects/"},
		{FormatOpenAI, "/openai/v1/", "no trailing slash"},
		{FormatOpenAI, "openai/v1", "must be a path"},
		{FormatOpenAI, "/v1?x=1", "must be a path"},
		{FormatOpenAI, "/a/../b", ". or .. segments"},
		{FormatOpenAI, "/a//b", "must be a path"},
		{FormatVideo, "/v1", "does not apply"},
	} {
		got := basePathProblem(c.format, c.path)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s %q: %q, want %q", c.format, c.path, got, c.want)
		}
	}
}
