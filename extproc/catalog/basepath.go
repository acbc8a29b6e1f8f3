package catalog

import (
	"regexp"
	"strings"
)

// basePathShape is a path prefix: segments of URL path characters, no empty, dot or
// dot-dot segment, no query or fragment, no trailing slash.
var basePathShape = regexp.MustCompile(`^(/[A-Za-z0-9\-._~!$&'()*+,;=:@%]+)+$`)

// basePathProblem says what is wrong with a channel's base_path, "" when nothing is.
func basePathProblem(f Format, p string) string {
	switch {
	case p == "":
		return ""
	case f == FormatVideo:
		return "base_path does not apply to format video"
	case !basePathShape.MatchString(p):
		return `base_path must be a path like "/openai/v1" (no query, no trailing slash)`
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "." || seg == ".." {
			return "base_path must not contain . or .. segments"
		}
	}
	if (f == FormatVertexGemini || f == FormatVertexAnthropic) && !vertexBase.MatchString(p) {
		return `base_path of format ` + string(f) + ` must be "/v1/projects/{project}/locations/{location}"`
	}
	return ""
}

// vertexName is a Vertex AI project id or location as it appears in a model path.
const vertexName = `[a-z0-9\-]+`

// vertexBase is the prefix of every Vertex AI model path; vertexPlace a gcp.project or
// gcp.location, which make the prefix of a vertex channel without base_path.
var (
	vertexBase  = regexp.MustCompile(`^/v1(beta1)?/projects/` + vertexName + `/locations/` + vertexName + `$`)
	vertexPlace = regexp.MustCompile(`^` + vertexName + `$`)
)
