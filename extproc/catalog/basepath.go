package catalog

import (
	"regexp"
	"strings"

	"github.com/llmgw/gateway/extproc/translate"
)

// basePathShape is a path prefix: segments of URL path characters, no empty, dot or
// dot-dot segment, no query or fragment, no trailing slash.
var basePathShape = regexp.MustCompile(`^(/[A-Za-z0-9\-._~!$&'()*+,;=:@%]+)+$`)

// basePathProblem says what is wrong with a channel's base_path, "" when nothing is.
func basePathProblem(f Format, p string) string {
	spec, known := f.spec()
	switch {
	case p == "" || !known:
		return ""
	case spec.API == 0:
		return "base_path does not apply to format " + string(f)
	case !basePathShape.MatchString(p):
		return `base_path must be a path like "/openai/v1" (no query, no trailing slash)`
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "." || seg == ".." {
			return "base_path must not contain . or .. segments"
		}
	}
	if spec.Credential == translate.CredentialGCP && !vertexBase.MatchString(p) {
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
