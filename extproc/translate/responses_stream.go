package translate

import (
	"fmt"
	"strconv"

	"github.com/llmgw/gateway/extproc/sse"
	"github.com/tidwall/gjson"
)

// The responses codec's stream half: typed events (response.created, output items,
// text and argument deltas, response.completed/incomplete, error), each with a
// sequence_number.

func (responsesCodec) newStreamDecoder() streamDecoder {
	return &responsesDecoder{parts: map[string]int{}}
}

// responsesDecoder numbers the answer's parts by output item (and content part).
type responsesDecoder struct {
	next  int
	parts map[string]int // "output_index/content_index" → part index
	tools bool
}

func partKey(root gjson.Result) string {
	return root.Get("output_index").Raw + "/" + root.Get("content_index").Raw
}

func (d *responsesDecoder) part(key string) (int, bool) {
	i, ok := d.parts[key]
	if !ok {
		i = d.next
		d.next++
		d.parts[key] = i
	}
	return i, ok
}

func (d *responsesDecoder) decode(ev *sse.Event, emit func(Event)) error {
	if !gjson.ValidBytes(ev.Data) {
		return fmt.Errorf("%w: response event is not JSON", ErrMalformed)
	}
	root := gjson.ParseBytes(ev.Data)
	switch root.Get("type").Str {
	case "response.created":
		r := root.Get("response")
		emit(Event{Kind: EventStart, ID: r.Get("id").Str, Created: r.Get("created_at").Int()})
	case "response.output_item.added":
		if it := root.Get("item"); it.Get("type").Str == "function_call" {
			i, _ := d.part(root.Get("output_index").Raw + "/")
			d.tools = true
			emit(Event{Kind: EventToolCall, Index: i, ToolCall: ToolCall{ID: it.Get("call_id").Str, Name: it.Get("name").Str}})
		}
	case "response.output_text.delta", "response.refusal.delta":
		i, _ := d.part(partKey(root))
		emit(Event{Kind: EventText, Index: i, Text: root.Get("delta").Str})
	case "response.function_call_arguments.delta":
		if i, ok := d.parts[root.Get("output_index").Raw+"/"]; ok {
			emit(Event{Kind: EventToolArgs, Index: i, ToolCall: ToolCall{Arguments: root.Get("delta").Str}})
		}
	case "response.output_item.done":
		prefix := root.Get("output_index").Raw + "/"
		for k, i := range d.parts {
			if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
				emit(Event{Kind: EventPartDone, Index: i})
			}
		}
	case "response.completed", "response.incomplete":
		r := root.Get("response")
		f := responsesFinish(r.Get("status").Str, r.Get("incomplete_details.reason").Str, nil)
		if f == FinishStop && d.tools {
			f = FinishToolCalls
		}
		emit(Event{Kind: EventFinish, Finish: f})
		emit(Event{Kind: EventUsage, Usage: openAIUsage(r.Get("usage"))})
		emit(Event{Kind: EventDone})
	case "response.failed":
		emit(Event{Kind: EventError, ErrorType: root.Get("response.error.code").Str, Message: root.Get("response.error.message").Str})
	case "error":
		emit(Event{Kind: EventError, ErrorType: root.Get("code").Str, Message: root.Get("message").Str})
	}
	return nil
}

func (responsesCodec) newStreamEncoder(o ResponseOptions) streamEncoder {
	return &responsesEncoder{o: o, items: map[int]*streamItem{}}
}

// streamItem is an output item being streamed.
type streamItem struct {
	output int // output_index
	id     string
	call   *ToolCall // nil for a message
	text   string
	done   bool
}

type responsesEncoder struct {
	o       ResponseOptions
	started bool
	seq     int
	id      string
	created int64
	items   map[int]*streamItem // part index → item
	order   []*streamItem
	finish  Finish
	usage   Usage
	failed  bool
}

func (e *responsesEncoder) event(dst []byte, typ string, fields map[string]any) ([]byte, error) {
	fields["type"] = typ
	fields["sequence_number"] = e.seq
	e.seq++
	return appendNamed(dst, typ, fields)
}

// response is the response object as events carry it.
func (e *responsesEncoder) response(status string, final bool) responseOut {
	r := responseOut{ID: e.id, Object: "response", CreatedAt: e.created, Status: status, Model: e.o.PublicModel,
		Output: []any{}, ParallelToolCalls: true, ToolChoice: "auto", Tools: []any{}}
	if !final {
		return r
	}
	r.Status, r.IncompleteDetails = responsesStatus(e.finish)
	u := responsesUsage(e.usage)
	r.Usage = &u
	for _, it := range e.order {
		r.Output = append(r.Output, it.item("completed"))
		if it.call == nil {
			r.OutputText += it.text
		}
	}
	return r
}

func (it *streamItem) item(status string) any {
	if it.call != nil {
		return outputCall{Type: "function_call", ID: it.id, CallID: it.call.ID, Name: it.call.Name, Arguments: it.call.Arguments, Status: status}
	}
	content := []outputText{}
	if status == "completed" {
		content = append(content, outputText{Type: "output_text", Text: it.text, Annotations: []any{}})
	}
	return outputMessage{Type: "message", ID: it.id, Status: status, Role: "assistant", Content: content}
}

func (e *responsesEncoder) encode(dst []byte, ev Event) ([]byte, error) {
	if e.failed {
		return dst, nil
	}
	var err error
	if !e.started && ev.Kind != EventError {
		e.started = true
		e.id, e.created = responseID(ev.ID), ev.Created
		if e.created == 0 {
			e.created = e.o.Created
		}
		if dst, err = e.event(dst, "response.created", map[string]any{"response": e.response("in_progress", false)}); err != nil {
			return dst, err
		}
		if dst, err = e.event(dst, "response.in_progress", map[string]any{"response": e.response("in_progress", false)}); err != nil {
			return dst, err
		}
	}
	switch ev.Kind {
	case EventText:
		it, ok := e.items[ev.Index]
		if !ok {
			it = &streamItem{output: len(e.order), id: messageItemID(e.id, len(e.order))}
			e.items[ev.Index] = it
			e.order = append(e.order, it)
			if dst, err = e.event(dst, "response.output_item.added", map[string]any{"output_index": it.output, "item": it.item("in_progress")}); err != nil {
				return dst, err
			}
			if dst, err = e.event(dst, "response.content_part.added", map[string]any{"item_id": it.id, "output_index": it.output,
				"content_index": 0, "part": outputText{Type: "output_text", Annotations: []any{}}}); err != nil {
				return dst, err
			}
		}
		it.text += ev.Text
		return e.appendDelta(dst, "response.output_text.delta", it, `,"content_index":0,"logprobs":[]`, ev.Text), nil
	case EventToolCall:
		call := ev.ToolCall
		it := &streamItem{output: len(e.order), id: callItemID(call.ID), call: &call}
		e.items[ev.Index] = it
		e.order = append(e.order, it)
		return e.event(dst, "response.output_item.added", map[string]any{"output_index": it.output, "item": it.item("in_progress")})
	case EventToolArgs:
		it, ok := e.items[ev.Index]
		if !ok || it.call == nil {
			return dst, nil
		}
		it.call.Arguments += ev.ToolCall.Arguments
		return e.appendDelta(dst, "response.function_call_arguments.delta", it, "", ev.ToolCall.Arguments), nil
	case EventPartDone:
		if it, ok := e.items[ev.Index]; ok {
			return e.closeItem(dst, it)
		}
	case EventFinish:
		e.finish = ev.Finish
	case EventUsage:
		e.usage.merge(ev.Usage)
	case EventError:
		e.failed = true
		return e.event(dst, "error", map[string]any{"code": "upstream_error", "message": "The upstream provider failed while streaming.", "param": nil})
	case EventDone:
		for _, it := range e.order {
			if dst, err = e.closeItem(dst, it); err != nil {
				return dst, err
			}
		}
		name := "response.completed"
		if e.finish == FinishLength || e.finish == FinishContentFilter {
			name = "response.incomplete"
		}
		return e.event(dst, name, map[string]any{"response": e.response("", true)})
	}
	return dst, nil
}

func (e *responsesEncoder) closeItem(dst []byte, it *streamItem) ([]byte, error) {
	if it.done {
		return dst, nil
	}
	it.done = true
	var err error
	if it.call != nil {
		if dst, err = e.event(dst, "response.function_call_arguments.done", map[string]any{"item_id": it.id, "output_index": it.output, "arguments": it.call.Arguments}); err != nil {
			return dst, err
		}
	} else {
		if dst, err = e.event(dst, "response.output_text.done", map[string]any{"item_id": it.id, "output_index": it.output, "content_index": 0, "text": it.text, "logprobs": []any{}}); err != nil {
			return dst, err
		}
		if dst, err = e.event(dst, "response.content_part.done", map[string]any{"item_id": it.id, "output_index": it.output, "content_index": 0,
			"part": outputText{Type: "output_text", Text: it.text, Annotations: []any{}}}); err != nil {
			return dst, err
		}
	}
	return e.event(dst, "response.output_item.done", map[string]any{"output_index": it.output, "item": it.item("completed")})
}

// appendDelta appends a text or arguments delta event, the one event of every token:
// written directly, without a marshaller.
func (e *responsesEncoder) appendDelta(dst []byte, typ string, it *streamItem, extra, delta string) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: {\"type\":\""...)
	dst = append(dst, typ...)
	dst = append(dst, `","sequence_number":`...)
	dst = strconv.AppendInt(dst, int64(e.seq), 10)
	e.seq++
	dst = append(dst, `,"item_id":`...)
	dst = appendString(dst, it.id)
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(it.output), 10)
	dst = append(dst, extra...)
	dst = append(dst, `,"delta":`...)
	dst = appendString(dst, delta)
	return append(dst, "}\n\n"...)
}
