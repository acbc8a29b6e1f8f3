package e2e_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestHTTP2RequestTrailers: an HTTP/2 request with trailers reaches extproc as a whole
// body without end_of_stream (the trailers end the stream); it is served and charged
// like any other.
func TestHTTP2RequestTrailers(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	before := c.balance(t)
	body := `{"model":"demo-chat","max_tokens":64,"messages":[{"role":"user","content":"hello there [[mock:tokens=5]]"}]}`
	req, err := http.NewRequest(http.MethodPost, gw.BaseURL+"/chat/completions", io.MultiReader(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("authorization", "Bearer "+c.key)
	req.Trailer = http.Header{"X-Checksum": {"abc"}}
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 {
		t.Fatalf("%s %d: %s", resp.Proto, resp.StatusCode, out)
	}
	var got struct {
		Usage struct {
			Prompt     int64 `json:"prompt_tokens"`
			Completion int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(out, &got); err != nil || got.Usage.Completion != 5 {
		t.Fatalf("body %s (%v)", out, err)
	}
	want := tokenCost(got.Usage.Prompt, got.Usage.Completion, 1_000_000, 2_000_000)
	if charged := c.charged(t, before); charged != want {
		t.Errorf("charged %d micros, want %d", charged, want)
	}
}
