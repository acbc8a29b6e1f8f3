package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// Any chat model through any chat API (docs/local-stack.md): every client API (the official
// SDKs) against a model of every upstream format, text, streamed text, a tool round trip
// streamed and not, an image, stop sequences, output limits; each charged exactly the
// model's price of the usage the client was told.

// chatModel is a demo model and the upstream API its channel speaks.
type chatModel struct {
	id              string
	inPerM, outPerM int64
}

var chatModels = []chatModel{
	{"demo-chat", 1_000_000, 2_000_000},      // OpenAI chat upstream
	{"demo-claude", 3_000_000, 15_000_000},   // Anthropic messages upstream
	{"demo-responses", 1_000_000, 2_000_000}, // OpenAI Responses upstream
}

// Finish reasons, normalized across the APIs.
const (
	finishStop   = "stop"   // stop / end_turn / completed
	finishLength = "length" // length / max_tokens / incomplete
	finishTool   = "tool"   // tool_calls / tool_use / a function_call item
	finishSeq    = "stop_sequence"
)

// call is what a test asks of a client API.
type call struct {
	model     string
	prompt    string
	system    string
	stream    bool
	maxTokens int64
	stop      []string
	image     bool   // attach a small PNG as a data URL / base64 source
	tool      string // offer a function tool of this name
}

// answer is what came back, normalized.
type answer struct {
	text             string
	finish           string
	toolID, toolName string
	toolArgs         string
	in, out          int64
}

// chatAPI is one client API driven through its official SDK.
type chatAPI struct {
	name string
	do   func(t *testing.T, key string, c call) answer
	// toolResult continues the conversation of c after the answer a called a tool, with
	// the tool's result.
	toolResult func(t *testing.T, key string, c call, a answer, result string) answer
}

var chatAPIs = []chatAPI{
	{"chat", chatDo, chatToolResult},
	{"messages", messagesDo, messagesToolResult},
	{"responses", responsesDo, responsesToolResult},
}

// tinyPNG is a 1×1 PNG.
const tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

func lookupSchema() map[string]any {
	return map[string]any{
		"type":       "object",
		"properties": map[string]any{"text": map[string]any{"type": "string"}},
		"required":   []string{"text"},
	}
}

func TestAnyChatModelThroughAnyChatAPI(t *testing.T) {
	t.Parallel()
	throughEveryChatAPI(t, chatModels)
}

// throughEveryChatAPI drives each model through every chat API with its official SDK,
// streamed and not: text with a system prompt, an output limit, an image, a tool call
// and its result, each charged exactly the model's price of the usage reported.
func throughEveryChatAPI(t *testing.T, models []chatModel) {
	for _, api := range chatAPIs {
		for _, m := range models {
			t.Run(api.name+"/"+m.id, func(t *testing.T) {
				t.Parallel()
				c := newCustomer(t, customerOpts{topup: "10"})
				balance := c.balance(t)
				// charged checks the call's charge: the model's price of the usage the
				// client was told.
				charged := func(what string, a answer) {
					t.Helper()
					now := micros(t, c.waitSettled(t), "balance")
					want := tokenCost(a.in, a.out, m.inPerM, m.outPerM)
					if got := balance - now; got != want || want == 0 {
						t.Errorf("%s: charged %d micros, want %d (usage in %d, out %d)", what, got, want, a.in, a.out)
					}
					balance = now
				}
				for _, stream := range []bool{false, true} {
					mode := map[bool]string{false: "json", true: "stream"}[stream]

					a := api.do(t, c.key, call{model: m.id, prompt: "alpha beta gamma [[mock:tokens=4]]", system: "be brief", stream: stream})
					if a.text == "" || a.finish != finishStop || a.out != 4 || a.in <= 0 {
						t.Errorf("%s text: %+v", mode, a)
					}
					charged(mode+" text", a)

					a = api.do(t, c.key, call{model: m.id, prompt: "one two three four five six seven eight [[mock:tokens=8]]", stream: stream, maxTokens: 3})
					if a.finish != finishLength || a.out != 3 {
						t.Errorf("%s output limit: %+v, want finish length with 3 tokens", mode, a)
					}
					charged(mode+" output limit", a)

					a = api.do(t, c.key, call{model: m.id, prompt: "look at this picture", stream: stream, image: true})
					if a.text == "" || a.in <= 0 {
						t.Errorf("%s image: %+v", mode, a)
					}
					charged(mode+" image", a)

					a = api.do(t, c.key, call{model: m.id, prompt: "please find red green blue [[mock:tool=lookup]]", stream: stream, tool: "lookup"})
					if a.finish != finishTool || a.toolName != "lookup" || a.toolID == "" {
						t.Fatalf("%s tool call: %+v", mode, a)
					}
					var args struct{ Text string }
					if err := json.Unmarshal([]byte(a.toolArgs), &args); err != nil || args.Text != "please find red green blue" {
						t.Errorf("%s tool arguments %q: %v", mode, a.toolArgs, err)
					}
					charged(mode+" tool call", a)
					r := api.toolResult(t, c.key, call{model: m.id, prompt: "please find red green blue [[mock:tool=lookup]]", stream: stream, tool: "lookup"}, a, "found it")
					if r.text == "" || r.finish != finishStop {
						t.Errorf("%s tool result: %+v", mode, r)
					}
					charged(mode+" tool result", r)
				}
			})
		}
	}
}

// TestStopSequencesThroughAnyChatAPI: stop sequences reach the upstreams that have them;
// a Responses upstream has none, so a stop sequence toward it is refused, naming the
// field, and nothing is charged.
func TestStopSequencesThroughAnyChatAPI(t *testing.T) {
	t.Parallel()
	for _, api := range chatAPIs {
		if api.name == "responses" {
			continue // the Responses API has no stop sequences
		}
		for _, m := range chatModels {
			t.Run(api.name+"/"+m.id, func(t *testing.T) {
				t.Parallel()
				c := newCustomer(t, customerOpts{topup: "10"})
				if m.id == "demo-responses" {
					status, body := rawChatCall(t, c.key, api.name, m.id, `"stop":["gamma"]`, `"stop_sequences":["gamma"]`)
					if status != 400 || !strings.Contains(body, "stop") {
						t.Errorf("stop toward Responses: %d %s, want 400 naming the stop field", status, body)
					}
					if got := c.balance(t); got != 10_000_000 {
						t.Errorf("refused request charged: balance %d", got)
					}
					return
				}
				for _, stream := range []bool{false, true} {
					a := api.do(t, c.key, call{model: m.id, prompt: "alpha beta gamma delta", stream: stream, stop: []string{"gamma"}})
					want := finishStop
					if api.name == "messages" && m.id != "demo-chat" {
						// Chat Completions does not say which stop sequence matched: a
						// Messages client of an OpenAI chat model sees end_turn.
						want = finishSeq
					}
					if a.finish != want || strings.Contains(a.text, "gamma") || strings.Contains(a.text, "delta") {
						t.Errorf("stream %v: %+v, want finish %s before gamma", stream, a, want)
					}
				}
			})
		}
	}
}

// TestTranslatedErrorsInTheClientsEnvelope: an upstream failure reaches the client in
// its own API's envelope whatever the upstream spoke, and charges nothing.
func TestTranslatedErrorsInTheClientsEnvelope(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	for _, tc := range []struct{ model, code string }{
		{"demo-exhausted", "upstream_account_unavailable"},
		{"demo-broken", "upstream_error"},
		// Nothing listens behind its channel: Envoy's connect failure, then the channel
		// cooling on extproc, both answer service_unavailable.
		{"demo-unreachable", "service_unavailable"},
	} {
		for _, api := range []string{"chat", "messages", "responses"} {
			status, body := rawChatCall(t, c.key, api, tc.model, "", "")
			if status < 500 || !strings.Contains(body, tc.code) {
				t.Errorf("%s through %s: %d %s", tc.model, api, status, body)
			}
			if api == "messages" && !strings.Contains(body, `"type":"error"`) {
				t.Errorf("%s through messages: not the Anthropic envelope: %s", tc.model, body)
			}
		}
	}
	if got := micros(t, c.waitSettled(t), "balance"); got != 10_000_000 {
		t.Errorf("failed calls charged: balance %d", got)
	}
}

// TestCountTokensForEveryChatModel: count_tokens answers for any chat model, unbilled.
func TestCountTokensForEveryChatModel(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "1"})
	client := anthropicClient(c.key)
	models := []string{"demo-failover"} // several channels: counted, never routed
	for _, m := range chatModels {
		models = append(models, m.id)
	}
	for _, id := range models {
		res, err := client.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{
			Model:    anthropic.Model(id),
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("count these words please"))},
		})
		if err != nil || res.InputTokens <= 0 {
			t.Errorf("%s: %+v %v", id, res, err)
		}
	}
	if got := c.balance(t); got != 1_000_000 {
		t.Errorf("count_tokens charged: balance %d", got)
	}
}

// rawChatCall sends a minimal request of the API (extra is added to the chat body,
// extraMessages to the messages body) and returns the status and body.
func rawChatCall(t *testing.T, key, api, model, extra, extraMessages string) (int, string) {
	t.Helper()
	var path, body string
	switch api {
	case "chat":
		path, body = "/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"alpha beta gamma"}]`
		if extra != "" {
			body += "," + extra
		}
	case "messages":
		path, body = "/messages", `{"model":"`+model+`","max_tokens":50,"messages":[{"role":"user","content":"alpha beta gamma"}]`
		if extraMessages != "" {
			body += "," + extraMessages
		}
	default:
		path, body = "/responses", `{"model":"`+model+`","input":"alpha beta gamma"`
	}
	status, _, b := rawRequest(t, "POST", path, key, []byte(body+"}"))
	return status, string(b)
}

// --- OpenAI Chat Completions ---

func chatParams(c call) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{Model: c.model}
	if c.system != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(c.system))
	}
	if c.image {
		p.Messages = append(p.Messages, openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart(c.prompt),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64," + tinyPNG}),
		}))
	} else {
		p.Messages = append(p.Messages, openai.UserMessage(c.prompt))
	}
	if c.maxTokens > 0 {
		p.MaxCompletionTokens = openai.Int(c.maxTokens)
	}
	if len(c.stop) > 0 {
		p.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: c.stop}
	}
	if c.tool != "" {
		p.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: c.tool, Parameters: shared.FunctionParameters(lookupSchema()),
		})}
	}
	if c.stream {
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	}
	return p
}

func chatRun(t *testing.T, key string, c call, p openai.ChatCompletionNewParams) answer {
	t.Helper()
	client := openaiClient(key)
	var cc openai.ChatCompletion
	if c.stream {
		s := client.Chat.Completions.NewStreaming(context.Background(), p)
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			if m := s.Current().Model; m != c.model {
				t.Errorf("chunk model %q, want %q", m, c.model)
			}
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatalf("chat stream %s: %v", c.model, err)
		}
		cc = acc.ChatCompletion
	} else {
		r, err := client.Chat.Completions.New(context.Background(), p)
		if err != nil {
			t.Fatalf("chat %s: %v", c.model, err)
		}
		cc = *r
	}
	if cc.Model != c.model || len(cc.Choices) != 1 {
		t.Fatalf("chat %s: model %q, %d choices", c.model, cc.Model, len(cc.Choices))
	}
	ch := cc.Choices[0]
	a := answer{text: ch.Message.Content, in: cc.Usage.PromptTokens, out: cc.Usage.CompletionTokens}
	switch ch.FinishReason {
	case "stop":
		a.finish = finishStop
	case "length":
		a.finish = finishLength
	case "tool_calls":
		a.finish = finishTool
	default:
		a.finish = ch.FinishReason
	}
	if len(ch.Message.ToolCalls) > 0 {
		tc := ch.Message.ToolCalls[0]
		a.toolID, a.toolName, a.toolArgs = tc.ID, tc.Function.Name, tc.Function.Arguments
	}
	return a
}

func chatDo(t *testing.T, key string, c call) answer { return chatRun(t, key, c, chatParams(c)) }

func chatToolResult(t *testing.T, key string, c call, a answer, result string) answer {
	p := chatParams(c)
	p.Messages = append(p.Messages,
		openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
			// No content, as the SDK's own message.ToParam() sends it.
			ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: a.toolID, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: a.toolName, Arguments: a.toolArgs},
			}}},
		}},
		openai.ToolMessage(result, a.toolID))
	return chatRun(t, key, c, p)
}

// --- Anthropic Messages ---

func messagesParams(c call) anthropic.MessageNewParams {
	maxTokens := c.maxTokens
	if maxTokens == 0 {
		maxTokens = 1000
	}
	blocks := []anthropic.ContentBlockParamUnion{anthropic.NewTextBlock(c.prompt)}
	if c.image {
		blocks = append(blocks, anthropic.NewImageBlockBase64("image/png", tinyPNG))
	}
	p := anthropic.MessageNewParams{
		Model:     anthropic.Model(c.model),
		MaxTokens: maxTokens,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(blocks...)},
	}
	if c.system != "" {
		p.System = []anthropic.TextBlockParam{{Text: c.system}}
	}
	if len(c.stop) > 0 {
		p.StopSequences = c.stop
	}
	if c.tool != "" {
		p.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name:        c.tool,
			InputSchema: anthropic.ToolInputSchemaParam{Properties: lookupSchema()["properties"], Required: []string{"text"}},
		}}}
	}
	return p
}

func messagesRun(t *testing.T, key string, c call, p anthropic.MessageNewParams) answer {
	t.Helper()
	client := anthropicClient(key)
	var msg anthropic.Message
	if c.stream {
		s := client.Messages.NewStreaming(context.Background(), p)
		for s.Next() {
			if err := msg.Accumulate(s.Current()); err != nil {
				t.Fatalf("messages stream %s: %v", c.model, err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("messages stream %s: %v", c.model, err)
		}
	} else {
		r, err := client.Messages.New(context.Background(), p)
		if err != nil {
			t.Fatalf("messages %s: %v", c.model, err)
		}
		msg = *r
	}
	if string(msg.Model) != c.model {
		t.Fatalf("messages %s: model %q", c.model, msg.Model)
	}
	a := answer{
		in:  msg.Usage.InputTokens + msg.Usage.CacheReadInputTokens + msg.Usage.CacheCreationInputTokens,
		out: msg.Usage.OutputTokens,
	}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			a.text += b.Text
		case "tool_use":
			a.toolID, a.toolName, a.toolArgs = b.ID, b.Name, string(b.Input)
		}
	}
	switch msg.StopReason {
	case "end_turn":
		a.finish = finishStop
	case "max_tokens":
		a.finish = finishLength
	case "tool_use":
		a.finish = finishTool
	case "stop_sequence":
		a.finish = finishSeq
	default:
		a.finish = string(msg.StopReason)
	}
	return a
}

func messagesDo(t *testing.T, key string, c call) answer {
	return messagesRun(t, key, c, messagesParams(c))
}

func messagesToolResult(t *testing.T, key string, c call, a answer, result string) answer {
	p := messagesParams(c)
	p.Messages = append(p.Messages,
		anthropic.NewAssistantMessage(anthropic.NewToolUseBlock(a.toolID, json.RawMessage(a.toolArgs), a.toolName)),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(a.toolID, result, false)))
	return messagesRun(t, key, c, p)
}

// --- OpenAI Responses ---

func responsesParams(c call) responses.ResponseNewParams {
	content := responses.ResponseInputMessageContentListParam{responses.ResponseInputContentParamOfInputText(c.prompt)}
	if c.image {
		img := responses.ResponseInputContentParamOfInputImage(responses.ResponseInputImageDetailAuto)
		img.OfInputImage.ImageURL = openai.String("data:image/png;base64," + tinyPNG)
		content = append(content, img)
	}
	p := responses.ResponseNewParams{
		Model: c.model,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage(content, responses.EasyInputMessageRoleUser),
		}},
	}
	if c.system != "" {
		p.Instructions = openai.String(c.system)
	}
	if c.maxTokens > 0 {
		p.MaxOutputTokens = openai.Int(c.maxTokens)
	}
	if c.tool != "" {
		p.Tools = []responses.ToolUnionParam{responses.ToolParamOfFunction(c.tool, lookupSchema(), false)}
	}
	return p
}

func responsesRun(t *testing.T, key string, c call, p responses.ResponseNewParams) answer {
	t.Helper()
	client := openaiClient(key)
	var r responses.Response
	if c.stream {
		s := client.Responses.NewStreaming(context.Background(), p)
		done := false
		for s.Next() {
			ev := s.Current()
			switch ev.Type {
			case "response.completed", "response.incomplete":
				r, done = ev.Response, true
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("responses stream %s: %v", c.model, err)
		}
		if !done {
			t.Fatalf("responses stream %s: no response.completed", c.model)
		}
	} else {
		res, err := client.Responses.New(context.Background(), p)
		if err != nil {
			t.Fatalf("responses %s: %v", c.model, err)
		}
		r = *res
	}
	if r.Model != c.model {
		t.Fatalf("responses %s: model %q", c.model, r.Model)
	}
	a := answer{text: r.OutputText(), in: r.Usage.InputTokens, out: r.Usage.OutputTokens}
	for _, it := range r.Output {
		if it.Type == "function_call" {
			a.toolID, a.toolName, a.toolArgs = it.CallID, it.Name, it.Arguments.OfString
		}
	}
	switch {
	case r.Status == "incomplete":
		a.finish = finishLength
	case a.toolID != "":
		a.finish = finishTool
	case r.Status == "completed":
		a.finish = finishStop
	default:
		a.finish = string(r.Status)
	}
	return a
}

func responsesDo(t *testing.T, key string, c call) answer {
	return responsesRun(t, key, c, responsesParams(c))
}

func responsesToolResult(t *testing.T, key string, c call, a answer, result string) answer {
	p := responsesParams(c)
	out := responses.ResponseInputItemParamOfFunctionCallOutput(result)
	out.OfFunctionCallOutput.CallID = openai.String(a.toolID)
	p.Input.OfInputItemList = append(p.Input.OfInputItemList,
		responses.ResponseInputItemParamOfFunctionCall(a.toolArgs, a.toolID, a.toolName), out)
	return responsesRun(t, key, c, p)
}
