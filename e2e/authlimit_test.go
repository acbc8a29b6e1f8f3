package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/llmgw/gateway/e2e/front"
	"github.com/llmgw/gateway/e2e/internal/bootstraptest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
)

// trustedHopFront starts another Envoy test front on the stack's extproc, with the
// stack's envoy.yaml and xff_num_trusted_hops 1: as behind one load balancer that
// appends the client's address to x-forwarded-for, Envoy takes the client address from
// there. It returns the front's /v1 base URL.
//
// The failed-key limit is per client address, and every other test reaches the stack
// from the same loopback address: this test floods addresses of its own, so its 429s
// reach no other test.
func trustedHopFront(t *testing.T) string {
	t.Helper()
	b := bootstraptest.Load(t, filepath.Join(gw.RunDir, "envoy.yaml"))
	b.HCM(func(h *hcmv3.HttpConnectionManager) {
		if !h.GetUseRemoteAddress().GetValue() {
			t.Fatal("envoy.yaml does not use the remote address")
		}
		h.XffNumTrustedHops = 1
	})
	_, stackPort, _ := net.SplitHostPort(gw.GatewayAddr)
	if got := b.Listener().GetAddress().GetSocketAddress().GetPortValue(); strconv.Itoa(int(got)) != stackPort {
		t.Fatalf("listener port %d, want the stack's %s", got, gw.GatewayAddr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.ListenerAddress(ln.Addr().String())
	_ = ln.Close()
	path := filepath.Join(t.TempDir(), "envoy.yaml")
	b.Write(path)
	srv, fl, err := front.Start(path, log.New(io.Discard, "", 0), false)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(fl) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + fl.Addr().String() + "/v1"
}

// rawChat posts a chat request with key (none when "") as the client at addr behind
// the proxy, and returns the status and the error code.
func rawChat(t *testing.T, base, addr, key string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/chat/completions", bytes.NewReader(chatBody("demo-chat", "")))
	req.Header.Set("content-type", "application/json")
	req.Header.Set("x-forwarded-for", addr)
	if key != "" {
		req.Header.Set("authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var code string
	if resp.StatusCode != 200 {
		code = gjson.GetBytes(b, "error.code").String()
	}
	return resp.StatusCode, resp.Header, code
}

// floodBadKeys sends bad keys from addr until one is answered 429 and returns how many
// were answered 401 before it.
func floodBadKeys(t *testing.T, base, addr string) int {
	t.Helper()
	for i := range 1000 {
		status, h, code := rawChat(t, base, addr, fmt.Sprintf("gw-%s%040d", "bad", i))
		switch {
		case status == 429:
			if code != "rate_limit_exceeded" || h.Get("retry-after") == "" || h.Get("x-should-retry") != "true" {
				t.Fatalf("bad key %d: 429 %s, retry-after %q, x-should-retry %q", i, code, h.Get("retry-after"), h.Get("x-should-retry"))
			}
			return i
		case status != 401 || code != "invalid_api_key":
			t.Fatalf("bad key %d: %d %s", i, status, code)
		}
	}
	t.Fatal("1000 bad keys and no 429")
	return 0
}

// TestBadKeyFloodSparesValidKeys: after a flood of bad keys from one client address
// (at least 100 answered 401, then 429), a valid key from the same address is served,
// through the official SDK, as is the key list without a key; another client behind
// the same proxy (another x-forwarded-for address) is limited on its own.
func TestBadKeyFloodSparesValidKeys(t *testing.T) {
	t.Parallel()
	base := trustedHopFront(t)
	c := newCustomer(t, customerOpts{topup: "10"})
	const flooded, neighbour = "203.0.113.70", "203.0.113.71"
	client := openaiClient(c.key, option.WithBaseURL(base+"/"), option.WithHeader("X-Forwarded-For", flooded))
	ask := func(what string) {
		t.Helper()
		resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:    "demo-chat",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello [[mock:tokens=3]]")},
		})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if resp.Usage.CompletionTokens != 3 {
			t.Errorf("%s: usage %+v", what, resp.Usage)
		}
	}
	ask("before the flood")

	if n := floodBadKeys(t, base, flooded); n < 100 {
		t.Fatalf("only %d bad keys answered 401 before the first 429, want at least 100", n)
	}
	if status, _, code := rawChat(t, base, flooded, ""); status != 429 || code != "rate_limit_exceeded" {
		t.Errorf("missing key after the flood: %d %s, want 429", status, code)
	}
	ask("after the flood") // no retries: a 429 would fail it
	ask("again")

	// The SDKs always send a key: the public catalog is read as a plain client would.
	req, _ := http.NewRequest("GET", base+"/models", nil)
	req.Header.Set("x-forwarded-for", flooded)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !gjson.GetBytes(body, `data.#(id=="demo-chat")`).Exists() {
		t.Fatalf("models without a key after the flood: %d %s", resp.StatusCode, body)
	}
	// A key first used after the flood: refused once, served on the SDK's retry.
	fresh := newCustomer(t, customerOpts{topup: "10"})
	freshChat := func(retries int) error {
		fc := openaiClient(fresh.key, option.WithBaseURL(base+"/"), option.WithHeader("X-Forwarded-For", flooded), option.WithMaxRetries(retries))
		_, err := fc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: "demo-chat", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		return err
	}
	var apiErr *openai.Error
	if err := freshChat(0); !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "rate_limit_exceeded" {
		t.Fatalf("fresh key without retries: %v, want 429 rate_limit_exceeded", err)
	}
	if strings.Contains(strings.ToLower(apiErr.Message), "invalid") {
		t.Errorf("a valid key was called invalid: %q", apiErr.Message)
	}
	if err := freshChat(2); err != nil {
		t.Fatalf("fresh key with the SDK's retries: %v", err)
	}

	if status, _, code := rawChat(t, base, neighbour, "gw-"+strings.Repeat("n", 43)); status != 401 || code != "invalid_api_key" {
		t.Errorf("neighbour behind the same proxy: %d %s, want 401", status, code)
	}
	c.waitSettled(t)
	fresh.waitSettled(t)
}
