package lifecycle

import (
	"strings"
	"testing"
)

func TestCheckJSONShapeLeavesBrokenJSONToTheParser(t *testing.T) {
	for _, body := range []string{`{"a":"unterminated`, `}}}`, `{"a":1,"a`, `{"\u00":1,"\u00":2}`, ``} {
		if e := checkJSONShape([]byte(body)); e != nil {
			t.Errorf("%q: %s", body, e.Message)
		}
	}
}

// BenchmarkCheckJSONShape: a typical chat body, and a 2 MiB one of 20,000 messages.
func BenchmarkCheckJSONShape(b *testing.B) {
	small := []byte(`{"model":"demo-chat","max_tokens":256,"temperature":0.7,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write a short poem about the sea, in four lines, with a rhyme."}]}`)
	msg := `{"role":"user","content":"` + strings.Repeat("x", 80) + `"},`
	big := []byte(`{"model":"demo-chat","messages":[` + strings.Repeat(msg, (2<<20-100)/len(msg)) + `{"role":"user","content":"end"}]}`)
	for _, c := range []struct {
		name string
		body []byte
	}{{"typical", small}, {"2MiB", big}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				if e := checkJSONShape(c.body); e != nil {
					b.Fatal(e.Message)
				}
			}
		})
	}
}
