// Package anthropic holds the Anthropic Messages wire format's request rules: validation
// of /v1/messages and /v1/messages/count_tokens bodies as the API spec (sections 4.2 and
// 4.3) states, reading fields with gjson from the client's bytes, and the in-place edit
// of the model field.
//
// Every failure is an *apierr.Error with the spec's code; the route renders it in the
// Anthropic envelope. It never re-marshals a body.
package anthropic

import (
	"strconv"
	"strings"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/wire"
	"github.com/tidwall/gjson"
)

// ParseMessages validates a Messages request body: model, max_tokens (required, a JSON
// integer > 0), messages (at least one; roles user and assistant; content a string or an
// array of blocks), system, stream and the typed optional fields.
func ParseMessages(body []byte) (wire.Parsed, *apierr.Error) {
	return parse(body, true)
}

// ParseCountTokens validates a count_tokens body: model, messages, system and tools;
// max_tokens and the sampling fields are not needed and are not checked.
func ParseCountTokens(body []byte) (wire.Parsed, *apierr.Error) {
	return parse(body, false)
}

func parse(body []byte, full bool) (wire.Parsed, *apierr.Error) {
	root, p, err := wire.Begin(body)
	if err != nil {
		return p, err
	}
	if full {
		if p.MaxOutput, err = wire.PositiveInt(root, "max_tokens", true); err != nil {
			return p, err
		}
		p.MaxOutputParam = "max_tokens"
	}
	if p.Prompt, err = messages(root.Get("messages")); err != nil {
		return p, err
	}
	if s := root.Get("system"); s.Exists() && s.Type != gjson.Null {
		switch {
		case s.Type == gjson.String:
			p.Prompt.Texts = append(p.Prompt.Texts, s.Str)
		case s.IsArray():
			if err := blocks(s, "system", &p.Prompt); err != nil {
				return p, err
			}
		default:
			return p, apierr.Param(apierr.InvalidRequest, "system", "system: must be a string or an array of content blocks.")
		}
	}
	if t := root.Get("tools"); t.Exists() && t.Type != gjson.Null {
		if !t.IsArray() {
			return p, apierr.Param(apierr.InvalidRequest, "tools", "tools: must be an array.")
		}
		p.Prompt.Tools = true
		p.Unpriced = wire.ServerTools(root, clientTool)
	}
	// MCP servers are tools Anthropic calls itself: their results are billed as input
	// the request does not carry.
	if m := root.Get("mcp_servers"); p.Unpriced == "" && m.Exists() && m.Type != gjson.Null {
		p.Unpriced = "mcp_servers"
	}
	// Everything but the walked messages and system is billed as JSON (tools, …).
	p.Prompt.JSON = append(p.Prompt.JSON, wire.Extras(root, "model", "messages", "system")...)
	if !full {
		return p, nil
	}
	if p.Stream, err = wire.Stream(root); err != nil {
		return p, err
	}
	if p.RateCard, err = wire.ReadRateCard(root, body); err != nil {
		return p, err
	}
	for _, f := range []string{"temperature", "top_p", "top_k"} {
		if v := root.Get(f); v.Exists() && v.Type != gjson.Null && v.Type != gjson.Number {
			return p, apierr.Param(apierr.InvalidRequest, f, f+": must be a number.")
		}
	}
	if err := wire.Range(root, "temperature", 0, 1); err != nil {
		return p, err
	}
	if err := wire.Range(root, "top_p", 0, 1); err != nil {
		return p, err
	}
	if ss := root.Get("stop_sequences"); ss.Exists() && ss.Type != gjson.Null {
		if !wire.ArrayOf(ss, wire.IsString) {
			return p, apierr.Param(apierr.InvalidRequest, "stop_sequences", "stop_sequences: must be an array of strings.")
		}
	}
	return p, nil
}

// messages walks the messages array. It resembles openai's chatMessages but encodes a
// different rule (roles user and assistant only, content required and never null) with
// the Anthropic wording, so the two stay apart.
func messages(msgs gjson.Result) (wire.Prompt, *apierr.Error) {
	var pr wire.Prompt
	if !msgs.Exists() {
		return pr, apierr.Param(apierr.InvalidRequest, "messages", "messages: Field required.")
	}
	if !msgs.IsArray() {
		return pr, apierr.Param(apierr.InvalidRequest, "messages", "messages: must be an array.")
	}
	var err *apierr.Error
	i := 0
	wire.ForEach(msgs, func(m wire.Object) bool {
		at := "messages[" + strconv.Itoa(i) + "]"
		i++
		if !m.IsObject() {
			err = apierr.Param(apierr.InvalidRequest, at, at+": must be an object.")
			return false
		}
		role := m.Get("role")
		if role.Type != gjson.String || (role.Str != "user" && role.Str != "assistant") {
			err = apierr.Param(apierr.InvalidRequest, at+".role", at+".role: must be 'user' or 'assistant'.")
			return false
		}
		c := m.Get("content")
		switch {
		case !c.Exists():
			err = apierr.Param(apierr.InvalidRequest, at+".content", at+".content: Field required.")
			return false
		case c.Type == gjson.String:
			pr.Texts = append(pr.Texts, c.Str)
		case c.IsArray():
			if err = blocks(c, at+".content", &pr); err != nil {
				return false
			}
		default:
			err = apierr.Param(apierr.InvalidRequest, at+".content", at+".content: must be a string or an array of content blocks.")
			return false
		}
		pr.Messages++
		return true
	})
	if err != nil {
		return pr, err
	}
	if pr.Messages == 0 {
		return pr, apierr.Param(apierr.InvalidRequest, "messages", "messages: at least one message is required.")
	}
	return pr, nil
}

// blocks checks an array of content blocks (objects with a string type) and adds their
// parts to pr: text blocks' text, tool_use input (as JSON), tool_result content; image
// and document blocks by their kind (see document); any other block as JSON.
//
// It is not wire.ContentPart: the Anthropic rule differs (a text block's "text" is
// required, other blocks' "text" is not checked) and its messages name the offending
// path the Anthropic way, as do the other rules of this package.
func blocks(arr gjson.Result, at string, pr *wire.Prompt) *apierr.Error {
	var err *apierr.Error
	j := 0
	wire.ForEach(arr, func(b wire.Object) bool {
		bat := at + "[" + strconv.Itoa(j) + "]"
		j++
		typ := b.Get("type")
		if !b.IsObject() || typ.Type != gjson.String {
			err = apierr.Param(apierr.InvalidRequest, bat+".type", bat+": each content block must be an object with a string 'type'.")
			return false
		}
		switch typ.Str {
		case "text":
			t := b.Get("text")
			if t.Type != gjson.String {
				err = apierr.Param(apierr.InvalidRequest, bat+".text", bat+".text: must be a string.")
				return false
			}
			pr.Texts = append(pr.Texts, t.Str)
		case "image":
			pr.Images++
		case "document":
			if err = document(b, bat, pr); err != nil {
				return false
			}
		case "tool_use":
			pr.Texts = append(pr.Texts, b.Get("name").Str)
			pr.JSON = append(pr.JSON, b.Get("input").Raw)
		case "tool_result":
			c := b.Get("content")
			switch {
			case c.Type == gjson.String:
				pr.Texts = append(pr.Texts, c.Str)
			case c.IsArray():
				if err = blocks(c, bat+".content", pr); err != nil {
					return false
				}
			}
		default:
			pr.JSON = append(pr.JSON, b.Raw)
		}
		return true
	})
	return err
}

// document adds a document block at param to pr by its source: a PDF by its bytes
// ("base64") is a document; plain text ("text") is text; "content" holds blocks; a URL
// or a file id cannot be sized before Anthropic fetches it and is unbounded.
func document(b wire.Object, param string, pr *wire.Prompt) *apierr.Error {
	src := b.Get("source")
	switch src.Get("type").Str {
	case "base64":
		pr.Documents = append(pr.Documents, wire.Document{Param: param + ".source.data", Data: src.Get("data").Str})
	case "text":
		pr.Texts = append(pr.Texts, src.Get("data").Str)
	case "content":
		if c := src.Get("content"); c.Type == gjson.String {
			pr.Texts = append(pr.Texts, c.Str)
		} else if c.IsArray() {
			return blocks(c, param+".source.content", pr)
		}
	default:
		pr.Unbound(param + ".source")
	}
	return nil
}

// clientTool reports whether an Anthropic tool type is executed by the client (custom
// tools, and the computer/bash/text-editor tool definitions the client runs): only
// tokens are billed for them. Server tools — web search, web fetch, code execution —
// run at Anthropic and are billed per use.
func clientTool(typ string) bool {
	for _, server := range []string{"web_search", "web_fetch", "code_execution"} {
		if strings.HasPrefix(typ, server) {
			return false
		}
	}
	return true
}
