package translate

import (
	"fmt"

	"github.com/llmgw/gateway/extproc/sse"
	"github.com/tidwall/gjson"
)

// The gemini codec's stream half (streamGenerateContent?alt=sse): every event is a
// GenerateContentResponse holding the next parts; the last carries finishReason, and
// usageMetadata is cumulative. The stream has no end event: it ends with its bytes.

func (geminiCodec) newStreamDecoder() streamDecoder { return &geminiDecoder{text: -1} }

type geminiDecoder struct {
	started  bool
	next     int // the next part index
	text     int // the open text part; -1 when none
	calls    int
	finish   Finish
	finished bool
}

func (d *geminiDecoder) decode(ev *sse.Event, emit func(Event)) error {
	if !gjson.ValidBytes(ev.Data) {
		return fmt.Errorf("%w: generateContent event is not JSON", ErrMalformed)
	}
	root := gjson.ParseBytes(ev.Data)
	if e := root.Get("error"); e.Exists() {
		emit(Event{Kind: EventError, ErrorType: e.Get("status").Str, Message: e.Get("message").Str})
		return nil
	}
	if !d.started {
		d.started = true
		emit(Event{Kind: EventStart, ID: root.Get("responseId").Str})
	}
	cand := root.Get("candidates.0")
	cand.Get("content.parts").ForEach(func(_, p gjson.Result) bool {
		switch {
		case p.Get("thought").Type == gjson.True:
		case p.Get("functionCall").Exists():
			d.closeText(emit)
			tc := geminiToolCall(p.Get("functionCall"), root.Get("responseId").Str, d.calls)
			d.calls++
			i := d.next
			d.next++
			emit(Event{Kind: EventToolCall, Index: i, ToolCall: ToolCall{ID: tc.ID, Name: tc.Name}})
			emit(Event{Kind: EventToolArgs, Index: i, ToolCall: ToolCall{Arguments: tc.Arguments}})
			emit(Event{Kind: EventPartDone, Index: i})
		case p.Get("text").Str != "":
			if d.text < 0 {
				d.text = d.next
				d.next++
			}
			emit(Event{Kind: EventText, Index: d.text, Text: p.Get("text").Str})
		}
		return true
	})
	if u := root.Get("usageMetadata"); u.Exists() {
		emit(Event{Kind: EventUsage, Usage: geminiUsage(u)})
	}
	if f := cand.Get("finishReason").Str; f != "" {
		d.finish, d.finished = geminiFinish(f, d.calls > 0), true
	} else if !cand.Exists() && root.Get("promptFeedback.blockReason").Exists() {
		d.finish, d.finished = FinishContentFilter, true
	}
	return nil
}

func (d *geminiDecoder) closeText(emit func(Event)) {
	if d.text >= 0 {
		emit(Event{Kind: EventPartDone, Index: d.text})
		d.text = -1
	}
}

// end completes a stream that reached its finish; one cut before is left unfinished
// (the client sees no normal end, and the lifecycle settles what was delivered).
func (d *geminiDecoder) end(emit func(Event)) error {
	if !d.finished {
		return nil
	}
	d.closeText(emit)
	emit(Event{Kind: EventFinish, Finish: d.finish})
	emit(Event{Kind: EventDone})
	return nil
}
