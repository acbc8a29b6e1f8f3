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
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	c := &http.Client{Transport: tr}
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
