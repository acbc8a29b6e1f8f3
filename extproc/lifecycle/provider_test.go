package lifecycle

import (
	"testing"

	"github.com/llmgw/gateway/extproc/catalog"
)

// TestProviderName: gen_ai.provider.name is the conventions' well-known value of a
// channel's format, Azure OpenAI told apart from OpenAI.
func TestProviderName(t *testing.T) {
	for _, c := range []struct {
		ch   catalog.Channel
		want string
	}{
		{catalog.Channel{Format: "openai"}, "openai"},
		{catalog.Channel{Format: "openai", BasePath: "/openai/v1"}, "openai"}, // Groq's path too
		{catalog.Channel{Format: "openai", BasePath: "/openai/v1", CredentialHeader: "api-key"}, "azure.ai.openai"},
		{catalog.Channel{Format: "openai", Cluster: "azure-eastus"}, "azure.ai.openai"},
		{catalog.Channel{Format: "anthropic"}, "anthropic"},
		{catalog.Channel{Format: "gemini"}, "gcp.gemini"},
		{catalog.Channel{Format: "vertex-gemini"}, "gcp.vertex_ai"},
		{catalog.Channel{Format: "vertex-anthropic"}, "gcp.vertex_ai"},
		{catalog.Channel{Format: "bedrock"}, "aws.bedrock"},
		{catalog.Channel{Format: "video"}, "video"},
	} {
		if got := providerName(&c.ch); got != c.want {
			t.Errorf("%+v: %q, want %q", c.ch, got, c.want)
		}
	}
}
