package e2e_test

import (
	"os"
	"strings"
	"testing"
)

// cloudModels are the demo models of LOCAL-STACK.md's "Models on every cloud", each
// served by a mock provider speaking its cloud's API.
var cloudModels = []chatModel{
	{"demo-gemini", 1_000_000, 2_000_000},
	{"demo-vertex-gemini", 1_000_000, 2_000_000},
	{"demo-vertex-claude", 3_000_000, 15_000_000},
	{"demo-bedrock", 3_000_000, 15_000_000},
	{"demo-azure", 1_000_000, 2_000_000},
	{"demo-multicloud", 1_000_000, 2_000_000},
}

// TestCloudModelsThroughAnyChatAPI: every cloud demo model answers on every chat API
// through the official SDKs, text, limit, image and tool round trip, charged exactly
// the card's price of the usage the mock reported. CLOUD_MODELS (comma-separated ids)
// narrows the run.
func TestCloudModelsThroughAnyChatAPI(t *testing.T) {
	t.Parallel()
	models := cloudModels
	if only := os.Getenv("CLOUD_MODELS"); only != "" {
		models = nil
		for _, m := range cloudModels {
			if strings.Contains(","+only+",", ","+m.id+",") {
				models = append(models, m)
			}
		}
	}
	throughEveryChatAPI(t, models)
}
