package openai

import (
	"strconv"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/wire"
	"github.com/tidwall/gjson"
)

// ParseResponses validates a Responses request body (spec section 4.4) and returns its
// neutral form.
//
// input is a string or an array of objects (Responses input items). The prompt the hold
// is estimated from is every text the items carry: message content (a string, or the
// text of input_text/output_text/refusal parts), function call arguments and outputs,
// and any other item as its raw JSON; image, file and audio parts count by their kind's
// bound (a file by URL or id is unbounded). instructions count as text, every other
// top-level field (tools, text.format, …) as JSON. Each item counts as one message of
// framing.
//
// A prepaid gateway must see everything it is billed for before it admits a request:
// fields that make the upstream bill for what the request does not carry are refused
// (see unbillable).
func ParseResponses(body []byte) (wire.Parsed, *apierr.Error) {
	root, p, err := wire.Begin(body)
	if err != nil {
		return p, err
	}
	if err := unbillable(root); err != nil {
		return p, err
	}
	if p.Prompt, err = responsesInput(root.Get("input")); err != nil {
		return p, err
	}
	if in := root.Get("instructions"); in.Exists() && in.Type != gjson.Null {
		if _, err := wire.OptionalString(root, "instructions"); err != nil {
			return p, err
		}
		p.Prompt.Texts = append(p.Prompt.Texts, in.Str)
	}
	// Everything but the walked input and instructions is billed as JSON (tools,
	// text.format schemas, …).
	p.Prompt.JSON = append(p.Prompt.JSON, wire.Extras(root, "model", "input", "instructions")...)
	if p.MaxOutput, err = wire.PositiveInt(root, "max_output_tokens", false); err != nil {
		return p, err
	}
	if p.MaxOutput > 0 {
		p.MaxOutputParam = "max_output_tokens"
	}
	if p.Stream, err = wire.Stream(root); err != nil {
		return p, err
	}
	if p.RateCard, err = wire.ReadRateCard(root, body); err != nil {
		return p, err
	}
	if err := wire.Range(root, "temperature", 0, 2); err != nil {
		return p, err
	}
	if err := wire.Range(root, "top_p", 0, 1); err != nil {
		return p, err
	}
	if _, err := wire.OptionalObjectArray(root, "tools"); err != nil {
		return p, err
	}
	p.Prompt.Tools = root.Get("tools").IsArray()
	if err := wire.OptionalObject(root, "text"); err != nil {
		return p, err
	}
	p.Unpriced = wire.ServerTools(root, clientTool)
	if err := wire.OptionalStringOrObject(root, "tool_choice"); err != nil {
		return p, err
	}
	if err := wire.OptionalObject(root, "metadata"); err != nil {
		return p, err
	}
	return p, nil
}

func responsesInput(in gjson.Result) (wire.Prompt, *apierr.Error) {
	var pr wire.Prompt
	switch {
	case !in.Exists() || in.Type == gjson.Null:
		return pr, apierr.Param(apierr.InvalidRequest, "input", "The 'input' field is required.")
	case in.Type == gjson.String:
		pr.Texts = append(pr.Texts, in.Str)
		pr.Messages = 1
		return pr, nil
	case !in.IsArray():
		return pr, apierr.Param(apierr.InvalidRequest, "input", "The 'input' field must be a string or an array of input items.")
	}
	var err *apierr.Error
	i := 0
	wire.ForEach(in, func(item wire.Object) bool {
		at := "input[" + strconv.Itoa(i) + "]"
		i++
		if !item.IsObject() {
			err = apierr.Param(apierr.InvalidRequest, at, "Each input item must be an object.")
			return false
		}
		pr.Messages++
		c := item.Get("content")
		switch {
		case c.Type == gjson.String:
			pr.Texts = append(pr.Texts, c.Str)
		case c.IsArray():
			j := 0
			wire.ForEach(c, func(part wire.Object) bool {
				pat := at + ".content[" + strconv.Itoa(j) + "]"
				j++
				typ, e := wire.ContentPart(part, pat)
				if e != nil {
					err = e
					return false
				}
				switch typ {
				case "input_image":
					pr.Images++
				case "input_file":
					fileData(&pr, part, pat)
				case "input_audio":
					pr.AudioBytes += wire.Base64Size(part.Get("input_audio.data").Str)
				case "refusal":
					pr.Texts = append(pr.Texts, part.Get("refusal").Str)
				case "input_text", "output_text":
					pr.Texts = append(pr.Texts, part.Get("text").Str)
				default:
					pr.Images++
					pr.JSON = append(pr.JSON, part.Raw)
				}
				return true
			})
			if err != nil {
				return false
			}
		case c.Exists() && c.Type != gjson.Null:
			err = apierr.Param(apierr.InvalidRequest, at+".content", "An input item's content must be a string or an array of content parts.")
			return false
		default:
			// Function calls, their outputs, reasoning and other items: count their JSON.
			pr.JSON = append(pr.JSON, item.Raw)
		}
		return true
	})
	if err != nil {
		return pr, err
	}
	if pr.Messages == 0 {
		return pr, apierr.Param(apierr.InvalidRequest, "input", "The 'input' field must hold at least one item.")
	}
	return pr, nil
}

// unbillable refuses the Responses features whose cost the gateway cannot bound or
// settle: "background" runs answer before the work is done, with no usage to charge;
// "previous_response_id", "conversation" and stored "prompt" templates make the upstream
// bill for context the request does not carry, so the hold (estimated from the request)
// would not bound the charge. Clients send the full input instead. A false or null value
// is accepted: it asks for nothing.
func unbillable(root wire.Object) *apierr.Error {
	if b := root.Get("background"); b.Exists() && b.Type != gjson.Null && b.Type != gjson.False {
		return apierr.Param(apierr.InvalidRequest, "background",
			"Background responses are not supported by this gateway: their usage cannot be settled. Omit 'background'.")
	}
	for _, f := range []string{"previous_response_id", "conversation", "prompt"} {
		if v := root.Get(f); v.Exists() && v.Type != gjson.Null {
			return apierr.Param(apierr.InvalidRequest, f,
				"'"+f+"' is not supported by this gateway: prepaid requests must carry their whole input. Send the conversation in 'input'.")
		}
	}
	return nil
}
