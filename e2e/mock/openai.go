package mock

import (
	"encoding/json"
	"net/http"
)

type chatUsage struct {
	PromptTokens            int               `json:"prompt_tokens"`
	CompletionTokens        int               `json:"completion_tokens"`
	TotalTokens             int               `json:"total_tokens"`
	PromptTokensDetails     promptDetails     `json:"prompt_tokens_details"`
	CompletionTokensDetails completionDetails `json:"completion_tokens_details"`
}

type chatMessage struct {
	Role      string           `json:"role"`
	Content   *string          `json:"content"`
	Refusal   *string          `json:"refusal"`
	ToolCalls []map[string]any `json:"tool_calls,omitempty"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	Logprobs     *struct{}   `json:"logprobs"`
	FinishReason string      `json:"finish_reason"`
}

type chatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []chatChoice `json:"choices"`
	Usage             chatUsage    `json:"usage"`
	ServiceTier       string       `json:"service_tier"`
	SystemFingerprint *string      `json:"system_fingerprint"`
}

type chunkDelta struct {
	Role      string           `json:"role,omitempty"`
	Content   *string          `json:"content,omitempty"`
	ToolCalls []map[string]any `json:"tool_calls,omitempty"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	Logprobs     *struct{}  `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

// chatChunk is a chat.completion.chunk. Usage is a pointer whose null is written only
// when the client asked for usage (OpenAI then sends "usage":null on every chunk but
// the last).
type chatChunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	ServiceTier       string        `json:"service_tier"`
	SystemFingerprint *string       `json:"system_fingerprint"`
	Choices           []chunkChoice `json:"choices"`
	Usage             *chatUsage    `json:"usage"`
}

func (s *Server) chatCompletions(w http.ResponseWriter, q *request) {
	all, last := messagesText(q.body["messages"])
	a := generate(last, all, intField(q.body, "max_completion_tokens", "max_tokens"))
	a.applyStop(stopsOf(q.body["stop"]))
	in, predicted := billedParts(q.raw, q.body, "chat")
	a.input += in
	id := idFor("chatcmpl-mock", q.raw)
	created := s.now().Unix()
	finish := "stop"
	if a.truncated {
		finish = "length"
	}
	out := len(a.tokens)
	call, isCall := toolCallFor("chat", q.body, last)
	callID := idFor("call_", q.raw)
	if isCall {
		finish, out = "tool_calls", call.tokens()
	}
	// Prediction content is billed as completion tokens (rejected prediction tokens).
	b := billFor(a, q.body, "chat")
	usage := chatUsageOf(a.input, out+predicted, b)

	if stream, _ := q.body["stream"].(bool); !stream {
		if !sleep(q.r.Context(), secs(a.dir.slow)) {
			return
		}
		text := a.text()
		msg := chatMessage{Role: "assistant", Content: &text}
		if isCall {
			msg.Content = nil
			msg.ToolCalls = []map[string]any{{"id": callID, "type": "function",
				"function": map[string]string{"name": call.name, "arguments": call.args}}}
		}
		writeJSON(w, http.StatusOK, chatCompletion{
			ID: id, Object: "chat.completion", Created: created, Model: q.model,
			Choices: []chatChoice{{Message: msg, FinishReason: finish}},
			Usage:   usage, ServiceTier: b.tier,
		})
		return
	}
	includeUsage := false
	if so, ok := q.body["stream_options"].(map[string]any); ok {
		includeUsage, _ = so["include_usage"].(bool)
	}
	ev := newSSE(w)
	send := func(c chatChunk) bool {
		c.ID, c.Object, c.Created, c.Model, c.ServiceTier = id, "chat.completion.chunk", created, q.model, b.tier
		b, _ := json.Marshal(c)
		if !includeUsage {
			b = dropNullUsage(b)
		}
		return ev.event("", b)
	}
	empty := ""
	if !send(chatChunk{Choices: []chunkChoice{{Delta: chunkDelta{Role: "assistant", Content: &empty}}}}) {
		return
	}
	if isCall {
		if !send(chatChunk{Choices: []chunkChoice{{Delta: chunkDelta{ToolCalls: []map[string]any{{"index": 0, "id": callID, "type": "function",
			"function": map[string]string{"name": call.name, "arguments": ""}}}}}}}) {
			return
		}
		for _, piece := range call.argPieces() {
			if !send(chatChunk{Choices: []chunkChoice{{Delta: chunkDelta{ToolCalls: []map[string]any{{"index": 0,
				"function": map[string]string{"arguments": piece}}}}}}}) {
				return
			}
		}
	} else if !a.streamTokens(q.r, func(tok string) bool {
		return send(chatChunk{Choices: []chunkChoice{{Delta: chunkDelta{Content: &tok}}}})
	}) {
		return
	}
	if !send(chatChunk{Choices: []chunkChoice{{FinishReason: &finish}}}) {
		return
	}
	if includeUsage {
		if !send(chatChunk{Choices: []chunkChoice{}, Usage: &usage}) {
			return
		}
	}
	ev.event("", []byte("[DONE]"))
}

// dropNullUsage removes the trailing "usage":null field that a chunk without
// stream_options.include_usage must not carry.
func dropNullUsage(b []byte) []byte {
	const tail = `,"usage":null}`
	if n := len(b) - len(tail); n >= 0 && string(b[n:]) == tail {
		return append(b[:n:n], '}')
	}
	return b
}

// ---- Responses API ----

type respContent struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

type respItem struct {
	Type      string        `json:"type"`
	ID        string        `json:"id"`
	Status    string        `json:"status"`
	Role      string        `json:"role,omitempty"`
	Content   []respContent `json:"content,omitempty"`
	CallID    string        `json:"call_id,omitempty"`
	Name      string        `json:"name,omitempty"`
	Arguments *string       `json:"arguments,omitempty"`
}

type respUsage struct {
	InputTokens         int              `json:"input_tokens"`
	InputTokensDetails  respInputDetails `json:"input_tokens_details"`
	OutputTokens        int              `json:"output_tokens"`
	OutputTokensDetails map[string]int   `json:"output_tokens_details"`
	TotalTokens         int              `json:"total_tokens"`
}

type response struct {
	ID                string     `json:"id"`
	Object            string     `json:"object"`
	CreatedAt         int64      `json:"created_at"`
	Status            string     `json:"status"`
	Error             any        `json:"error"`
	IncompleteDetails any        `json:"incomplete_details"`
	Instructions      any        `json:"instructions"`
	MaxOutputTokens   any        `json:"max_output_tokens"`
	Model             string     `json:"model"`
	Output            []respItem `json:"output"`
	ParallelToolCalls bool       `json:"parallel_tool_calls"`
	Temperature       float64    `json:"temperature"`
	ToolChoice        string     `json:"tool_choice"`
	Tools             []any      `json:"tools"`
	TopP              float64    `json:"top_p"`
	ServiceTier       string     `json:"service_tier"`
	Usage             *respUsage `json:"usage"`
}

// responsesInput returns every input text and the last user text of a Responses input
// (a string, or an array of message items).
func responsesInput(body map[string]any) (all []string, last string) {
	if ins, ok := body["instructions"].(string); ok {
		all = append(all, ins)
	}
	switch in := body["input"].(type) {
	case string:
		return append(all, in), in
	case []any:
		a, l := messagesText(in)
		return append(all, a...), l
	}
	return all, ""
}

func (s *Server) responses(w http.ResponseWriter, q *request) {
	all, last := responsesInput(q.body)
	limit := intField(q.body, "max_output_tokens")
	a := generate(last, all, limit)
	in, _ := billedParts(q.raw, q.body, "responses")
	a.input += in
	id := idFor("resp_mock", q.raw)
	msgID := idFor("msg_mock", q.raw)
	base := response{
		ID: id, Object: "response", CreatedAt: s.now().Unix(), Model: q.model,
		ParallelToolCalls: true, Temperature: 1, ToolChoice: "auto", Tools: []any{}, TopP: 1,
		Output: []respItem{},
	}
	if ins, ok := q.body["instructions"].(string); ok {
		base.Instructions = ins
	}
	if limit > 0 {
		base.MaxOutputTokens = limit
	}
	done := base
	done.Status = "completed"
	if a.truncated {
		done.Status = "incomplete"
		done.IncompleteDetails = map[string]any{"reason": "max_output_tokens"}
	}
	item := respItem{Type: "message", ID: msgID, Status: "completed", Role: "assistant",
		Content: []respContent{{Type: "output_text", Text: a.text(), Annotations: []any{}}}}
	out := len(a.tokens)
	call, isCall := toolCallFor("responses", q.body, last)
	if isCall {
		callID := idFor("call_", q.raw)
		item = respItem{Type: "function_call", ID: "fc_" + callID, Status: "completed", CallID: callID, Name: call.name, Arguments: &call.args}
		out = call.tokens()
	}
	done.Output = []respItem{item}
	b := billFor(a, q.body, "responses")
	done.ServiceTier = b.tier
	done.Usage = &respUsage{
		InputTokens: a.input, InputTokensDetails: respInputDetails{CachedTokens: b.read, CacheWriteTokens: b.write},
		OutputTokens: out, OutputTokensDetails: map[string]int{"reasoning_tokens": 0},
		TotalTokens: a.input + out,
	}

	if stream, _ := q.body["stream"].(bool); !stream {
		if !sleep(q.r.Context(), secs(a.dir.slow)) {
			return
		}
		writeJSON(w, http.StatusOK, done)
		return
	}
	ev := newSSE(w)
	seq := 0
	send := func(typ string, fields map[string]any) bool {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(fields)
		return ev.event(typ, b)
	}
	started := base
	started.Status = "in_progress"
	if !send("response.created", map[string]any{"response": started}) ||
		!send("response.in_progress", map[string]any{"response": started}) {
		return
	}
	if isCall {
		empty := ""
		open := item
		open.Status, open.Arguments = "in_progress", &empty
		if !send("response.output_item.added", map[string]any{"output_index": 0, "item": open}) {
			return
		}
		for _, piece := range call.argPieces() {
			if !send("response.function_call_arguments.delta", map[string]any{"item_id": item.ID, "output_index": 0, "delta": piece}) {
				return
			}
		}
		_ = send("response.function_call_arguments.done", map[string]any{"item_id": item.ID, "output_index": 0, "arguments": call.args}) &&
			send("response.output_item.done", map[string]any{"output_index": 0, "item": item}) &&
			send("response.completed", map[string]any{"response": done})
		return
	}
	open := respItem{Type: "message", ID: msgID, Status: "in_progress", Role: "assistant", Content: []respContent{}}
	if !send("response.output_item.added", map[string]any{"output_index": 0, "item": open}) ||
		!send("response.content_part.added", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0,
			"part": respContent{Type: "output_text", Annotations: []any{}}}) {
		return
	}
	if !a.streamTokens(q.r, func(tok string) bool {
		return send("response.output_text.delta", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "delta": tok, "logprobs": []any{}})
	}) {
		return
	}
	final := "response.completed"
	if a.truncated {
		final = "response.incomplete"
	}
	_ = send("response.output_text.done", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "text": a.text(), "logprobs": []any{}}) &&
		send("response.content_part.done", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "part": item.Content[0]}) &&
		send("response.output_item.done", map[string]any{"output_index": 0, "item": item}) &&
		send(final, map[string]any{"response": done})
}
