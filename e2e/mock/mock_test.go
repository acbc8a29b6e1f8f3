package mock_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"image/png"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicopt "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmgw/gateway/e2e/mock"
)

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(mock.New())
	t.Cleanup(srv.Close)
	return srv
}

func openAIClient(srv *httptest.Server, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

func anthropicClient(srv *httptest.Server, key string) anthropic.Client {
	return anthropic.NewClient(anthropicopt.WithBaseURL(srv.URL+"/"), anthropicopt.WithAPIKey(key), anthropicopt.WithMaxRetries(0))
}

// post sends a JSON request and returns status, headers and body.
func post(t *testing.T, url string, headers map[string]string, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

var openAIKey = map[string]string{"Authorization": "Bearer sk-mock-openai"}

func TestChatCompletionNotStreamed(t *testing.T) {
	srv := newServer(t)
	c := openAIClient(srv, "sk-mock-openai")
	tests := []struct {
		name       string
		prompt     string
		maxTokens  int64
		wantText   string
		wantTokens int64
		wantFinish string
	}{
		{name: "echo", prompt: "hello there world", wantText: "hello there world", wantTokens: 3, wantFinish: "stop"},
		{name: "tokens directive", prompt: "a b [[mock:tokens=5]]", wantText: "a b a b a", wantTokens: 5, wantFinish: "stop"},
		{name: "max tokens cut", prompt: "one two three four", maxTokens: 2, wantText: "one two", wantTokens: 2, wantFinish: "length"},
		{name: "empty prompt", prompt: "[[mock:tokens=1]]", wantText: "ok", wantTokens: 1, wantFinish: "stop"},
		{name: "pad directive", prompt: "a b [[mock:pad=4]]", wantText: "a b....", wantTokens: 2, wantFinish: "stop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := openai.ChatCompletionNewParams{
				Model: "mock-gpt",
				Messages: []openai.ChatCompletionMessageParamUnion{
					openai.SystemMessage("be brief"), openai.UserMessage(tt.prompt),
				},
			}
			if tt.maxTokens > 0 {
				p.MaxTokens = openai.Int(tt.maxTokens)
			}
			got, err := c.Chat.Completions.New(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			if got.Model != "mock-gpt" || got.Object != "chat.completion" {
				t.Errorf("model/object = %q/%q", got.Model, got.Object)
			}
			if got.Choices[0].Message.Content != tt.wantText || got.Choices[0].FinishReason != tt.wantFinish {
				t.Errorf("content %q finish %q, want %q %q", got.Choices[0].Message.Content, got.Choices[0].FinishReason, tt.wantText, tt.wantFinish)
			}
			wantPrompt := int64(2 + len(strings.Fields(tt.prompt)))
			if got.Usage.CompletionTokens != tt.wantTokens || got.Usage.PromptTokens != wantPrompt ||
				got.Usage.TotalTokens != wantPrompt+tt.wantTokens {
				t.Errorf("usage = %+v, want prompt %d completion %d", got.Usage, wantPrompt, tt.wantTokens)
			}
		})
	}
}

// sseData returns the data payloads of an SSE body, in order.
func sseData(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestChatCompletionStreamedWireFormat(t *testing.T) {
	srv := newServer(t)
	tests := []struct {
		name         string
		includeUsage bool
	}{
		{name: "with usage", includeUsage: true},
		{name: "without usage", includeUsage: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"model":"mock-gpt","stream":true,"messages":[{"role":"user","content":"x y [[mock:tokens=4]]"}]`
			if tt.includeUsage {
				body += `,"stream_options":{"include_usage":true}`
			}
			status, h, b := post(t, srv.URL+"/v1/chat/completions", openAIKey, body+"}")
			if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d content-type %q", status, h.Get("Content-Type"))
			}
			data := sseData(t, b)
			if data[len(data)-1] != "[DONE]" {
				t.Fatalf("last event %q, want [DONE]", data[len(data)-1])
			}
			chunks := data[:len(data)-1]
			var content []string
			for i, d := range chunks {
				var m map[string]json.RawMessage
				if err := json.Unmarshal([]byte(d), &m); err != nil {
					t.Fatal(err)
				}
				if string(m["object"]) != `"chat.completion.chunk"` || string(m["model"]) != `"mock-gpt"` {
					t.Errorf("chunk %d: object %s model %s", i, m["object"], m["model"])
				}
				u, has := m["usage"]
				last := i == len(chunks)-1
				switch {
				case !tt.includeUsage && has:
					t.Errorf("chunk %d carries usage without include_usage", i)
				case tt.includeUsage && !last && string(u) != "null":
					t.Errorf("chunk %d usage = %s, want null", i, u)
				case tt.includeUsage && last && string(m["choices"]) != "[]":
					t.Errorf("usage chunk choices = %s, want []", m["choices"])
				}
				var choices []struct {
					Delta struct {
						Content *string `json:"content"`
					} `json:"delta"`
				}
				_ = json.Unmarshal(m["choices"], &choices)
				if len(choices) == 1 && choices[0].Delta.Content != nil && *choices[0].Delta.Content != "" {
					content = append(content, *choices[0].Delta.Content)
				}
			}
			if strings.Join(content, "|") != "x| y| x| y" {
				t.Errorf("content chunks %q, want 4 tokens", content)
			}
		})
	}
}

func TestChatCompletionStreamedSDK(t *testing.T) {
	srv := newServer(t)
	c := openAIClient(srv, "sk-mock-openai")
	stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "mock-small",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream me [[mock:tokens=6]]")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	acc := openai.ChatCompletionAccumulator{}
	n := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		n++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != "stream me stream me stream me" || acc.Model != "mock-small" {
		t.Errorf("content %q model %q", acc.Choices[0].Message.Content, acc.Model)
	}
	if acc.Usage.CompletionTokens != 6 || acc.Usage.PromptTokens != 3 {
		t.Errorf("usage %+v", acc.Usage)
	}
	// role chunk + 6 tokens + finish + usage
	if n != 9 {
		t.Errorf("%d chunks, want 9", n)
	}
}

func TestStreamCutDropsConnection(t *testing.T) {
	srv := newServer(t)
	tests := []struct {
		name, path, body string
		headers          map[string]string
	}{
		{name: "chat", path: "/v1/chat/completions", headers: openAIKey,
			body: `{"model":"mock-gpt","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"[[mock:cut]] [[mock:tokens=10]]"}]}`},
		{name: "messages", path: "/v1/messages", headers: map[string]string{"X-Api-Key": "sk-mock-anthropic", "Anthropic-Version": "2023-06-01"},
			body: `{"model":"mock-claude","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"[[mock:cut]] [[mock:tokens=10]]"}]}`},
		{name: "responses", path: "/v1/responses", headers: openAIKey,
			body: `{"model":"mock-gpt","stream":true,"input":"[[mock:cut]] [[mock:tokens=10]]"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+tt.path, strings.NewReader(tt.body))
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err == nil {
				t.Fatalf("stream ended cleanly, want a dropped connection; body:\n%s", b)
			}
			if bytes.Contains(b, []byte("usage\":{\"prompt")) || bytes.Contains(b, []byte("[DONE]")) ||
				bytes.Contains(b, []byte("message_delta")) || bytes.Contains(b, []byte("response.completed")) {
				t.Errorf("cut stream carries its end or usage:\n%s", b)
			}
			if !bytes.Contains(b, []byte("data: ")) {
				t.Errorf("cut stream sent no chunks before dropping")
			}
		})
	}
}

func TestSlowDirectiveStillAnswers(t *testing.T) {
	srv := newServer(t)
	c := openAIClient(srv, "sk-mock-openai")
	for _, stream := range []bool{false, true} {
		body := `{"model":"mock-gpt","messages":[{"role":"user","content":"[[mock:slow=1]] [[mock:tokens=2]]"}],"stream":` +
			map[bool]string{true: "true", false: "false"}[stream] + `}`
		status, _, b := post(t, srv.URL+"/v1/chat/completions", openAIKey, body)
		if status != 200 || !bytes.Contains(b, []byte("completion")) {
			t.Errorf("stream=%v: status %d body %s", stream, status, b)
		}
	}
	_ = c
}

func TestAnthropicMessages(t *testing.T) {
	srv := newServer(t)
	c := anthropicClient(srv, "sk-mock-anthropic")
	params := anthropic.MessageNewParams{
		Model:     "mock-claude",
		MaxTokens: 50,
		System:    []anthropic.TextBlockParam{{Text: "sys prompt"}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi claude [[mock:tokens=3]]"))},
	}
	t.Run("not streamed", func(t *testing.T) {
		m, err := c.Messages.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		if m.Model != "mock-claude" || m.Content[0].Text != "hi claude hi" || m.StopReason != "end_turn" {
			t.Errorf("message %+v", m)
		}
		if m.Usage.InputTokens != 5 || m.Usage.OutputTokens != 3 {
			t.Errorf("usage %+v", m.Usage)
		}
	})
	t.Run("streamed", func(t *testing.T) {
		stream := c.Messages.NewStreaming(context.Background(), params)
		var acc anthropic.Message
		var kinds []string
		for stream.Next() {
			ev := stream.Current()
			kinds = append(kinds, ev.Type)
			if err := acc.Accumulate(ev); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		// The SDK drops ping; the raw stream below checks it.
		want := "message_start content_block_start content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop"
		if strings.Join(kinds, " ") != want {
			t.Errorf("events %v", kinds)
		}
		if acc.Content[0].Text != "hi claude hi" || acc.Usage.InputTokens != 5 || acc.Usage.OutputTokens != 3 || acc.Model != "mock-claude" {
			t.Errorf("accumulated %q usage %+v model %s", acc.Content[0].Text, acc.Usage, acc.Model)
		}
	})
	t.Run("raw event names", func(t *testing.T) {
		_, _, b := post(t, srv.URL+"/v1/messages", map[string]string{"X-Api-Key": "sk-mock-anthropic", "Anthropic-Version": "2023-06-01"},
			`{"model":"mock-claude","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"a [[mock:tokens=2]]"}]}`)
		var names []string
		for _, line := range strings.Split(string(b), "\n") {
			if n, ok := strings.CutPrefix(line, "event: "); ok {
				names = append(names, n)
			}
		}
		want := "message_start content_block_start ping content_block_delta content_block_delta content_block_stop message_delta message_stop"
		if strings.Join(names, " ") != want {
			t.Errorf("events %v", names)
		}
		for _, d := range sseData(t, b) {
			var m struct{ Type string }
			if err := json.Unmarshal([]byte(d), &m); err != nil || m.Type == "" {
				t.Errorf("data without type: %s", d)
			}
		}
	})
	t.Run("max tokens", func(t *testing.T) {
		p := params
		p.MaxTokens = 2
		m, err := c.Messages.New(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		if m.StopReason != "max_tokens" || m.Usage.OutputTokens != 2 {
			t.Errorf("stop %s usage %+v", m.StopReason, m.Usage)
		}
	})
}

func TestResponses(t *testing.T) {
	srv := newServer(t)
	c := openAIClient(srv, "sk-mock-openai")
	params := responses.ResponseNewParams{
		Model: "mock-gpt",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("tell me [[mock:tokens=4]]")},
	}
	t.Run("not streamed", func(t *testing.T) {
		r, err := c.Responses.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		if r.Model != "mock-gpt" || r.OutputText() != "tell me tell me" || r.Status != "completed" {
			t.Errorf("response model %s text %q status %s", r.Model, r.OutputText(), r.Status)
		}
		if r.Usage.InputTokens != 3 || r.Usage.OutputTokens != 4 || r.Usage.TotalTokens != 7 {
			t.Errorf("usage %+v", r.Usage)
		}
	})
	t.Run("streamed", func(t *testing.T) {
		stream := c.Responses.NewStreaming(context.Background(), params)
		var deltas []string
		var completed *responses.Response
		var first string
		for stream.Next() {
			ev := stream.Current()
			if first == "" {
				first = ev.Type
			}
			switch ev.Type {
			case "response.output_text.delta":
				deltas = append(deltas, ev.Delta)
			case "response.completed":
				r := ev.Response
				completed = &r
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if first != "response.created" || len(deltas) != 4 || strings.Join(deltas, "") != "tell me tell me" {
			t.Errorf("first %s deltas %q", first, deltas)
		}
		if completed == nil || completed.Usage.OutputTokens != 4 || completed.Usage.InputTokens != 3 || completed.Model != "mock-gpt" {
			t.Errorf("completed %+v", completed)
		}
	})
}

func TestEmbeddings(t *testing.T) {
	srv := newServer(t)
	tests := []struct {
		name, body string
		wantItems  int
		wantDims   int
		wantTokens int
		base64     bool
	}{
		{name: "float string", body: `{"model":"mock-embed","input":"a b c"}`, wantItems: 1, wantDims: 16, wantTokens: 3},
		{name: "float array dims", body: `{"model":"mock-embed","input":["a","b c"],"dimensions":5}`, wantItems: 2, wantDims: 5, wantTokens: 3},
		{name: "base64", body: `{"model":"mock-embed","input":"a b","encoding_format":"base64","dimensions":7}`, wantItems: 1, wantDims: 7, wantTokens: 2, base64: true},
		{name: "token arrays", body: `{"model":"mock-embed","input":[[1,2,3],[4]]}`, wantItems: 2, wantDims: 16, wantTokens: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, b := post(t, srv.URL+"/v1/embeddings", openAIKey, tt.body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, b)
			}
			var got struct {
				Object string `json:"object"`
				Model  string `json:"model"`
				Data   []struct {
					Object    string          `json:"object"`
					Index     int             `json:"index"`
					Embedding json.RawMessage `json:"embedding"`
				} `json:"data"`
				Usage struct{ PromptTokens, TotalTokens int } `json:"usage"`
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if got.Object != "list" || got.Model != "mock-embed" || len(got.Data) != tt.wantItems {
				t.Fatalf("got %s", b)
			}
			var u struct {
				PromptTokens int `json:"prompt_tokens"`
				TotalTokens  int `json:"total_tokens"`
			}
			_ = json.Unmarshal(b[bytes.Index(b, []byte(`"usage"`))+8:len(b)-1], &u)
			if u.PromptTokens != tt.wantTokens || u.TotalTokens != tt.wantTokens {
				t.Errorf("usage %+v, want %d", u, tt.wantTokens)
			}
			for i, d := range got.Data {
				var vec []float32
				if tt.base64 {
					var s string
					if err := json.Unmarshal(d.Embedding, &s); err != nil {
						t.Fatalf("base64 embedding is not a string: %s", d.Embedding)
					}
					raw, err := base64.StdEncoding.DecodeString(s)
					if err != nil {
						t.Fatal(err)
					}
					for j := 0; j+4 <= len(raw); j += 4 {
						vec = append(vec, math.Float32frombits(binary.LittleEndian.Uint32(raw[j:])))
					}
				} else if err := json.Unmarshal(d.Embedding, &vec); err != nil {
					t.Fatal(err)
				}
				if len(vec) != tt.wantDims || d.Index != i || d.Object != "embedding" {
					t.Errorf("item %d: %d dims index %d", i, len(vec), d.Index)
				}
			}
		})
	}
	// Deterministic: the same input gives the same vector.
	_, _, a := post(t, srv.URL+"/v1/embeddings", openAIKey, `{"model":"mock-embed","input":"same"}`)
	_, _, b := post(t, srv.URL+"/v1/embeddings", openAIKey, `{"model":"mock-embed","input":"same"}`)
	if !bytes.Equal(a, b) {
		t.Error("embeddings are not deterministic")
	}
}

func TestSpeech(t *testing.T) {
	srv := newServer(t)
	tests := []struct {
		format, wantType string
		magic            string
	}{
		{"", "audio/mpeg", "ID3"},
		{"mp3", "audio/mpeg", "ID3"},
		{"opus", "audio/ogg", "OggS"},
		{"aac", "audio/aac", "\xff\xf1"},
		{"flac", "audio/flac", "fLaC"},
		{"wav", "audio/wav", "RIFF"},
		{"pcm", "application/octet-stream", ""},
	}
	for _, tt := range tests {
		t.Run("format "+tt.format, func(t *testing.T) {
			body := `{"model":"mock-tts","input":"hello","voice":"alloy"`
			if tt.format != "" {
				body += `,"response_format":"` + tt.format + `"`
			}
			status, h, b := post(t, srv.URL+"/v1/audio/speech", openAIKey, body+"}")
			if status != 200 || h.Get("Content-Type") != tt.wantType || !bytes.HasPrefix(b, []byte(tt.magic)) || len(b) < 5*64 {
				t.Errorf("status %d type %q len %d prefix %q", status, h.Get("Content-Type"), len(b), b[:min(4, len(b))])
			}
		})
	}
}

func TestImages(t *testing.T) {
	srv := newServer(t)
	c := openAIClient(srv, "sk-mock-openai")
	t.Run("url", func(t *testing.T) {
		r, err := c.Images.Generate(context.Background(), openai.ImageGenerateParams{Model: "mock-image", Prompt: "a cat"})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Data) != 1 || !strings.HasPrefix(r.Data[0].URL, "https://") {
			t.Errorf("data %+v", r.Data)
		}
	})
	t.Run("b64_json", func(t *testing.T) {
		r, err := c.Images.Generate(context.Background(), openai.ImageGenerateParams{
			Model: "mock-image", Prompt: "a cat", ResponseFormat: openai.ImageGenerateParamsResponseFormatB64JSON,
		})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base64.StdEncoding.DecodeString(r.Data[0].B64JSON)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(bytes.NewReader(raw)); err != nil {
			t.Errorf("b64_json is not a PNG: %v", err)
		}
	})
}

func TestVideoTasks(t *testing.T) {
	srv := newServer(t)
	status, _, b := post(t, srv.URL+"/v1/video/generations", map[string]string{"Authorization": "Bearer sk-mock-video"},
		`{"model":"mock-video","prompt":"a wave","duration":4}`)
	var task map[string]any
	if err := json.Unmarshal(b, &task); err != nil || status != 200 {
		t.Fatalf("submit: %d %s", status, b)
	}
	id, _ := task["id"].(string)
	if id == "" || task["model"] != "mock-video" || task["duration"] != float64(4) || task["status"] != "queued" {
		t.Fatalf("task %v", task)
	}
	get := func(key string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/videos/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	if st, m := get("sk-mock-video"); st != 200 || m["id"] != id || (m["status"] != "in_progress" && m["status"] != "completed") {
		t.Errorf("get: %d %v", st, m)
	}
	if st, _ := get("sk-mock-other"); st != 404 {
		t.Errorf("another credential reads the task: %d", st)
	}
}

func TestFailures(t *testing.T) {
	srv := newServer(t)
	chat := `{"model":"mock-gpt","messages":[{"role":"user","content":"hi"}]}`
	msgs := `{"model":"mock-claude","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	av := "2023-06-01"
	tests := []struct {
		name, path, body string
		headers          map[string]string
		wantStatus       int
		wantType         string // content type prefix
		wantBody         string
	}{
		{name: "openai exhausted", path: "/v1/chat/completions", body: chat,
			headers:    map[string]string{"Authorization": "Bearer sk-mock-exhausted"},
			wantStatus: 429, wantType: "application/json", wantBody: `"code":"insufficient_quota"`},
		{name: "openai wrong key", path: "/v1/chat/completions", body: chat,
			headers:    map[string]string{"Authorization": "Bearer sk-real-key"},
			wantStatus: 401, wantType: "application/json", wantBody: `"code":"invalid_api_key"`},
		{name: "openai no key", path: "/v1/embeddings", body: `{"model":"mock-embed","input":"x"}`,
			wantStatus: 401, wantType: "application/json", wantBody: `"invalid_api_key"`},
		{name: "anthropic exhausted", path: "/v1/messages", body: msgs,
			headers:    map[string]string{"X-Api-Key": "sk-mock-exhausted", "Anthropic-Version": av},
			wantStatus: 400, wantType: "application/json", wantBody: `Your credit balance is too low`},
		{name: "anthropic wrong key", path: "/v1/messages", body: msgs,
			headers:    map[string]string{"X-Api-Key": "nope", "Anthropic-Version": av},
			wantStatus: 401, wantType: "application/json", wantBody: `"type":"authentication_error"`},
		{name: "anthropic bearer is not its credential", path: "/v1/messages", body: msgs,
			headers:    map[string]string{"Authorization": "Bearer sk-mock-anthropic", "Anthropic-Version": av},
			wantStatus: 401, wantType: "application/json", wantBody: `authentication_error`},
		{name: "gateway key leaked in authorization", path: "/v1/chat/completions", body: chat,
			headers:    map[string]string{"Authorization": "Bearer gw-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"},
			wantStatus: 400, wantType: "application/json", wantBody: `gateway key leaked to provider`},
		{name: "gateway key leaked in another header", path: "/v1/messages", body: msgs,
			headers:    map[string]string{"X-Api-Key": "sk-mock-anthropic", "Anthropic-Version": av, "X-Something": "gw-secret"},
			wantStatus: 400, wantType: "application/json", wantBody: `gateway key leaked to provider`},
		{name: "broken model", path: "/v1/chat/completions", body: `{"model":"mock-broken","messages":[{"role":"user","content":"hi"}]}`,
			headers: openAIKey, wantStatus: 200, wantType: "text/html", wantBody: "<html>"},
		{name: "broken model streamed", path: "/v1/chat/completions", body: `{"model":"mock-broken","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			headers: openAIKey, wantStatus: 200, wantType: "text/html", wantBody: "<html>"},
		{name: "invalid json", path: "/v1/chat/completions", body: `{`, headers: openAIKey,
			wantStatus: 400, wantType: "application/json", wantBody: "invalid_request_error"},
		{name: "anthropic version missing", path: "/v1/messages", body: msgs,
			headers:    map[string]string{"X-Api-Key": "sk-mock-anthropic"},
			wantStatus: 400, wantType: "application/json", wantBody: "anthropic-version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, h, b := post(t, srv.URL+tt.path, tt.headers, tt.body)
			if status != tt.wantStatus || !strings.HasPrefix(h.Get("Content-Type"), tt.wantType) || !bytes.Contains(b, []byte(tt.wantBody)) {
				t.Errorf("got %d %q %s", status, h.Get("Content-Type"), b)
			}
			if tt.wantType == "text/html" && json.Valid(b) {
				t.Error("broken answer is valid JSON")
			}
		})
	}

	// The SDKs read these as the providers' own errors.
	oc := openAIClient(srv, "sk-mock-exhausted")
	_, err := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "mock-gpt", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var oerr *openai.Error
	if !errors.As(err, &oerr) || oerr.StatusCode != 429 || oerr.Code != "insufficient_quota" || oerr.Type != "insufficient_quota" {
		t.Errorf("openai SDK error = %v", err)
	}
	ac := anthropicClient(srv, "sk-mock-exhausted")
	_, err = ac.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "mock-claude", MaxTokens: 5, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != 400 {
		t.Errorf("anthropic SDK error = %v", err)
	}
}
