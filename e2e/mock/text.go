package mock

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// directives steer an answer (docs/local-stack.md).
type directives struct {
	tokens int // -1: not given
	slow   int // seconds
	cut    bool
	pad    int // bytes appended to the answer's full text (stream deltas are not padded)
	gap    int // milliseconds between streamed chunks (each is its own write anyway)
	// bill: the priced parts the answer reports (cache.go)
	cacheRead, cacheWrite, cacheWrite1h, audioIn, audioOut int
	tier                                                   string
	awsError                                               string // Bedrock: answer this error type (bedrockErrors)
}

var directiveRE = regexp.MustCompile(`\[\[mock:(tokens=(\d+)|slow=(\d+)|cut|gzip|pad=(\d+)|tool=[A-Za-z0-9_-]+|gap=(\d+)|` +
	`cache_read=(\d+)|cache_write=(\d+)|cache_write_1h=(\d+)|audio_in=(\d+)|audio_out=(\d+)|tier=([A-Za-z0-9_-]+)|aws_error=([A-Za-z]+))\]\]`)

// maxGap bounds the gap directive (milliseconds).
const maxGap = 10_000

// maxPad bounds the pad directive.
const maxPad = 64 << 20

func parseDirectives(text string) directives {
	d := directives{tokens: -1}
	for _, m := range directiveRE.FindAllStringSubmatch(text, -1) {
		switch {
		case m[2] != "":
			d.tokens, _ = strconv.Atoi(m[2])
		case m[3] != "":
			d.slow, _ = strconv.Atoi(m[3])
		case m[1] == "cut":
			d.cut = true
		case m[4] != "":
			d.pad, _ = strconv.Atoi(m[4])
			d.pad = min(d.pad, maxPad)
		case m[5] != "":
			d.gap, _ = strconv.Atoi(m[5])
			d.gap = min(d.gap, maxGap)
		case m[11] != "":
			d.tier = m[11]
		case m[12] != "":
			d.awsError = m[12]
		}
		for i, f := range []*int{&d.cacheRead, &d.cacheWrite, &d.cacheWrite1h, &d.audioIn, &d.audioOut} {
			if v := m[6+i]; v != "" {
				*f, _ = strconv.Atoi(v)
			}
		}
	}
	return d
}

// answer is a generated completion: one word per token.
type answer struct {
	tokens []string // each token's text, with its leading space
	// truncated: the output-token limit cut the answer short.
	truncated bool
	input     int // input tokens
	dir       directives
}

// text is the whole answer text; the pad directive appends that many dots (counted as
// no token: the usage stays the token count).
func (a answer) text() string { return strings.Join(a.tokens, "") + strings.Repeat(".", a.dir.pad) }

// generate builds the answer to prompt (the last user text) with input tokens counted
// over all of the request's text, honouring directives and the output-token limit
// (0: none).
func generate(prompt string, allText []string, limit int) answer {
	d := parseDirectives(prompt)
	words := strings.Fields(directiveRE.ReplaceAllString(prompt, " "))
	if len(words) == 0 {
		words = []string{"ok"}
	}
	n := len(words)
	if d.tokens >= 0 {
		n = d.tokens
	}
	a := answer{dir: d}
	if limit > 0 && n > limit {
		n, a.truncated = limit, true
	}
	for i := 0; i < n; i++ {
		w := words[i%len(words)]
		if i > 0 {
			w = " " + w
		}
		a.tokens = append(a.tokens, w)
	}
	for _, t := range allText {
		a.input += len(strings.Fields(t))
	}
	return a
}

// textOf returns the text of a message content: a string, or the text parts of an
// array of content parts/blocks.
func textOf(content any) string {
	switch c := content.(type) {
	case string:
		return c
	case []any:
		var parts []string
		for _, p := range c {
			if m, ok := p.(map[string]any); ok {
				if t, ok := m["text"].(string); ok {
					parts = append(parts, t)
				}
			}
		}
		return strings.Join(parts, " ")
	}
	return ""
}

// messagesText returns every message's text and the last user message's text.
func messagesText(msgs any) (all []string, lastUser string) {
	list, _ := msgs.([]any)
	for _, m := range list {
		mm, _ := m.(map[string]any)
		t := textOf(mm["content"])
		all = append(all, t)
		if mm["role"] == "user" {
			lastUser = t
		}
	}
	return all, lastUser
}

func intField(body map[string]any, names ...string) int {
	for _, n := range names {
		if f, ok := body[n].(float64); ok && f > 0 {
			return int(f)
		}
	}
	return 0
}

// idFor is a deterministic id derived from the request body.
func idFor(prefix string, raw []byte) string {
	sum := sha256.Sum256(raw)
	return prefix + hex.EncodeToString(sum[:12])
}

// pacer spreads a streamed answer over the slow directive's seconds: one chunk per
// second for the first N chunks, the rest of the time before the end.
type pacer struct {
	r     *http.Request
	slow  int
	waits int
}

// beforeChunk waits before a chunk; false when the client went away.
func (p *pacer) beforeChunk() bool {
	if p.waits >= p.slow {
		return true
	}
	p.waits++
	return sleep(p.r.Context(), time.Second)
}

// beforeEnd waits out the remaining seconds.
func (p *pacer) beforeEnd() bool {
	for p.waits < p.slow {
		if !p.beforeChunk() {
			return false
		}
	}
	return true
}

// cutAfter is how many content chunks a [[mock:cut]] stream sends before dropping.
const cutAfter = 2

// streamTokens sends each token with delta, paced by the slow directive, dropping the
// connection where the cut directive says, then waits out the rest of the slow time.
// It returns false when the client went away (the caller then stops).
func (a answer) streamTokens(r *http.Request, delta func(tok string) bool) bool {
	p := &pacer{r: r, slow: a.dir.slow}
	for i, tok := range a.tokens {
		if a.dir.cut && i == cutAfter {
			drop()
		}
		if i > 0 && a.dir.gap > 0 && !sleep(r.Context(), time.Duration(a.dir.gap)*time.Millisecond) {
			return false
		}
		if !p.beforeChunk() || !delta(tok) {
			return false
		}
	}
	if a.dir.cut {
		drop()
	}
	return p.beforeEnd()
}

// sse writes server-sent events and flushes each.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, rc: http.NewResponseController(w)}
}

func (s *sse) event(name string, data []byte) bool {
	var b []byte
	if name != "" {
		b = append(b, "event: "+name+"\n"...)
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	if _, err := s.w.Write(b); err != nil {
		return false
	}
	return s.rc.Flush() == nil
}

// drop ends the response by dropping the connection (no terminating chunk).
func drop() {
	panic(http.ErrAbortHandler)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func secs(n int) time.Duration { return time.Duration(n) * time.Second }
