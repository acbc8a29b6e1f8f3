package mock

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/pdfpages/pdfpagestest"
)

func pngData(t *testing.T, w, h int) string {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// TestBilledParts checks the providers' rules the mock bills parts by, one kind each.
func TestBilledParts(t *testing.T) {
	img := pngData(t, 1024, 1024)
	// Written with compressed object streams, as large files are: the page objects are
	// not in the bytes to be seen.
	pdf, long := pdfpagestest.BlankBase64(t, 3), pdfpagestest.BlankBase64(t, 3000)
	tests := []struct {
		name, api, body string
		in, out         int
	}{
		{name: "response_format", api: "chat", in: 10,
			body: `{"messages":[],"response_format":{"type":"json_object","x":"abcdefghijk"}}`}, // 40 bytes
		{name: "functions and tools", api: "chat", in: 3 + 3, // 9 and 11 bytes
			body: `{"messages":[],"functions":[{"n":1}],"tools":[{"a":"b"}]}`},
		{name: "prediction is output", api: "chat", out: 3,
			body: `{"messages":[],"prediction":{"type":"content","content":"0123456789"}}`}, // 12 bytes
		{name: "text.format", api: "responses", in: 2,
			body: `{"input":"x","text":{"format":{"t":1},"verbosity":"low"}}`}, // {"t":1} = 7 bytes
		{name: "response_format not billed on responses", api: "responses",
			body: `{"input":"x","response_format":{"t":1}}`},
		{name: "openai image 1024x1024 high", api: "chat", in: 85 + 4*170,
			body: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` + img + `"}}]}]}`},
		{name: "openai image low", api: "chat", in: 85,
			body: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x","detail":"low"}}]}]}`},
		{name: "openai image by URL", api: "responses", in: 85 + 8*170,
			body: `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x"}]}]}`},
		{name: "anthropic image", api: "messages", in: 1399,
			body: `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + img + `"}}]}]}`},
		{name: "anthropic pdf of 3 pages", api: "messages", in: 3 * 4600,
			body: `{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + pdf + `"}}]}]}`},
		{name: "chat file", api: "chat", in: 3 * 4600,
			body: `{"messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:application/pdf;base64,` + pdf + `"}}]}]}`},
		{name: "responses file of 3000 pages", api: "responses", in: 3000 * 4600,
			body: `{"input":[{"role":"user","content":[{"type":"input_file","file_data":"data:application/pdf;base64,` + long + `"}]}]}`},
		{name: "unreadable file", api: "chat",
			body: `{"messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0xLjQK"}}]}]}`},
		{name: "audio", api: "chat", in: 2,
			body: `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"format":"wav","data":"` + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("a", 1601))) + `"}}]}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body map[string]any
			if err := json.Unmarshal([]byte(tt.body), &body); err != nil {
				t.Fatal(err)
			}
			in, out := billedParts([]byte(tt.body), body, tt.api)
			if in != tt.in || out != tt.out {
				t.Errorf("billed in %d out %d, want %d %d", in, out, tt.in, tt.out)
			}
		})
	}
}
