package mock

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	_ "image/gif" // image sizes of the formats the providers accept
	_ "image/jpeg"
	_ "image/png"
	"strings"

	"github.com/llmgw/gateway/internal/pdfpages"
)

// Input billed like the real providers (docs/local-stack.md): besides the words of message
// and system text (generate), a request is billed for the JSON of its tool and function
// definitions and response_format / text.format schemas at one token per 4 bytes
// (rounded up), its images, audio and files at the providers' published rules, and a
// chat prediction's content as output tokens at the same 4 bytes per token.

// jsonTokens is what the mock bills for a JSON part: one token per 4 bytes, rounded up.
func jsonTokens(raw []byte) int { return (len(raw) + 3) / 4 }

// Published per-part rules the mock bills by.
const (
	// OpenAI images (gpt-4o): 85 tokens, plus 170 per 512-px tile at high detail.
	openAIImageBase, openAIImageTile = 85, 170
	// Anthropic images: (width × height) / 750 after resizing, at most ~1,600.
	anthropicImageMax = 1600
	// Documents (Anthropic's rule, also used for OpenAI files): per page, the page's
	// text (1,500–3,000 tokens; the mock bills the high end) and the page as an image.
	pageTokens = 3000 + anthropicImageMax
	// Audio input: 10 tokens a second; the mock takes 16,000 bytes as one second.
	audioBytesPerToken = 1600
)

// billedParts returns the input tokens a request is billed beyond its text's words, and
// the output tokens it is billed beyond the answer (prediction). api is "chat",
// "responses" or "messages".
func billedParts(raw []byte, body map[string]any, api string) (in, out int) {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return 0, 0
	}
	for _, f := range []string{"tools", "functions", "response_format"} {
		if v, ok := top[f]; ok && (f == "tools" || api == "chat") {
			in += jsonTokens(v)
		}
	}
	if t, ok := top["text"]; ok && api == "responses" {
		var text map[string]json.RawMessage
		if json.Unmarshal(t, &text) == nil && text["format"] != nil {
			in += jsonTokens(text["format"])
		}
	}
	if p, ok := top["prediction"]; ok && api == "chat" {
		var pred map[string]json.RawMessage
		if json.Unmarshal(p, &pred) == nil && pred["content"] != nil {
			out += jsonTokens(pred["content"])
		}
	}
	switch api {
	case "chat":
		in += mediaTokens(body["messages"], api)
	case "responses":
		in += mediaTokens(body["input"], api)
	case "messages":
		in += mediaTokens(body["messages"], api)
	}
	return in, out
}

// mediaTokens walks v (messages, input items, their content, tool results) and bills
// every image, audio and file part it finds by its provider's rule.
func mediaTokens(v any, api string) int {
	n := 0
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			n += mediaTokens(e, api)
		}
	case map[string]any:
		typ, _ := x["type"].(string)
		switch typ {
		case "image_url": // OpenAI chat
			iu, _ := x["image_url"].(map[string]any)
			url, _ := iu["url"].(string)
			detail, _ := iu["detail"].(string)
			return openAIImage(url, detail)
		case "input_image": // Responses
			url, _ := x["image_url"].(string)
			detail, _ := x["detail"].(string)
			return openAIImage(url, detail)
		case "image": // Anthropic
			src, _ := x["source"].(map[string]any)
			data, _ := src["data"].(string)
			return anthropicImage(data)
		case "input_audio":
			a, _ := x["input_audio"].(map[string]any)
			data, _ := a["data"].(string)
			return (len(decode(data)) + audioBytesPerToken - 1) / audioBytesPerToken
		case "file": // OpenAI chat
			f, _ := x["file"].(map[string]any)
			data, _ := f["file_data"].(string)
			return pdfPages(decode(data)) * pageTokens
		case "input_file": // Responses
			data, _ := x["file_data"].(string)
			return pdfPages(decode(data)) * pageTokens
		case "document": // Anthropic
			src, _ := x["source"].(map[string]any)
			if st, _ := src["type"].(string); st == "base64" {
				data, _ := src["data"].(string)
				return pdfPages(decode(data)) * pageTokens
			}
			return 0
		}
		if c, ok := x["content"]; ok {
			n += mediaTokens(c, api)
		}
	}
	return n
}

// decode returns the bytes of base64 data, a data URL's payload included; nil when it
// is not base64.
func decode(s string) []byte {
	if i := strings.Index(s, ";base64,"); i >= 0 && strings.HasPrefix(s, "data:") {
		s = s[i+len(";base64,"):]
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil
	}
	return b
}

// imageSize returns an image's dimensions from its bytes; ok false when unknown (a URL,
// an undecodable image).
func imageSize(b []byte) (w, h int, ok bool) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return 0, 0, false
	}
	return cfg.Width, cfg.Height, true
}

// openAIImage bills an image the way OpenAI does for gpt-4o: low detail is the base;
// otherwise the image is scaled into 2048×2048, then its short side to 768, and each
// 512-px tile costs 170 more. An image whose size the mock cannot read (a URL) is
// billed the most the rule gives (2×4 tiles).
func openAIImage(url, detail string) int {
	if detail == "low" {
		return openAIImageBase
	}
	w, h, ok := imageSize(decode(url))
	if !ok {
		return openAIImageBase + 8*openAIImageTile
	}
	fw, fh := float64(w), float64(h)
	if s := 2048 / max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	if s := 768 / min(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	tiles := ceilDiv(int(fw+0.5), 512) * ceilDiv(int(fh+0.5), 512)
	return openAIImageBase + tiles*openAIImageTile
}

// anthropicImage bills an image the way Anthropic does: (w × h) / 750 tokens after the
// image is resized to at most 1568 px on its long edge and about 1.15 megapixels, so at
// most anthropicImageMax. An image whose size the mock cannot read is billed the most.
func anthropicImage(data string) int {
	w, h, ok := imageSize(decode(data))
	if !ok {
		return anthropicImageMax
	}
	fw, fh := float64(w), float64(h)
	if s := 1568 / max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	return min(ceilDiv(int(fw*fh+0.5), 750), anthropicImageMax)
}

// pdfPages is a PDF's page count, read from its bytes as the providers read it, with
// the library the gateway counts by; 0 for a file it cannot read (the gateway refuses
// those before any provider sees them).
func pdfPages(b []byte) int {
	n, err := pdfpages.Count(b)
	if err != nil {
		return 0
	}
	return n
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
