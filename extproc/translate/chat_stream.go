package translate

import (
	"fmt"

	"github.com/llmgw/gateway/extproc/sse"
	"github.com/tidwall/gjson"
)

// The chat codec's stream half: Chat Completions chunks (`data: {...}`, `data: [DONE]`).

func (chatCodec) newStreamDecoder() streamDecoder { return &chatDecoder{text: -1} }

// chatDecoder numbers the answer's parts: the text part, and each tool call by the
// chunk's tool index.
type chatDecoder struct {
	started bool
	next    int
	text    int         // the open text part, -1 when none
	tools   map[int]int // chat tool index → part index
	open    []int
}

func (d *chatDecoder) decode(ev *sse.Event, emit func(Event)) error {
	data := ev.Data
	if string(data) == "[DONE]" {
		emit(Event{Kind: EventDone})
		return nil
	}
	if !gjson.ValidBytes(data) {
		return fmt.Errorf("%w: chat chunk is not JSON", ErrMalformed)
	}
	root := gjson.ParseBytes(data)
	if e := root.Get("error"); e.Exists() {
		emit(Event{Kind: EventError, ErrorType: e.Get("type").Str, Message: e.Get("message").Str})
		return nil
	}
	if !d.started {
		d.started = true
		emit(Event{Kind: EventStart, ID: root.Get("id").Str, Created: root.Get("created").Int()})
	}
	ch := root.Get("choices.0")
	delta := ch.Get("delta")
	if s := delta.Get("content"); s.Type == gjson.String && s.Str != "" {
		if d.text < 0 {
			d.text = d.openPart()
		}
		emit(Event{Kind: EventText, Index: d.text, Text: s.Str})
	}
	delta.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		k := int(tc.Get("index").Int())
		idx, ok := d.tools[k]
		if !ok {
			if d.tools == nil {
				d.tools = map[int]int{}
			}
			d.text = -1 // text after a tool call is a new part
			idx = d.openPart()
			d.tools[k] = idx
			emit(Event{Kind: EventToolCall, Index: idx, ToolCall: ToolCall{ID: tc.Get("id").Str, Name: tc.Get("function.name").Str}})
		}
		if a := tc.Get("function.arguments").Str; a != "" {
			emit(Event{Kind: EventToolArgs, Index: idx, ToolCall: ToolCall{Arguments: a}})
		}
		return true
	})
	if f := ch.Get("finish_reason"); f.Type == gjson.String {
		for _, i := range d.open {
			emit(Event{Kind: EventPartDone, Index: i})
		}
		d.open = nil
		emit(Event{Kind: EventFinish, Finish: chatFinish(f.Str)})
	}
	if u := root.Get("usage"); u.IsObject() {
		emit(Event{Kind: EventUsage, Usage: openAIUsage(u)})
	}
	return nil
}

func (d *chatDecoder) openPart() int {
	i := d.next
	d.next++
	d.open = append(d.open, i)
	return i
}

func (chatCodec) newStreamEncoder(o ResponseOptions) streamEncoder {
	return &chatEncoder{o: o, tools: map[int]int{}}
}

type chatEncoder struct {
	o       ResponseOptions
	started bool
	id      string
	created int64
	tools   map[int]int // part index → chat tool index
	finish  Finish
	usage   Usage
	failed  bool
}

type chatChunkOut struct {
	ID      string         `json:"id"`
	Object  string         `json:"object"`
	Created int64          `json:"created"`
	Model   string         `json:"model"`
	Choices []chatDeltaOut `json:"choices"`
	Usage   *chatUsageOut  `json:"usage,omitempty"`
}

type chatDeltaOut struct {
	Index        int           `json:"index"`
	Delta        chatDeltaBody `json:"delta"`
	FinishReason *string       `json:"finish_reason"`
}

type chatDeltaBody struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	ToolCalls []chatToolDelta `json:"tool_calls,omitempty"`
}

type chatToolDelta struct {
	Index    int             `json:"index"`
	ID       string          `json:"id,omitempty"`
	Type     string          `json:"type,omitempty"`
	Function chatFunctionOpt `json:"function"`
}

type chatFunctionOpt struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

func (e *chatEncoder) chunk(dst []byte, c chatChunkOut) ([]byte, error) {
	c.ID, c.Object, c.Created, c.Model = e.id, "chat.completion.chunk", e.created, e.o.PublicModel
	if c.Choices == nil {
		c.Choices = []chatDeltaOut{}
	}
	b, err := marshal(c)
	if err != nil {
		return dst, err
	}
	return appendData(dst, b), nil
}

// appendData appends one `data:` event.
func appendData(dst, data []byte) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, data...)
	return append(dst, "\n\n"...)
}

func (e *chatEncoder) encode(dst []byte, ev Event) ([]byte, error) {
	if e.failed {
		return dst, nil
	}
	var err error
	if !e.started && ev.Kind != EventError {
		e.started = true
		e.id, e.created = ev.ID, ev.Created
		if e.created == 0 {
			e.created = e.o.Created
		}
		empty := ""
		if dst, err = e.chunk(dst, chatChunkOut{Choices: []chatDeltaOut{{Delta: chatDeltaBody{Role: "assistant", Content: &empty}}}}); err != nil {
			return dst, err
		}
	}
	switch ev.Kind {
	case EventText:
		t := ev.Text
		return e.chunk(dst, chatChunkOut{Choices: []chatDeltaOut{{Delta: chatDeltaBody{Content: &t}}}})
	case EventToolCall:
		k := len(e.tools)
		e.tools[ev.Index] = k
		return e.chunk(dst, chatChunkOut{Choices: []chatDeltaOut{{Delta: chatDeltaBody{ToolCalls: []chatToolDelta{{
			Index: k, ID: ev.ToolCall.ID, Type: "function", Function: chatFunctionOpt{Name: ev.ToolCall.Name}}}}}}})
	case EventToolArgs:
		return e.chunk(dst, chatChunkOut{Choices: []chatDeltaOut{{Delta: chatDeltaBody{ToolCalls: []chatToolDelta{{
			Index: e.tools[ev.Index], Function: chatFunctionOpt{Arguments: ev.ToolCall.Arguments}}}}}}})
	case EventFinish:
		e.finish = ev.Finish
	case EventUsage:
		e.usage.merge(ev.Usage)
	case EventError:
		e.failed = true
		return appendData(dst, []byte(`{"error":{"message":"The upstream provider failed while streaming.","type":"api_error","code":"upstream_error"}}`)), nil
	case EventDone:
		f := chatFinishOut(e.finish)
		if dst, err = e.chunk(dst, chatChunkOut{Choices: []chatDeltaOut{{Delta: chatDeltaBody{}, FinishReason: &f}}}); err != nil {
			return dst, err
		}
		if e.o.IncludeUsage {
			u := chatUsage(e.usage)
			if dst, err = e.chunk(dst, chatChunkOut{Usage: &u}); err != nil {
				return dst, err
			}
		}
		return append(dst, "data: [DONE]\n\n"...), nil
	}
	return dst, nil
}
