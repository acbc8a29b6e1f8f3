package translate

import (
	"fmt"
	"strconv"

	"github.com/llmgw/gateway/extproc/sse"
	"github.com/tidwall/gjson"
)

// The messages codec's stream half: Anthropic's named events (message_start,
// content_block_start/delta/stop, message_delta, message_stop, ping, error).

func (messagesCodec) newStreamDecoder() streamDecoder {
	return &messagesDecoder{blocks: map[int64]int{}}
}

// messagesDecoder maps Anthropic's block indexes to part indexes (thinking blocks have
// none: the other APIs cannot carry them).
type messagesDecoder struct {
	next   int
	blocks map[int64]int
}

func (d *messagesDecoder) decode(ev *sse.Event, emit func(Event)) error {
	if !gjson.ValidBytes(ev.Data) {
		return fmt.Errorf("%w: message event is not JSON", ErrMalformed)
	}
	root := gjson.ParseBytes(ev.Data)
	switch root.Get("type").Str {
	case "message_start":
		m := root.Get("message")
		emit(Event{Kind: EventStart, ID: m.Get("id").Str})
		emit(Event{Kind: EventUsage, Usage: messagesUsage(m.Get("usage"))})
	case "content_block_start":
		b := root.Get("content_block")
		i := root.Get("index").Int()
		switch b.Get("type").Str {
		case "text":
			d.blocks[i] = d.next
			d.next++
			if t := b.Get("text").Str; t != "" {
				emit(Event{Kind: EventText, Index: d.blocks[i], Text: t})
			}
		case "tool_use":
			d.blocks[i] = d.next
			d.next++
			emit(Event{Kind: EventToolCall, Index: d.blocks[i], ToolCall: ToolCall{ID: b.Get("id").Str, Name: b.Get("name").Str}})
		}
	case "content_block_delta":
		idx, ok := d.blocks[root.Get("index").Int()]
		if !ok {
			return nil
		}
		delta := root.Get("delta")
		switch delta.Get("type").Str {
		case "text_delta":
			emit(Event{Kind: EventText, Index: idx, Text: delta.Get("text").Str})
		case "input_json_delta":
			if a := delta.Get("partial_json").Str; a != "" {
				emit(Event{Kind: EventToolArgs, Index: idx, ToolCall: ToolCall{Arguments: a}})
			}
		}
	case "content_block_stop":
		if idx, ok := d.blocks[root.Get("index").Int()]; ok {
			emit(Event{Kind: EventPartDone, Index: idx})
		}
	case "message_delta":
		if s := root.Get("delta.stop_reason"); s.Type == gjson.String {
			emit(Event{Kind: EventFinish, Finish: messagesFinish(s.Str), StopSequence: root.Get("delta.stop_sequence").Str})
		}
		if u := root.Get("usage"); u.IsObject() {
			emit(Event{Kind: EventUsage, Usage: messagesUsage(u)})
		}
	case "message_stop":
		emit(Event{Kind: EventDone})
	case "error":
		emit(Event{Kind: EventError, ErrorType: root.Get("error.type").Str, Message: root.Get("error.message").Str})
	}
	return nil
}

func (messagesCodec) newStreamEncoder(o ResponseOptions) streamEncoder {
	return &messagesEncoder{o: o, blocks: map[int]int{}}
}

type messagesEncoder struct {
	o       ResponseOptions
	started bool
	blocks  map[int]int // part index → block index
	open    []int       // open block indexes
	finish  Finish
	seq     string
	usage   Usage
	failed  bool
}

func appendNamed(dst []byte, name string, v any) ([]byte, error) {
	b, err := marshal(v)
	if err != nil {
		return dst, err
	}
	dst = append(dst, "event: "...)
	dst = append(dst, name...)
	dst = append(dst, '\n')
	return appendData(dst, b), nil
}

func (e *messagesEncoder) encode(dst []byte, ev Event) ([]byte, error) {
	if e.failed {
		return dst, nil
	}
	var err error
	if !e.started && ev.Kind != EventError {
		e.started = true
		e.usage.merge(ev.Usage)
		id := ev.ID
		dst, err = appendNamed(dst, "message_start", map[string]any{"type": "message_start", "message": messageOut{
			ID: id, Type: "message", Role: "assistant", Model: e.o.PublicModel, Content: []messagesBlock{},
			Usage: messagesUsageOf(e.usage)}})
		if err != nil {
			return dst, err
		}
		if ev.Kind == EventStart {
			return dst, nil
		}
	}
	switch ev.Kind {
	case EventText:
		k, ok := e.blocks[ev.Index]
		if !ok {
			k = e.openBlock(ev.Index)
			empty := ""
			if dst, err = appendNamed(dst, "content_block_start", map[string]any{"type": "content_block_start", "index": k,
				"content_block": messagesBlock{Type: "text", Text: &empty}}); err != nil {
				return dst, err
			}
		}
		return appendBlockDelta(dst, k, "text_delta", "text", ev.Text), nil
	case EventToolCall:
		k := e.openBlock(ev.Index)
		return appendNamed(dst, "content_block_start", map[string]any{"type": "content_block_start", "index": k,
			"content_block": map[string]any{"type": "tool_use", "id": ev.ToolCall.ID, "name": ev.ToolCall.Name, "input": map[string]any{}}})
	case EventToolArgs:
		return appendBlockDelta(dst, e.blocks[ev.Index], "input_json_delta", "partial_json", ev.ToolCall.Arguments), nil
	case EventPartDone:
		return e.closeBlock(dst, e.blocks[ev.Index])
	case EventFinish:
		e.finish, e.seq = ev.Finish, ev.StopSequence
	case EventUsage:
		e.usage.merge(ev.Usage)
	case EventError:
		e.failed = true
		typ := "api_error"
		if ev.ErrorType == "overloaded_error" {
			typ = "overloaded_error"
		}
		return appendNamed(dst, "error", map[string]any{"type": "error", "error": map[string]string{
			"type": typ, "message": "The upstream provider failed while streaming."}})
	case EventDone:
		for len(e.open) > 0 {
			if dst, err = e.closeBlock(dst, e.open[0]); err != nil {
				return dst, err
			}
		}
		reason, seq := messagesFinishOut(e.finish, e.seq)
		if dst, err = appendNamed(dst, "message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": reason, "stop_sequence": seq}, "usage": messagesUsageOf(e.usage)}); err != nil {
			return dst, err
		}
		return appendNamed(dst, "message_stop", map[string]string{"type": "message_stop"})
	}
	return dst, nil
}

func (e *messagesEncoder) openBlock(part int) int {
	k := len(e.blocks)
	e.blocks[part] = k
	e.open = append(e.open, k)
	return k
}

func (e *messagesEncoder) closeBlock(dst []byte, k int) ([]byte, error) {
	for i, o := range e.open {
		if o == k {
			e.open = append(e.open[:i], e.open[i+1:]...)
			return appendNamed(dst, "content_block_stop", map[string]any{"type": "content_block_stop", "index": k})
		}
	}
	return dst, nil
}

// appendBlockDelta appends a content_block_delta event, the one event of every token:
// written directly, without a marshaller.
func appendBlockDelta(dst []byte, index int, typ, field, value string) []byte {
	dst = append(dst, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
	dst = strconv.AppendInt(dst, int64(index), 10)
	dst = append(dst, `,"delta":{"type":"`...)
	dst = append(dst, typ...)
	dst = append(dst, `","`...)
	dst = append(dst, field...)
	dst = append(dst, `":`...)
	dst = appendString(dst, value)
	return append(dst, "}}\n\n"...)
}
