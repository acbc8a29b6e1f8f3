// Package e2e_test is the black-box suite: it builds the binaries, starts the whole stack
// on free loopback ports (with the Envoy test front, or real Envoy when E2E_ENVOY names a
// binary), creates accounts and keys with gatewayctl, and drives the gateway with the
// official OpenAI and Anthropic Go SDKs and raw HTTP.
package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/e2e/internal/harness"
	"github.com/llmgw/gateway/e2e/stack"
)

var gw *stack.Stack

// gwLog is the file receiving the stack's output (each line prefixed with its part).
var gwLog string

func TestMain(m *testing.M) {
	code := harness.Main(m, "e2e", "..", func(e *harness.Env) {
		gw, gwLog = e.Stack, e.LogPath
		http.DefaultClient.Transport = newAPITransport(nil, gw.BaseURL)
	})
	fmt.Printf("e2e: %d answers validated against %s\n", apiMismatches.Checked(), openAPIPath)
	if ms := apiMismatches.All(); len(ms) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: %d answers do not follow %s:\n%s\n", len(ms), openAPIPath, strings.Join(ms, "\n"))
		code = 1
	}
	os.Exit(code)
}

// ctl runs gatewayctl against the stack and decodes its JSON output.
func ctl(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out, err := ctlRaw(args...)
	if err != nil {
		t.Fatalf("gatewayctl %s: %v", strings.Join(args, " "), err)
	}
	var v map[string]any
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("gatewayctl %s: output %q: %v", strings.Join(args, " "), out, err)
	}
	return v
}

func ctlRaw(args ...string) ([]byte, error) {
	return harness.Ctl(gw, args...)
}

// micros reads an "<name>_micros" integer field of a gatewayctl object.
func micros(t *testing.T, obj map[string]any, name string) int64 {
	t.Helper()
	v, ok := obj[name+"_micros"]
	if !ok {
		t.Fatalf("no %s_micros in %v", name, obj)
	}
	n, err := strconv.ParseInt(fmt.Sprint(v), 10, 64)
	if err != nil {
		t.Fatalf("%s_micros: %v", name, err)
	}
	return n
}

// customer is an account with one key.
type customer struct {
	account string
	key     string
	keyID   string
}

type customerOpts struct {
	tier    string
	topup   string // decimal credits; empty for none
	keyArgs []string
}

func newCustomer(t *testing.T, o customerOpts) customer {
	t.Helper()
	args := []string{"account", "create"}
	if o.tier != "" {
		args = append(args, "--tier", o.tier)
	}
	acc := ctl(t, args...)
	id := fmt.Sprint(acc["id"])
	if o.topup != "" {
		ctl(t, "account", "topup", id, "--amount", o.topup)
	}
	k := ctl(t, append([]string{"key", "create", "--account", id}, o.keyArgs...)...)
	return customer{account: id, key: fmt.Sprint(k["key"]), keyID: fmt.Sprint(k["id"])}
}

func (c customer) balance(t *testing.T) int64 {
	return micros(t, ctl(t, "account", "show", c.account), "balance")
}

// waitSettled polls until the account holds no reservation: settlement happens when
// the stream ends, which can be just after the client has read the last byte.
func (c customer) waitSettled(t *testing.T) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		acc := ctl(t, "account", "show", c.account)
		if micros(t, acc, "reserved") == 0 {
			return acc
		}
		if time.Now().After(deadline) {
			t.Fatalf("reservation still held: %v", acc)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
