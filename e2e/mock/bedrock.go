package mock

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// Amazon Bedrock's Converse API (POST /model/{modelId}/converse and
// /converse-stream): AWS's error shape ({"message"} with x-amzn-ErrorType), usage with
// the cache reads apart from inputTokens, the stream in AWS event-stream framing.

var (
	bedrockFields    = set("messages", "system", "inferenceConfig", "toolConfig", "guardrailConfig", "additionalModelRequestFields", "additionalModelResponseFieldPaths", "promptVariables", "requestMetadata", "performanceConfig")
	bedrockInference = set("maxTokens", "stopSequences", "temperature", "topP")
)

// bedrockErrors are the Converse API's errors, by type: the status Bedrock answers each
// with and its words. [[mock:aws_error=TYPE]] answers one (an unknown TYPE is ignored).
var bedrockErrors = map[string]struct {
	status int
	msg    string
}{
	"ValidationException":           {400, "The model returned the following errors: input is too long for requested model."},
	"ServiceQuotaExceededException": {400, "Your request exceeds the service quota for your account. Resubmit it later."},
	"AccessDeniedException":         {403, "You don't have access to the model with the specified model ID."},
	"ResourceNotFoundException":     {404, "The provided model identifier is invalid."},
	"ModelTimeoutException":         {408, "Model has timed out in processing the request."},
	"ModelErrorException":           {424, "The model failed to process the request."},
	"ThrottlingException":           {429, "Too many requests, please wait before trying again."},
	"ModelNotReadyException":        {429, "The model is not ready to serve inference requests."},
	"InternalServerException":       {500, "The server encountered an internal error."},
	"ServiceUnavailableException":   {503, "Bedrock is unable to process your request."},
}

// awsError answers Bedrock's error: its type in x-amzn-ErrorType (with the service's
// namespace, as Bedrock sends it), its words in {"message"}.
func awsError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("X-Amzn-Errortype", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	writeJSON(w, status, map[string]any{"message": msg})
}

// bedrock serves a Converse call, its signature checked by the route's wrapper
// (requireSigV4).
func (s *Server) bedrock(w http.ResponseWriter, r *http.Request) {
	q, ok := s.parse(w, r, "", func(status int, _, _, msg string) { awsError(w, status, "ValidationException", msg) })
	if !ok {
		return
	}
	q.model = r.PathValue("model")
	inf, _ := q.body["inferenceConfig"].(map[string]any)
	for k := range q.body {
		if !bedrockFields[k] {
			awsError(w, http.StatusBadRequest, "ValidationException", "Malformed input request: extraneous key ["+k+"] is not permitted, please reformat your input and try again.")
			return
		}
	}
	for k := range inf {
		if !bedrockInference[k] {
			awsError(w, http.StatusBadRequest, "ValidationException", "Malformed input request: extraneous key [inferenceConfig."+k+"] is not permitted.")
			return
		}
	}
	all, last, toolResult, images, funcs := bedrockInput(q.body)
	a := generate(last, all, intField(inf, "maxTokens"))
	if e, ok := bedrockErrors[a.dir.awsError]; ok {
		awsError(w, e.status, a.dir.awsError, e.msg)
		return
	}
	matched := a.applyStop(stopsOf(inf["stopSequences"]))
	a.input += images
	if tc, ok := q.body["toolConfig"]; ok {
		b, _ := json.Marshal(tc)
		a.input += jsonTokens(b)
	}
	out, stop := len(a.tokens), "end_turn"
	switch {
	case a.truncated:
		stop = "max_tokens"
	case matched != "":
		stop = "stop_sequence"
	}
	block := map[string]any{"text": a.text()}
	call, isCall := cloudToolCall(last, funcs, toolResult)
	if isCall {
		out, stop = call.tokens(), "tool_use"
		block = map[string]any{"toolUse": map[string]any{"toolUseId": idFor("tooluse_", q.raw), "name": call.name, "input": json.RawMessage(call.args)}}
	}
	// Cache reads and writes are outside inputTokens, as Anthropic counts them; Bedrock
	// writes to the cache only where the request sets a cachePoint block.
	read, write := min(a.dir.cacheRead, a.input), 0
	if hasKey(q.body, "cachePoint") {
		write = min(a.dir.cacheWrite, a.input-read)
	}
	usage := map[string]any{"inputTokens": a.input - read - write, "outputTokens": out, "totalTokens": a.input + out,
		"cacheReadInputTokens": read, "cacheWriteInputTokens": write}
	if r.PathValue("method") == "converse" {
		if !sleep(r.Context(), secs(a.dir.slow)) {
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"output": map[string]any{"message": map[string]any{"role": "assistant",
			"content": []any{block}}}, "stopReason": stop, "usage": usage, "metrics": map[string]any{"latencyMs": 1}})
		return
	}
	if r.PathValue("method") != "converse-stream" {
		awsError(w, http.StatusNotFound, "UnknownOperationException", "")
		return
	}
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := eventstream.NewEncoder()
	send := func(typ string, v map[string]any) bool {
		payload, _ := json.Marshal(v)
		m := eventstream.Message{Payload: payload}
		m.Headers.Set(":event-type", eventstream.StringValue(typ))
		m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		m.Headers.Set(":message-type", eventstream.StringValue("event"))
		var b bytes.Buffer
		if enc.Encode(&b, m) != nil {
			return false
		}
		if _, err := w.Write(b.Bytes()); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send("messageStart", map[string]any{"role": "assistant"}) {
		return
	}
	if isCall {
		u := block["toolUse"].(map[string]any)
		if !send("contentBlockStart", map[string]any{"contentBlockIndex": 0, "start": map[string]any{"toolUse": map[string]any{"toolUseId": u["toolUseId"], "name": u["name"]}}}) {
			return
		}
		for _, piece := range call.argPieces() {
			if !send("contentBlockDelta", map[string]any{"contentBlockIndex": 0, "delta": map[string]any{"toolUse": map[string]any{"input": piece}}}) {
				return
			}
		}
	} else if !a.streamTokens(r, func(tok string) bool {
		return send("contentBlockDelta", map[string]any{"contentBlockIndex": 0, "delta": map[string]any{"text": tok}})
	}) {
		return
	}
	_ = send("contentBlockStop", map[string]any{"contentBlockIndex": 0}) &&
		send("messageStop", map[string]any{"stopReason": stop}) &&
		send("metadata", map[string]any{"usage": usage, "metrics": map[string]any{"latencyMs": 1}})
}

// bedrockInput reads the texts, the last user text, whether the conversation ends with
// tool results, the images' tokens (Claude's rule) and the offered tools.
func bedrockInput(body map[string]any) (all []string, last string, toolResult bool, images int, funcs []string) {
	for _, b := range asList(body["system"]) {
		all = append(all, str(b["text"]))
	}
	for _, m := range asList(body["messages"]) {
		var text []string
		toolResult = false
		for _, b := range asList(m["content"]) {
			switch {
			case b["image"] != nil:
				img, _ := b["image"].(map[string]any)
				src, _ := img["source"].(map[string]any)
				images += anthropicImage(str(src["bytes"]))
			case b["toolResult"] != nil || b["toolUse"] != nil:
				toolResult = b["toolResult"] != nil
				j, _ := json.Marshal(b)
				all = append(all, string(j))
			default:
				text = append(text, str(b["text"]))
			}
		}
		all = append(all, text...)
		if m["role"] == "user" && len(text) > 0 {
			last = strings.Join(text, " ")
		}
	}
	tc, _ := body["toolConfig"].(map[string]any)
	for _, t := range asList(tc["tools"]) {
		spec, _ := t["toolSpec"].(map[string]any)
		funcs = append(funcs, str(spec["name"]))
	}
	return all, last, toolResult, images, funcs
}
