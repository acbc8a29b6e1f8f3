package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmgw/gateway/e2e/mock"
	"github.com/llmgw/gateway/e2e/stack"
	"github.com/llmgw/gateway/extproc/credential"
)

// TestDemoServiceAccountTokens: the service account the stack made at start gets a
// token from the mock providers' token endpoint through the gateway's own credential
// code (a JWT bearer grant against the key file's token_uri), and the one whose
// token_uri is the refusing endpoint gets none, without its key in the error.
func TestDemoServiceAccountTokens(t *testing.T) {
	acct, err := os.ReadFile(filepath.Join(gw.RunDir, stack.ServiceAccountFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(acct), gw.MockAddr+mock.TokenPath) {
		t.Fatalf("the key file's token_uri is not the mock's token endpoint")
	}
	c, err := credential.NewGCP(credential.GCPConfig{ServiceAccountJSON: acct})
	if err != nil {
		t.Fatal(err)
	}
	hs, err := c.Headers(context.Background(), credential.Request{})
	if err != nil || len(hs) != 1 || !strings.HasPrefix(hs[0].Value, "Bearer ya29.mock-") {
		t.Fatalf("demo service account: %v, %v", hs, err)
	}

	refused, err := os.ReadFile(filepath.Join(gw.RunDir, "demo-service-account-refused.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err = credential.NewGCP(credential.GCPConfig{ServiceAccountJSON: refused})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Headers(context.Background(), credential.Request{}); err == nil || strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Fatalf("refused service account: %v", err)
	}
}
