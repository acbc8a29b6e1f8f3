package mock

import (
	"net/http"
	"strings"
)

// Claude on Vertex AI (:rawPredict, :streamRawPredict): the Messages API with the
// model in the path, anthropic_version in the body, a bearer token, Anthropic's error
// shape.

const vertexAnthropicVersion = "vertex-2023-10-16"

// vertexClaude serves a Claude call, its bearer token checked by the route's wrapper
// (requireVertexToken).
func (s *Server) vertexClaude(w http.ResponseWriter, r *http.Request) {
	q, ok := s.parse(w, r, "", func(status int, typ, _, msg string) { anthropicError(w, status, typ, msg) })
	if !ok {
		return
	}
	model, method, _ := strings.Cut(r.PathValue("call"), ":")
	stream, _ := q.body["stream"].(bool)
	switch {
	case method != "rawPredict" && method != "streamRawPredict":
		googleError(w, http.StatusNotFound, "NOT_FOUND", "Method not found.")
		return
	case q.body["anthropic_version"] != vertexAnthropicVersion:
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic_version: vertex-2023-10-16 is required")
		return
	case q.body["model"] != nil:
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "model: Extra inputs are not permitted")
		return
	case stream != (method == "streamRawPredict"):
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "stream must be true on streamRawPredict and absent on rawPredict")
		return
	}
	delete(q.body, "anthropic_version")
	if msg := strictMessages(q.body); msg != "" {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", msg)
		return
	}
	q.model = model
	s.messages(w, q)
}
