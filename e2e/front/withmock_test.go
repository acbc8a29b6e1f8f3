package front

import (
	"context"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicopt "github.com/anthropics/anthropic-sdk-go/option"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmgw/gateway/e2e/mock"
)

// credentialProc plays a minimal extproc: route to the mock providers with the
// provider credential in place of the client's, stream SSE responses (STREAMED),
// pass chunks unchanged.
func credentialProc(s *session) error {
	for m := s.next(); m != nil; m = s.next() {
		var r *extprocsvc.ProcessingResponse
		switch {
		case m.GetRequestHeaders() != nil:
			path := headerMap(m.GetRequestHeaders().GetHeaders())[":path"][0]
			if strings.HasPrefix(path, "/v1/messages") {
				r = routeTo("mock-providers", setHeader("x-api-key", "sk-mock-anthropic"), setHeader("anthropic-version", "2023-06-01"))
				// Removes run before sets: the client's x-api-key goes, ours stays.
			} else {
				r = routeTo("mock-providers", setHeader("authorization", "Bearer sk-mock-openai"))
			}
		case m.GetRequestBody() != nil:
			r = reqBodyReply(nil)
		case m.GetResponseHeaders() != nil:
			r = respHeadersReply(nil)
			ct := headerMap(m.GetResponseHeaders().GetHeaders())["content-type"]
			if len(ct) > 0 && strings.HasPrefix(ct[0], "text/event-stream") {
				r.ModeOverride = &extprocv3.ProcessingMode{RequestBodyMode: extprocv3.ProcessingMode_NONE, ResponseBodyMode: extprocv3.ProcessingMode_STREAMED}
			}
		case m.GetResponseBody() != nil:
			r = respBodyReply(nil)
		}
		if err := s.send(r); err != nil {
			return err
		}
	}
	return nil
}

func TestSDKsThroughFrontAndMock(t *testing.T) {
	h := newHarness(t, mock.New(), credentialProc, nil)
	t.Run("openai streamed", func(t *testing.T) {
		c := openai.NewClient(option.WithBaseURL(h.front.URL+"/v1/"), option.WithAPIKey("gw-client-key"), option.WithMaxRetries(0))
		stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
			Model:         "mock-gpt",
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("through the front [[mock:tokens=7]]")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if acc.Usage.CompletionTokens != 7 || !strings.HasPrefix(acc.Choices[0].Message.Content, "through the front") {
			t.Errorf("got %q usage %+v", acc.Choices[0].Message.Content, acc.Usage)
		}
	})
	t.Run("anthropic streamed", func(t *testing.T) {
		c := anthropic.NewClient(anthropicopt.WithBaseURL(h.front.URL+"/"), anthropicopt.WithAPIKey("gw-client-key"), anthropicopt.WithMaxRetries(0))
		stream := c.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
			Model: "mock-claude", MaxTokens: 20,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello [[mock:tokens=3]]"))},
		})
		var msg anthropic.Message
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if msg.Content[0].Text != "hello hello hello" || msg.Usage.OutputTokens != 3 {
			t.Errorf("got %q usage %+v", msg.Content[0].Text, msg.Usage)
		}
	})
	t.Run("gateway key never reaches the provider", func(t *testing.T) {
		status, _, b := h.do(t, "POST", "/v1/embeddings", map[string]string{"Authorization": "Bearer gw-client-key", "X-Api-Key": "gw-client-key"},
			strings.NewReader(`{"model":"mock-embed","input":"x"}`))
		if status != 200 || strings.Contains(string(b), "leaked") {
			t.Errorf("got %d %s", status, b)
		}
	})
}
