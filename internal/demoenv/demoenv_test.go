package demoenv

import (
	"strings"
	"testing"
)

// TestEveryVarResolves: Lookup and Env cover exactly Vars, service accounts included.
func TestEveryVarResolves(t *testing.T) {
	env := Env([]byte("sa"), []byte("refused"))
	vars := Vars()
	if len(env) != len(vars) {
		t.Fatalf("Env has %d entries, Vars %d", len(env), len(vars))
	}
	for i, name := range vars {
		if v, ok := Lookup(name); !ok || v == "" {
			t.Errorf("Lookup(%s) = %q, %v", name, v, ok)
		}
		if !strings.HasPrefix(env[i], name+"=") {
			t.Errorf("Env[%d] = %q, want %s=…", i, env[i], name)
		}
	}
	if sa, _ := Lookup(ServiceAccountVar); !strings.Contains(sa, `"type": "service_account"`) {
		t.Errorf("the demo service account is not a key file: %.40s", sa)
	}
	if _, ok := Lookup("DEMO_NOPE"); ok {
		t.Error("an unknown variable resolved")
	}
}
