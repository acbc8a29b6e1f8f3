package e2e_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// charged returns how much the account's balance moved since before, once nothing is
// held any more.
func (c customer) charged(t *testing.T, before int64) int64 {
	t.Helper()
	return before - micros(t, c.waitSettled(t), "balance")
}

func TestResponses(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	client := openaiClient(c.key)
	before := c.balance(t)
	resp, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model:           "demo-responses",
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("tell me [[mock:tokens=9]]")},
		Instructions:    openai.String("be brief"),
		MaxOutputTokens: openai.Int(100),
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != "demo-responses" || resp.OutputText() == "" || resp.Usage.OutputTokens != 9 {
		t.Fatalf("response = model %q, text %q, usage %+v", resp.Model, resp.OutputText(), resp.Usage)
	}
	if got, want := c.charged(t, before), tokenCost(resp.Usage.InputTokens, resp.Usage.OutputTokens, 1_000_000, 2_000_000); got != want {
		t.Errorf("charged %d, want %d", got, want)
	}

	before = c.balance(t)
	stream := client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
		Model: "demo-responses",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("stream it [[mock:tokens=4]]")},
	})
	var text strings.Builder
	var done responses.Response
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.created", "response.in_progress", "response.completed":
			if ev.Response.Model != "demo-responses" {
				t.Errorf("%s carries model %q", ev.Type, ev.Response.Model)
			}
			if ev.Type == "response.completed" {
				done = ev.Response
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.Len() == 0 || done.Usage.OutputTokens != 4 {
		t.Fatalf("streamed text %q, final usage %+v", text.String(), done.Usage)
	}
	if got, want := c.charged(t, before), tokenCost(done.Usage.InputTokens, done.Usage.OutputTokens, 1_000_000, 2_000_000); got != want {
		t.Errorf("stream charged %d, want %d", got, want)
	}
}

func TestEmbeddings(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	client := openaiClient(c.key)
	for _, tc := range []struct {
		name   string
		input  openai.EmbeddingNewParamsInputUnion
		format openai.EmbeddingNewParamsEncodingFormat
		items  int
	}{
		{"string float", openai.EmbeddingNewParamsInputUnion{OfString: openai.String("embed this sentence")}, openai.EmbeddingNewParamsEncodingFormatFloat, 1},
		{"strings base64", openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"one", "two words"}}, openai.EmbeddingNewParamsEncodingFormatBase64, 2},
		{"tokens", openai.EmbeddingNewParamsInputUnion{OfArrayOfTokens: []int64{1, 2, 3, 4}}, openai.EmbeddingNewParamsEncodingFormatFloat, 1},
		{"token arrays", openai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{{1, 2}, {3}}}, openai.EmbeddingNewParamsEncodingFormatFloat, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := c.balance(t)
			resp, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
				Model:          "demo-embed",
				Input:          tc.input,
				EncodingFormat: tc.format,
				Dimensions:     openai.Int(8),
			})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Model != "demo-embed" || len(resp.Data) != tc.items || len(resp.Data[0].Embedding) != 8 {
				t.Fatalf("embeddings = model %q, %d items, dims %d", resp.Model, len(resp.Data), len(resp.Data[0].Embedding))
			}
			if got, want := c.charged(t, before), tokenCost(resp.Usage.PromptTokens, 0, 100_000, 0); got != want {
				t.Errorf("charged %d, want %d (%d tokens)", got, want, resp.Usage.PromptTokens)
			}
		})
	}
}

func TestSpeech(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	client := openaiClient(c.key)
	for _, tc := range []struct {
		format openai.AudioSpeechNewParamsResponseFormat
		ct     string
	}{
		{openai.AudioSpeechNewParamsResponseFormatMP3, "audio/mpeg"},
		{openai.AudioSpeechNewParamsResponseFormatOpus, "audio/ogg"},
		{openai.AudioSpeechNewParamsResponseFormatAAC, "audio/aac"},
		{openai.AudioSpeechNewParamsResponseFormatFLAC, "audio/flac"},
		{openai.AudioSpeechNewParamsResponseFormatWAV, "audio/wav"},
		{openai.AudioSpeechNewParamsResponseFormatPCM, "application/octet-stream"},
	} {
		t.Run(string(tc.format), func(t *testing.T) {
			before := c.balance(t)
			input := "héllo wörld" // 11 characters (code points), 13 bytes
			resp, err := client.Audio.Speech.New(context.Background(), openai.AudioSpeechNewParams{
				Model:          "demo-tts",
				Input:          input,
				Voice:          openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")},
				ResponseFormat: tc.format,
			})
			if err != nil {
				t.Fatal(err)
			}
			audio, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if ct := resp.Header.Get("content-type"); !strings.HasPrefix(ct, tc.ct) || len(audio) == 0 {
				t.Fatalf("content-type %q, %d bytes", ct, len(audio))
			}
			// $15 per 1M characters: 11 × 15 = 165 micros.
			if got := c.charged(t, before); got != 165 {
				t.Errorf("charged %d, want 165", got)
			}
		})
	}
	status, h, body := rawRequest(t, http.MethodPost, "/audio/speech", c.key, []byte(`{"model":"demo-tts","input":"x","voice":"nova"}`))
	checkOpenAIError(t, status, h, body, 400, "invalid_request", "invalid_request_error", false)
}

func TestImages(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	client := openaiClient(c.key)
	for _, format := range []openai.ImageGenerateParamsResponseFormat{openai.ImageGenerateParamsResponseFormatURL, openai.ImageGenerateParamsResponseFormatB64JSON} {
		t.Run(string(format), func(t *testing.T) {
			before := c.balance(t)
			resp, err := client.Images.Generate(context.Background(), openai.ImageGenerateParams{
				Model:          "demo-image",
				Prompt:         "a lighthouse",
				N:              openai.Int(1),
				ResponseFormat: format,
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Data) != 1 {
				t.Fatalf("data = %+v", resp.Data)
			}
			if format == openai.ImageGenerateParamsResponseFormatURL && resp.Data[0].URL == "" {
				t.Error("no url")
			}
			if format == openai.ImageGenerateParamsResponseFormatB64JSON {
				if _, err := base64.StdEncoding.DecodeString(resp.Data[0].B64JSON); err != nil || resp.Data[0].B64JSON == "" {
					t.Errorf("b64_json: %v", err)
				}
			}
			if got := c.charged(t, before); got != 40_000 {
				t.Errorf("charged %d, want 40000 (one image)", got)
			}
		})
	}
	status, h, body := rawRequest(t, http.MethodPost, "/images/generations", c.key, []byte(`{"model":"demo-image","prompt":"x","n":2}`))
	checkOpenAIError(t, status, h, body, 400, "invalid_n", "invalid_request_error", false)
}

func TestVideoTasks(t *testing.T) {
	t.Parallel()
	owner := newCustomer(t, customerOpts{topup: "10"})
	other := newCustomer(t, customerOpts{topup: "10"})
	before := owner.balance(t)

	status, _, body := rawRequest(t, http.MethodPost, "/video/generations", owner.key,
		[]byte(`{"model":"demo-video","prompt":"a cat surfing","duration":4}`))
	if status != 200 {
		t.Fatalf("submit: %d %s", status, body)
	}
	var task struct {
		ID    string `json:"id"`
		Model string `json:"model"`
	}
	if err := json.Unmarshal(body, &task); err != nil || task.ID == "" || task.Model != "demo-video" {
		t.Fatalf("submit body %s: %v", body, err)
	}
	// $0.10 per second × 4 s.
	if got := owner.charged(t, before); got != 400_000 {
		t.Errorf("charged %d, want 400000", got)
	}

	status, _, body = rawRequest(t, http.MethodGet, "/videos/"+task.ID, owner.key, nil)
	if status != 200 || !strings.Contains(string(body), task.ID) || strings.Contains(string(body), "mock-video") {
		t.Errorf("owner read: %d %s", status, body)
	}
	status, h, body := rawRequest(t, http.MethodGet, "/videos/"+task.ID, other.key, nil)
	checkOpenAIError(t, status, h, body, 404, "task_not_found", "invalid_request_error", false)
	status, h, body = rawRequest(t, http.MethodGet, "/videos/no-such-task", owner.key, nil)
	checkOpenAIError(t, status, h, body, 404, "task_not_found", "invalid_request_error", false)
	status, h, body = rawRequest(t, http.MethodGet, "/videos/bad$id", owner.key, nil)
	checkOpenAIError(t, status, h, body, 400, "invalid_task_id", "invalid_request_error", false)

	for _, tc := range []struct {
		name, body, code string
	}{
		{"duration out of range", `{"model":"demo-video","prompt":"x","duration":16}`, "invalid_duration"},
		{"fractional duration", `{"model":"demo-video","prompt":"x","duration":2.5}`, "invalid_duration"},
		{"other resolution", `{"model":"demo-video","prompt":"x","resolution":"1080p"}`, "resolution_not_priced"},
		{"webhook to loopback", `{"model":"demo-video","prompt":"x","webhook_url":"https://127.0.0.1/hook"}`, "invalid_webhook_url"},
		{"webhook over http", `{"model":"demo-video","prompt":"x","webhook_url":"http://example.com/hook"}`, "invalid_webhook_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := other.balance(t)
			status, h, body := rawRequest(t, http.MethodPost, "/video/generations", other.key, []byte(tc.body))
			checkOpenAIError(t, status, h, body, 400, tc.code, "invalid_request_error", false)
			if got := other.charged(t, before); got != 0 {
				t.Errorf("refused submission charged %d", got)
			}
		})
	}
}
