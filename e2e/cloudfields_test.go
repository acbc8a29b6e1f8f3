package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/llmgw/gateway/internal/testkit"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// TestCloudRefusalsByTable: what a cloud API's table refuses (docs/translation.md,
// "Toward each upstream API") reaches the official SDKs as 400 invalid_request in the
// client's envelope, naming the client's field with the table's words, not retryable;
// nothing is held or charged.
func TestCloudRefusalsByTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCustomer(t, customerOpts{topup: "10"})
	before := c.balance(t)
	oc := openaiClient(c.key)

	// Bedrock's Converse has no structured output.
	_, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "demo-bedrock",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{
			OfJSONObject: &shared.ResponseFormatJSONObjectParam{}},
	})
	checkOpenAIRefusal(t, "chat→bedrock", err, "response_format",
		"This model's upstream API cannot take the JSON output (json_object): it has no structured output format.")

	// Claude on Vertex AI takes a temperature up to 1.
	_, err = oc.Responses.New(ctx, responses.ResponseNewParams{
		Model: "demo-vertex-claude", Temperature: openai.Float(1.5),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	checkOpenAIRefusal(t, "responses→vertex-anthropic", err, "temperature",
		"This model's upstream API cannot take the temperature above 1: it takes a temperature between 0 and 1.")

	// Gemini takes images by their bytes only.
	ac := anthropicClient(c.key)
	_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{
		Model: "demo-gemini", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(
			anthropic.NewTextBlock("what is this?"),
			anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: "https://example.com/cat.png"}))},
	})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest {
		t.Fatalf("messages→gemini: err = %v", err)
	}
	var env testkit.ErrorEnvelope
	if err := json.Unmarshal([]byte(ae.RawJSON()), &env); err != nil || env.Type != "error" ||
		env.Error.Type != "invalid_request_error" || env.Error.Code != "invalid_request" ||
		env.Error.Message != "This model's upstream API cannot take the image given by URL: it takes images by their bytes only; send the image's bytes." {
		t.Errorf("messages→gemini: envelope %s (%v)", ae.RawJSON(), err)
	}
	if got := ae.Response.Header.Get("x-should-retry"); got != "false" {
		t.Errorf("messages→gemini: x-should-retry = %q", got)
	}

	if got := micros(t, c.waitSettled(t), "balance"); got != before {
		t.Errorf("balance %d, want %d", got, before)
	}
	if n := reservationCount(t, c.keyID); n != 0 {
		t.Errorf("%d reservations, want none", n)
	}
}

// checkOpenAIRefusal asserts an openai-go error is the gateway's 400 invalid_request
// naming param with msg, not retryable.
func checkOpenAIRefusal(t *testing.T, name string, err error, param, msg string) {
	t.Helper()
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusBadRequest || oe.Code != "invalid_request" ||
		oe.Param != param || oe.Message != msg {
		t.Errorf("%s: err = %v, want 400 invalid_request naming %s: %q", name, err, param, msg)
		return
	}
	if got := oe.Response.Header.Get("x-should-retry"); got != "false" {
		t.Errorf("%s: x-should-retry = %q", name, got)
	}
}
