package front

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestH2C(t *testing.T) {
	up := &upstreamRecorder{}
	h := newHarness(t, up, continueAll, nil)
	c := h2cClient()
	tests := []struct {
		name, method, body string
		wantKinds          string
	}{
		{name: "GET", method: http.MethodGet, wantKinds: "request_headers response_headers"},
		{name: "POST", method: http.MethodPost, body: `{"x":1}`, wantKinds: "request_headers request_body response_headers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req, _ := http.NewRequest(tt.method, h.front.URL+"/v1/embeddings", body)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != 2 || resp.StatusCode != 200 || string(b) != `{"ok":true}` {
				t.Errorf("got %s %d %s", resp.Proto, resp.StatusCode, b)
			}
			s := h.session(t)
			if k := strings.Join(messageKinds(s.log), " "); k != tt.wantKinds {
				t.Errorf("messages %s", k)
			}
			if s.log[0].GetRequestHeaders().GetEndOfStream() != (tt.body == "") {
				t.Error("end_of_stream on request_headers wrong")
			}
		})
	}
}

// TestH2CRequestTrailers: an HTTP/2 request with trailers delivers its BUFFERED body
// with end_of_stream false (the trailers end the stream), and no body message at all
// when no data came; with request_trailer_mode SKIP no trailers message follows
// (ext_proc.cc Filter::onTrailers).
func TestH2CRequestTrailers(t *testing.T) {
	up := &upstreamRecorder{}
	h := newHarness(t, up, continueAll, nil)
	c := h2cClient()
	for _, tt := range []struct {
		name, body, wantKinds string
	}{
		{"body", `{"x":1}`, "request_headers request_body response_headers"},
		{"no data", "", "request_headers response_headers"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// A reader of unknown length: sent as DATA frames (none when empty), then
			// the trailers.
			req, _ := http.NewRequest(http.MethodPost, h.front.URL+"/v1/embeddings", io.MultiReader(strings.NewReader(tt.body)))
			req.Trailer = http.Header{"X-Checksum": {"abc"}}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != `{"ok":true}` {
				t.Errorf("got %d %s", resp.StatusCode, b)
			}
			s := h.session(t)
			if k := strings.Join(messageKinds(s.log), " "); k != tt.wantKinds {
				t.Fatalf("messages %s, want %s", k, tt.wantKinds)
			}
			if tt.body != "" {
				if rb := s.log[1].GetRequestBody(); rb.GetEndOfStream() || string(rb.GetBody()) != tt.body {
					t.Errorf("body message %v, want the whole body without end_of_stream", rb)
				}
				up.mu.Lock()
				got := string(up.body)
				up.mu.Unlock()
				if got != tt.body {
					t.Errorf("upstream got %q", got)
				}
			}
		})
	}
}

// h2cClient speaks HTTP/2 without TLS, as the front serves it.
func h2cClient() *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}
}
