package mock

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// The Gemini API and Vertex AI's Gemini (generateContent, streamGenerateContent?alt=sse):
// Google's error envelope, the key in x-goog-api-key (Gemini API) or a bearer token
// (Vertex AI), usageMetadata as Google reports it.

// geminiFields are the generateContent body's top-level fields.
var geminiFields = set("contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings", "cachedContent", "labels")

// geminiImageTokens is what Gemini bills an image of up to 384 pixels a side.
const geminiImageTokens = 258

// gemini serves a Gemini model call, its credential checked by the route's wrapper
// (requireGeminiKey, requireVertexToken).
func (s *Server) gemini(w http.ResponseWriter, r *http.Request) {
	model, method, _ := strings.Cut(r.PathValue("call"), ":")
	fail := func(status int, _, _, msg string) { googleError(w, status, "INVALID_ARGUMENT", msg) }
	q, ok := s.parse(w, r, "", fail)
	if !ok {
		return
	}
	q.model = model
	stream := method == "streamGenerateContent"
	if method != "generateContent" && !stream || stream && r.URL.Query().Get("alt") != "sse" {
		googleError(w, http.StatusNotFound, "NOT_FOUND", "Method not found.")
		return
	}
	for k := range q.body {
		if !geminiFields[k] {
			googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", `Invalid JSON payload received. Unknown name "`+k+`": Cannot find field.`)
			return
		}
	}
	s.geminiAnswer(w, q, stream)
}

// geminiInput reads the texts, the last user text, whether the conversation ends with
// function responses, the images and the offered functions.
func geminiInput(body map[string]any) (all []string, last string, toolResult bool, images int, funcs []string) {
	sys, _ := body["systemInstruction"].(map[string]any)
	for _, p := range asList(sys["parts"]) {
		all = append(all, str(p["text"]))
	}
	for _, c := range asList(body["contents"]) {
		var text []string
		toolResult = false
		for _, p := range asList(c["parts"]) {
			switch {
			case p["inlineData"] != nil:
				images++
			case p["functionResponse"] != nil:
				toolResult = true
				b, _ := json.Marshal(p["functionResponse"])
				all = append(all, string(b))
			case p["functionCall"] != nil:
				b, _ := json.Marshal(p["functionCall"])
				all = append(all, string(b))
			default:
				text = append(text, str(p["text"]))
			}
		}
		all = append(all, text...)
		if c["role"] != "model" && len(text) > 0 {
			last = strings.Join(text, " ")
		}
	}
	for _, t := range asList(body["tools"]) {
		for _, f := range asList(t["functionDeclarations"]) {
			funcs = append(funcs, str(f["name"]))
		}
	}
	return all, last, toolResult, images, funcs
}

func (s *Server) geminiAnswer(w http.ResponseWriter, q *request, stream bool) {
	gen, _ := q.body["generationConfig"].(map[string]any)
	all, last, toolResult, images, funcs := geminiInput(q.body)
	a := generate(last, all, intField(gen, "maxOutputTokens"))
	a.applyStop(stopsOf(gen["stopSequences"]))
	a.input += images * geminiImageTokens
	if tools, ok := q.body["tools"]; ok {
		b, _ := json.Marshal(tools)
		a.input += jsonTokens(b)
	}
	out := len(a.tokens)
	finish := "STOP"
	if a.truncated {
		finish = "MAX_TOKENS"
	}
	parts := []map[string]any{{"text": a.text()}}
	if call, ok := cloudToolCall(last, funcs, toolResult); ok {
		parts = []map[string]any{{"functionCall": map[string]any{"name": call.name, "args": json.RawMessage(call.args)}}}
		out, finish = call.tokens(), "STOP"
	}
	// The cached tokens are inside promptTokenCount, as Gemini counts them.
	read := min(a.dir.cacheRead, a.input)
	usage := func(candidates int) map[string]any {
		return map[string]any{"promptTokenCount": a.input, "candidatesTokenCount": candidates,
			"cachedContentTokenCount": read, "totalTokenCount": a.input + candidates}
	}
	resp := func(parts []map[string]any, finish string, candidates int) map[string]any {
		c := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		if finish != "" {
			c["finishReason"] = finish
		}
		return map[string]any{"candidates": []any{c}, "usageMetadata": usage(candidates),
			"modelVersion": q.model, "responseId": idFor("", q.raw)}
	}
	if !stream {
		if !sleep(q.r.Context(), secs(a.dir.slow)) {
			return
		}
		writeJSON(w, http.StatusOK, resp(parts, finish, out))
		return
	}
	ev := newSSE(w)
	send := func(v map[string]any) bool {
		b, _ := json.Marshal(v)
		return ev.event("", b)
	}
	if parts[0]["functionCall"] != nil {
		_ = send(resp(parts, finish, out))
		return
	}
	n := 0
	if !a.streamTokens(q.r, func(tok string) bool {
		n++
		return send(resp([]map[string]any{{"text": tok}}, "", n))
	}) {
		return
	}
	_ = send(resp([]map[string]any{{"text": ""}}, finish, out))
}

// cloudToolCall is the answer's function call for the formats whose tools are
// declared by name (gemini, bedrock).
func cloudToolCall(last string, funcs []string, toolResult bool) (mockCall, bool) {
	return namedCall(last, toolResult, func(name string) bool { return slices.Contains(funcs, name) })
}

// asList reads a JSON array of objects (nil entries for others).
func asList(v any) []map[string]any {
	l, _ := v.([]any)
	out := make([]map[string]any, 0, len(l))
	for _, e := range l {
		m, _ := e.(map[string]any)
		out = append(out, m)
	}
	return out
}

func str(v any) string { s, _ := v.(string); return s }
