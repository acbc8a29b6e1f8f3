package mock

import (
	"encoding/json"
	"net/http"
)

type anthropicUsage struct {
	InputTokens              int           `json:"input_tokens"`
	CacheCreationInputTokens int           `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int           `json:"cache_read_input_tokens"`
	CacheCreation            cacheCreation `json:"cache_creation"`
	OutputTokens             int           `json:"output_tokens"`
	ServiceTier              string        `json:"service_tier"`
}

type anthropicBlock struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

type anthropicMessage struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []anthropicBlock `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

// anthropicInput returns the system and message texts and the last user text.
func anthropicInput(body map[string]any) (all []string, last string) {
	if sys := textOf(body["system"]); sys != "" {
		all = append(all, sys)
	}
	a, l := messagesText(body["messages"])
	return append(all, a...), l
}

func (s *Server) countTokens(w http.ResponseWriter, q *request) {
	all, _ := anthropicInput(q.body)
	in, _ := billedParts(q.raw, q.body, "messages")
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": generate("", all, 0).input + in})
}

func (s *Server) messages(w http.ResponseWriter, q *request) {
	maxTokens := intField(q.body, "max_tokens")
	if maxTokens == 0 {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "max_tokens: Field required")
		return
	}
	all, last := anthropicInput(q.body)
	a := generate(last, all, maxTokens)
	matched := a.applyStop(stopsOf(q.body["stop_sequences"]))
	in, _ := billedParts(q.raw, q.body, "messages")
	a.input += in
	stop := "end_turn"
	var stopSeq *string
	switch {
	case a.truncated:
		stop = "max_tokens"
	case matched != "":
		stop, stopSeq = "stop_sequence", &matched
	}
	text := a.text()
	block := anthropicBlock{Type: "text", Text: &text}
	out := len(a.tokens)
	call, isCall := toolCallFor("messages", q.body, last)
	if isCall {
		stop, stopSeq, out = "tool_use", nil, call.tokens()
		block = anthropicBlock{Type: "tool_use", ID: idFor("toolu_", q.raw), Name: call.name, Input: json.RawMessage(call.args)}
	}
	msg := anthropicMessage{
		ID: idFor("msg_mock", q.raw), Type: "message", Role: "assistant", Model: q.model,
		Content: []anthropicBlock{block}, StopReason: &stop, StopSequence: stopSeq,
		Usage: anthropicUsageOf(a.input, out, billFor(a, q.body, "messages")),
	}
	if stream, _ := q.body["stream"].(bool); !stream {
		if !sleep(q.r.Context(), secs(a.dir.slow)) {
			return
		}
		writeJSON(w, http.StatusOK, msg)
		return
	}
	ev := newSSE(w)
	send := func(typ string, v map[string]any) bool {
		v["type"] = typ
		b, _ := json.Marshal(v)
		return ev.event(typ, b)
	}
	start := msg
	start.Content, start.StopReason = []anthropicBlock{}, nil
	start.Usage.OutputTokens = 1
	empty := ""
	first := anthropicBlock{Type: "text", Text: &empty}
	if isCall {
		first = anthropicBlock{Type: "tool_use", ID: block.ID, Name: block.Name, Input: json.RawMessage("{}")}
	}
	if !send("message_start", map[string]any{"message": start}) ||
		!send("content_block_start", map[string]any{"index": 0, "content_block": first}) ||
		!send("ping", map[string]any{}) {
		return
	}
	if isCall {
		for _, piece := range call.argPieces() {
			if !send("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": piece}}) {
				return
			}
		}
	} else if !a.streamTokens(q.r, func(tok string) bool {
		return send("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": tok}})
	}) {
		return
	}
	_ = send("content_block_stop", map[string]any{"index": 0}) &&
		send("message_delta", map[string]any{
			"delta": map[string]any{"stop_reason": stop, "stop_sequence": stopSeq},
			"usage": map[string]any{"output_tokens": out},
		}) &&
		send("message_stop", map[string]any{})
}
