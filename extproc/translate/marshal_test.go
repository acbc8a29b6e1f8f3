package translate

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
)

// TestMain holds every value the package's tests marshal (requests, answers and stream
// events of every pair) to encoding/json's bytes, which marshal's go-json must equal. Not
// while benchmarks run: they measure marshal as extproc runs it.
func TestMain(m *testing.M) {
	flag.Parse()
	if flag.Lookup("test.bench").Value.String() != "" {
		os.Exit(m.Run())
	}
	var mu sync.Mutex
	var diffs []string
	compared := 0
	checkMarshal = func(v any, out []byte) {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		err := enc.Encode(v)
		mu.Lock()
		defer mu.Unlock()
		compared++
		if want := bytes.TrimSuffix(b.Bytes(), []byte("\n")); err != nil || !bytes.Equal(out, want) {
			diffs = append(diffs, fmt.Sprintf("%T:\n go-json       %s\n encoding/json %s (%v)", v, out, want, err))
		}
	}
	code := m.Run()
	if len(diffs) > 0 {
		fmt.Fprintf(os.Stderr, "marshal differs from encoding/json on %d of %d values:\n", len(diffs), compared)
		for _, d := range diffs[:min(len(diffs), 5)] {
			fmt.Fprintln(os.Stderr, d)
		}
		code = 1
	} else if run := flag.Lookup("test.run"); code == 0 && run != nil && run.Value.String() == "" && compared < 1000 {
		// The whole suite marshals thousands of values: a hook that saw this few
		// compared next to nothing.
		fmt.Fprintf(os.Stderr, "marshal was compared with encoding/json on only %d values\n", compared)
		code = 1
	}
	os.Exit(code)
}

func TestMarshalTrickyValues(t *testing.T) {
	type value struct {
		S string          `json:"s"`
		R json.RawMessage `json:"r,omitempty"`
		F float64         `json:"f"`
		M map[string]any  `json:"m,omitempty"`
		A []string        `json:"a"`
		P *int64          `json:"p,omitempty"`
	}
	for _, v := range []value{
		{S: "a\u2028b\u2029c<>&\x01\x1f\"\\/é😀\xff\xfe", R: json.RawMessage("{ \"a\" : [1, 2] }"), F: 1e21},
		{R: json.RawMessage(`  [ ]  `), F: 0.000001, M: map[string]any{"b": 1, "a": []any{true, nil, 1.5}}},
		{S: "\t\n\r", F: 123456789012345678, A: []string{}},
	} {
		if _, err := marshal(v); err != nil {
			t.Fatal(err)
		}
	}
}
