package e2e_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestQuickStart runs the README's quick start against the stack, whose ports are moved
// as a stack moved with the documented variables is: from a directory whose .run is the
// stack's run directory (the repository root after `make run`), gatewayctl with no flag
// and no variable creates the account and the key, and the two SDK programs
// (e2e/examples) answer without GATEWAY_BASE_URL; then the programs again with
// GATEWAY_BASE_URL, which wins over the file. The project with a daily limit is made
// as the quick start shows, and its key answers the Anthropic program.
func TestQuickStart(t *testing.T) {
	t.Parallel()
	here := t.TempDir()
	if err := os.Symlink(gw.RunDir, filepath.Join(here, ".run")); err != nil {
		t.Fatal(err)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == "GATEWAY_ACCOUNTING_ADDR" || k == "GATEWAY_ADMIN_TOKEN" || k == "GATEWAY_BASE_URL" || k == "GATEWAY_KEY"
	})
	run := func(t *testing.T, dir string, env []string, bin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	field := func(out, name string) string {
		t.Helper()
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("gatewayctl printed %q: %v", out, err)
		}
		s, _ := v[name].(string)
		return s
	}
	gatewayctl := filepath.Join(gw.BinDir, "gatewayctl")
	acc := field(run(t, here, env, gatewayctl, "account", "create"), "id")
	run(t, here, env, gatewayctl, "account", "topup", acc, "--amount", "10")
	key := field(run(t, here, env, gatewayctl, "key", "create", "--account", acc, "--name", "demo"), "key")
	// The project with a daily limit and its key.
	prj := field(run(t, here, env, gatewayctl, "project", "create", "--account", acc, "--name", "team", "--daily-limit", "1"), "id")
	teamKey := field(run(t, here, env, gatewayctl, "key", "create", "--account", acc, "--project", prj, "--name", "team"), "key")
	var shown struct {
		Name             string `json:"name"`
		DailyLimitMicros int64  `json:"daily_limit_micros"`
	}
	if show := run(t, here, env, gatewayctl, "project", "show", prj); json.Unmarshal([]byte(show), &shown) != nil ||
		shown.Name != "team" || shown.DailyLimitMicros != 1_000_000 {
		t.Errorf("project show: %s", show)
	}

	bins := t.TempDir()
	for _, tc := range []struct{ dir, model, key string }{
		{"openai", "demo-chat", key},
		{"anthropic", "demo-claude", teamKey},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			bin := filepath.Join(bins, tc.dir)
			run(t, gw.Root, os.Environ(), "go", "build", "-o", bin, "./e2e/examples/"+tc.dir)
			withKey := append(slices.Clip(env), "GATEWAY_KEY="+tc.key)
			for _, out := range []string{
				run(t, here, withKey, bin),
				run(t, t.TempDir(), append(slices.Clip(withKey), "GATEWAY_BASE_URL="+gw.BaseURL), bin),
			} {
				if !strings.HasPrefix(out, tc.model+": ") {
					t.Errorf("output = %q, want the public model id first", out)
				}
			}
		})
	}
}
