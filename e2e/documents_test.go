package e2e_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmgw/gateway/extproc/tokens"
	"github.com/llmgw/gateway/internal/pdfpages/pdfpagestest"
)

// documentPages is the size of the document the tests send: far past the 100 pages the
// gateway used to hold for any document.
const documentPages = 300

// TestDocumentChargedByPages sends a 300-page PDF by its bytes through each API with
// its official SDK and checks against the ledger that the hold covers the per-page
// bound of every page, and that the charge is exactly the catalog price of the mock
// provider's bill, which counts the pages from the same bytes: nothing is capped.
func TestDocumentChargedByPages(t *testing.T) {
	t.Parallel()
	data := pdfpagestest.BlankBase64(t, documentPages)
	pagesTokens := int64(documentPages * tokens.PageTokens)
	tests := []struct {
		name            string
		inPerM, outPerM int64
		send            func(key string) (in, out int64, err error)
	}{
		{name: "chat", inPerM: 1_000_000, outPerM: 2_000_000, send: func(key string) (int64, int64, error) {
			client := openaiClient(key)
			resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model:     "demo-chat",
				MaxTokens: openai.Int(16),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
					openai.TextContentPart("summarise [[mock:tokens=3]]"),
					openai.FileContentPart(openai.ChatCompletionContentPartFileFileParam{
						Filename: openai.String("a.pdf"), FileData: openai.String("data:application/pdf;base64," + data)}),
				})},
			})
			if err != nil {
				return 0, 0, err
			}
			return resp.Usage.PromptTokens, resp.Usage.CompletionTokens, nil
		}},
		{name: "responses", inPerM: 1_000_000, outPerM: 2_000_000, send: func(key string) (int64, int64, error) {
			client := openaiClient(key)
			resp, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
				Model:           "demo-responses",
				MaxOutputTokens: openai.Int(16),
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
					responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{
						{OfInputText: &responses.ResponseInputTextParam{Text: "summarise [[mock:tokens=3]]"}},
						{OfInputFile: &responses.ResponseInputFileParam{
							Filename: openai.String("a.pdf"), FileData: openai.String("data:application/pdf;base64," + data)}},
					}, responses.EasyInputMessageRoleUser),
				}},
			})
			if err != nil {
				return 0, 0, err
			}
			return resp.Usage.InputTokens, resp.Usage.OutputTokens, nil
		}},
		{name: "messages", inPerM: 3_000_000, outPerM: 15_000_000, send: func(key string) (int64, int64, error) {
			client := anthropicClient(key)
			resp, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
				Model:     "demo-claude",
				MaxTokens: 16,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(
					anthropic.NewTextBlock("summarise [[mock:tokens=3]]"),
					anthropic.NewDocumentBlock(anthropic.Base64PDFSourceParam{Data: data}),
				)},
			})
			if err != nil {
				return 0, 0, err
			}
			return resp.Usage.InputTokens, resp.Usage.OutputTokens, nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCustomer(t, customerOpts{topup: "10"})
			before := c.balance(t)
			in, out, err := tt.send(c.key)
			if err != nil {
				t.Fatal(err)
			}
			if in < pagesTokens {
				t.Fatalf("the provider billed %d input tokens, below the %d pages' %d", in, documentPages, pagesTokens)
			}
			hold := checkBill(t, c, before, tokenCost(in, out, tt.inPerM, tt.outPerM))
			if least := tokenCost(pagesTokens, 0, tt.inPerM, tt.outPerM); hold < least {
				t.Errorf("held %d, below the pages' bound %d", hold, least)
			}
		})
	}
}

// TestUncountableDocumentRefused sends a "PDF" whose pages cannot be counted through
// each API and checks the refusal: 503 pricing_unavailable in the route's envelope,
// naming the document's data field on the OpenAI routes, and nothing held or charged.
func TestUncountableDocumentRefused(t *testing.T) {
	t.Parallel()
	bad := base64.StdEncoding.EncodeToString([]byte("%PDF-1.7\nthis file ends before any object\n"))
	tests := []struct {
		name, path, param, body string
		anthropic               bool
	}{
		{name: "chat", path: "/chat/completions", param: "messages[0].content[1].file.file_data",
			body: `{"model":"demo-chat","max_tokens":16,"messages":[{"role":"user","content":[{"type":"text","text":"summarise"},{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,` + bad + `"}}]}]}`},
		{name: "responses", path: "/responses", param: "input[0].content[1].file_data",
			body: `{"model":"demo-responses","max_output_tokens":16,"input":[{"role":"user","content":[{"type":"input_text","text":"summarise"},{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,` + bad + `"}]}]}`},
		{name: "messages", path: "/messages", anthropic: true,
			body: `{"model":"demo-claude","max_tokens":16,"messages":[{"role":"user","content":[{"type":"text","text":"summarise"},{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + bad + `"}}]}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCustomer(t, customerOpts{topup: "10"})
			before := c.balance(t)
			if tt.anthropic {
				status, h, body := rawRequest(t, http.MethodPost, tt.path, c.key, []byte(tt.body), "anthropic-version", "2023-06-01")
				checkAnthropicError(t, status, h, body, 503, "api_error", "pricing_unavailable")
				if !strings.Contains(string(body), "messages[0].content[1].source.data") {
					t.Errorf("the refusal does not name the document: %s", body)
				}
			} else {
				status, h, body := rawRequest(t, http.MethodPost, tt.path, c.key, []byte(tt.body))
				checkOpenAIError(t, status, h, body, 503, "pricing_unavailable", "api_error", false)
				if !strings.Contains(string(body), `"param":"`+tt.param+`"`) {
					t.Errorf("the refusal does not name %s: %s", tt.param, body)
				}
			}
			if got := c.balance(t); got != before {
				t.Errorf("balance moved from %d to %d", before, got)
			}
			if n := reservationCount(t, c.keyID); n != 0 {
				t.Errorf("%d reservations for a refused request", n)
			}
		})
	}
}

// reservationCount is how many reservations the ledger holds for a key, settled or not.
func reservationCount(t *testing.T, keyID string) int {
	t.Helper()
	return len(keyReservations(t, keyID))
}
