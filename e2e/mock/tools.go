package mock

import (
	"encoding/json"
	"regexp"
	"strings"
)

// toolRE is the [[mock:tool=NAME]] directive (docs/local-stack.md): when the request offers a
// function tool NAME, the answer is one call of it.
var toolRE = regexp.MustCompile(`\[\[mock:tool=([A-Za-z0-9_-]+)\]\]`)

// mockCall is the tool call an answer makes.
type mockCall struct {
	name string
	args string // {"text":"<the last user text without directives>"}
}

// argPieces splits the call's arguments over several stream deltas.
func (c mockCall) argPieces() []string {
	var out []string
	s := c.args
	for len(s) > 0 {
		n := min(len(s), 8)
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// tokens is the call's output token count: one per word of its arguments, plus two.
func (c mockCall) tokens() int { return len(strings.Fields(c.args)) + 2 }

// toolCallFor decides whether the answer to a request of api ("chat", "messages",
// "responses") is a tool call: the last user text names an offered function tool, and the
// conversation does not end with a tool result (the answer to a tool result is text).
func toolCallFor(api string, body map[string]any, last string) (mockCall, bool) {
	return namedCall(last, endsWithToolResult(api, body), func(name string) bool { return offersTool(api, body, name) })
}

// namedCall is the call [[mock:tool=NAME]] in the last user text asks for, when
// offered(NAME) and the conversation does not end with a tool result.
func namedCall(last string, endsWithResult bool, offered func(string) bool) (mockCall, bool) {
	m := toolRE.FindStringSubmatch(last)
	if m == nil || endsWithResult || !offered(m[1]) {
		return mockCall{}, false
	}
	text := strings.Join(strings.Fields(directiveRE.ReplaceAllString(toolRE.ReplaceAllString(last, " "), " ")), " ")
	args, _ := json.Marshal(map[string]string{"text": text})
	return mockCall{name: m[1], args: string(args)}, true
}

func offersTool(api string, body map[string]any, name string) bool {
	tools, _ := body["tools"].([]any)
	for _, t := range tools {
		tm, _ := t.(map[string]any)
		switch api {
		case "chat":
			f, _ := tm["function"].(map[string]any)
			if tm["type"] == "function" && f["name"] == name {
				return true
			}
		case "messages":
			if (tm["type"] == nil || tm["type"] == "custom") && tm["name"] == name {
				return true
			}
		default:
			if tm["type"] == "function" && tm["name"] == name {
				return true
			}
		}
	}
	return false
}

func endsWithToolResult(api string, body map[string]any) bool {
	key := "messages"
	if api == "responses" {
		key = "input"
	}
	list, _ := body[key].([]any)
	if len(list) == 0 {
		return false
	}
	last, _ := list[len(list)-1].(map[string]any)
	switch api {
	case "chat":
		return last["role"] == "tool"
	case "messages":
		blocks, _ := last["content"].([]any)
		for _, b := range blocks {
			if bm, _ := b.(map[string]any); bm["type"] == "tool_result" {
				return true
			}
		}
		return false
	}
	return last["type"] == "function_call_output"
}

// stopsOf reads stop sequences: a string or an array of strings.
func stopsOf(v any) []string {
	switch s := v.(type) {
	case string:
		return []string{s}
	case []any:
		var out []string
		for _, x := range s {
			if t, ok := x.(string); ok && t != "" {
				out = append(out, t)
			}
		}
		return out
	}
	return nil
}

// applyStop ends the answer before the first occurrence of any stop sequence and
// returns the one that matched ("" when none did).
func (a *answer) applyStop(stops []string) string {
	text := strings.Join(a.tokens, "")
	at, matched := -1, ""
	for _, s := range stops {
		if i := strings.Index(text, s); i >= 0 && (at < 0 || i < at) {
			at, matched = i, s
		}
	}
	if at < 0 {
		return ""
	}
	var kept []string
	n := 0
	for _, t := range a.tokens {
		if n+len(t) > at {
			if part := t[:at-n]; strings.TrimSpace(part) != "" {
				kept = append(kept, part)
			}
			break
		}
		kept = append(kept, t)
		n += len(t)
	}
	a.tokens, a.truncated = kept, false
	return matched
}
