package e2e_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestQuickStart runs the README's two SDK programs against the stack, as printed there
// (`go run ./e2e/examples/openai` and `./e2e/examples/anthropic` with GATEWAY_KEY set).
func TestQuickStart(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	for _, tc := range []struct{ dir, model string }{
		{"openai", "demo-chat"},
		{"anthropic", "demo-claude"},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			cmd := exec.Command("go", "run", "./e2e/examples/"+tc.dir)
			cmd.Dir = gw.Root
			cmd.Env = append(os.Environ(), "GATEWAY_KEY="+c.key, "GATEWAY_BASE_URL="+gw.BaseURL)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("go run ./e2e/examples/%s: %v\n%s", tc.dir, err, out)
			}
			if !strings.HasPrefix(string(out), tc.model+": ") {
				t.Errorf("output = %q, want the public model id first", out)
			}
		})
	}
}
