package lifecycle

import (
	"testing"

	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/translate"
)

// TestUpstreamPaths: each format's path, from its base path (the channel's when set),
// for a complete answer and a stream.
func TestUpstreamPaths(t *testing.T) {
	vertex := "/v1/projects/p1/locations/us-east5"
	for _, c := range []struct {
		format  catalog.Format
		base    string
		model   string
		kind    catalog.Kind
		client  string
		stream  bool
		want    string
		wantAPI translate.API
	}{
		{catalog.Format("openai"), "", "gpt", catalog.KindChat, "/v1/messages", false, "/v1/chat/completions", translate.Chat},
		{catalog.Format("openai"), "/openai/v1", "gpt", catalog.KindResponses, "/v1/chat/completions", true, "/openai/v1/responses", translate.Responses},
		{catalog.Format("anthropic"), "", "claude", catalog.KindChat, "/v1/chat/completions", false, "/v1/messages", translate.Messages},
		{catalog.Format("gemini"), "", "gemini-2.5-flash", catalog.KindChat, "/v1/chat/completions", false, "/v1beta/models/gemini-2.5-flash:generateContent", translate.Gemini},
		{catalog.Format("gemini"), "", "gemini-2.5-flash", catalog.KindChat, "/v1/chat/completions", true, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", translate.Gemini},
		{catalog.Format("vertex-gemini"), vertex, "gemini-2.5-pro", catalog.KindChat, "/v1/messages", true, vertex + "/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse", translate.Gemini},
		{catalog.Format("vertex-anthropic"), vertex, "claude-sonnet-4@20250514", catalog.KindChat, "/v1/messages", false, vertex + "/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict", translate.VertexMessages},
		{catalog.Format("vertex-anthropic"), vertex, "claude-sonnet-4@20250514", catalog.KindChat, "/v1/messages", true, vertex + "/publishers/anthropic/models/claude-sonnet-4@20250514:streamRawPredict", translate.VertexMessages},
		{catalog.Format("bedrock"), "", "arn:aws:bedrock:us-east-1:1:inference-profile/us.anthropic.claude", catalog.KindChat, "/v1/responses", false, "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.anthropic.claude/converse", translate.Bedrock},
		{catalog.Format("bedrock"), "", "anthropic.claude-3-5-haiku-20241022-v1:0", catalog.KindChat, "/v1/responses", true, "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream", translate.Bedrock},
	} {
		ch := &catalog.Channel{Format: c.format, BasePath: c.base, UpstreamModel: c.model}
		api := upstreamAPI(&catalog.Model{Kind: c.kind}, ch)
		if got := upstreamPath(ch, c.client, api, c.stream); got != c.want || api != c.wantAPI {
			t.Errorf("%s: %s (%v), want %s (%v)", c.format, got, api, c.want, c.wantAPI)
		}
	}
	// Without base_path, Vertex's prefix names gcp's project and location; a base_path
	// wins over them.
	gcp := &catalog.GCPCredential{Project: "demo-project", Location: "us-east5"}
	for _, c := range []struct {
		format     catalog.Format
		base, want string
	}{
		{catalog.Format("vertex-gemini"), "", "/v1/projects/demo-project/locations/us-east5/publishers/google/models/m:streamGenerateContent?alt=sse"},
		{catalog.Format("vertex-anthropic"), "", "/v1/projects/demo-project/locations/us-east5/publishers/anthropic/models/m:streamRawPredict"},
		{catalog.Format("vertex-gemini"), vertex, vertex + "/publishers/google/models/m:streamGenerateContent?alt=sse"},
	} {
		ch := &catalog.Channel{Format: c.format, BasePath: c.base, UpstreamModel: "m", GCP: gcp}
		if got := upstreamPath(ch, "/v1/messages", upstreamAPI(&catalog.Model{Kind: catalog.KindChat}, ch), true); got != c.want {
			t.Errorf("%s base %q: %s, want %s", c.format, c.base, got, c.want)
		}
	}
	// A video channel speaks no chat API and keeps the client's path.
	video := &catalog.Channel{Format: catalog.Format("video"), UpstreamModel: "v"}
	if api := upstreamAPI(&catalog.Model{Kind: catalog.KindVideo}, video); api != 0 || upstreamPath(video, "/v1/video/generations", api, false) != "/v1/video/generations" {
		t.Errorf("video: api %v, path %s", api, upstreamPath(video, "/v1/video/generations", api, false))
	}
	// A non-chat endpoint keeps its path after the channel's base path.
	ch := &catalog.Channel{Format: catalog.Format("openai"), BasePath: "/openai/v1"}
	if got := upstreamPath(ch, "/v1/embeddings", 0, false); got != "/openai/v1/embeddings" {
		t.Errorf("embeddings: %s", got)
	}
}

// TestEveryChatFormatIsServed: every format of the table that speaks a chat API speaks
// one the translator serves every client API from.
func TestEveryChatFormatIsServed(t *testing.T) {
	for _, name := range translate.Formats() {
		f, _ := translate.FormatNamed(name)
		if f.API == 0 {
			continue
		}
		for _, up := range []translate.API{f.APIFor(false), f.APIFor(true)} {
			for _, client := range []translate.API{translate.Chat, translate.Messages, translate.Responses} {
				if _, ok := translate.New(client, up); !ok && client != up {
					t.Errorf("%s: %v clients are not served by %v", name, client, up)
				}
			}
		}
	}
}
