package mock_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"
)

// rawPost sends a request with the given accept-encoding through a transport that
// neither adds one nor decodes, and returns the answer's content-encoding and its bytes
// as they came, decoded when gzip.
func rawPost(t *testing.T, url, acceptEncoding, body string) (encoding, contentType string, plain []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-mock-openai")
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r io.Reader = resp.Body
	encoding = resp.Header.Get("Content-Encoding")
	if encoding == "gzip" {
		if r, err = gzip.NewReader(resp.Body); err != nil {
			t.Fatal(err)
		}
	}
	if plain, err = io.ReadAll(r); err != nil {
		t.Fatalf("%s answer: %v", encoding, err)
	}
	return encoding, resp.Header.Get("Content-Type"), plain
}

func TestCompressesLikeProviders(t *testing.T) {
	srv := newServer(t)
	chat := func(stream bool, prompt string) string {
		s := "false"
		if stream {
			s = "true"
		}
		return `{"model":"mock-gpt","stream":` + s + `,"messages":[{"role":"user","content":"` + prompt + `"}]}`
	}
	tests := []struct {
		name, accept, path, body string
		wantGzip                 bool
	}{
		{"json gzip", "gzip, deflate, br", "/v1/chat/completions", chat(false, "hi"), true},
		{"sse gzip", "gzip", "/v1/chat/completions", chat(true, "hi"), true},
		{"star", "*", "/v1/chat/completions", chat(false, "hi"), true},
		{"gzip refused", "gzip;q=0, *", "/v1/chat/completions", chat(false, "hi"), false},
		{"identity", "identity", "/v1/chat/completions", chat(false, "hi"), false},
		{"none", "", "/v1/chat/completions", chat(true, "hi"), false},
		{"forced json", "identity", "/v1/chat/completions", chat(false, "hi [[mock:gzip]]"), true},
		{"forced sse", "identity", "/v1/chat/completions", chat(true, "hi [[mock:gzip]]"), true},
		{"audio never", "gzip", "/v1/audio/speech", `{"model":"mock-tts","input":"hello","voice":"alloy"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc, ct, plain := rawPost(t, srv.URL+tt.path, tt.accept, tt.body)
			if (enc == "gzip") != tt.wantGzip || enc != "" && enc != "gzip" {
				t.Fatalf("content-encoding %q, want gzip %v", enc, tt.wantGzip)
			}
			switch {
			case strings.HasPrefix(ct, "text/event-stream"):
				if !bytes.HasSuffix(plain, []byte("data: [DONE]\n\n")) {
					t.Errorf("stream %q", plain)
				}
			case strings.HasPrefix(ct, "application/json"):
				if !bytes.Contains(plain, []byte(`"model":"mock-gpt"`)) || bytes.Contains(plain, []byte("mock:gzip")) {
					t.Errorf("body %s", plain)
				}
			}
		})
	}
}
