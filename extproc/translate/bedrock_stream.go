package translate

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/llmgw/gateway/extproc/sse"
	"github.com/tidwall/gjson"
)

// The bedrock codec's stream half (converse-stream): AWS event-stream messages, each
// an event named by its :event-type header (messageStart, contentBlockStart,
// contentBlockDelta, contentBlockStop, messageStop, metadata) or an exception named by
// :exception-type, with a JSON payload.

// maxEventStreamMessage bounds one event-stream message held until complete: the
// framing allows 16 MiB; a Converse event is far smaller.
const maxEventStreamMessage = 1 << 20

// eventStreamFraming cuts AWS event-stream messages out of chunks split at any byte and
// decodes each (prelude, headers, payload and both CRCs checked) with the AWS SDK's
// decoder. Each becomes an sse.Event: Name the event or exception type, ID the message
// type ("event", "exception"), Data the payload.
type eventStreamFraming struct {
	buf []byte
	dec *eventstream.Decoder
}

func newEventStreamFraming() framing {
	return &eventStreamFraming{dec: eventstream.NewDecoder()}
}

func (f *eventStreamFraming) Feed(chunk []byte, emit func(*sse.Event) error) error {
	f.buf = append(f.buf, chunk...)
	for len(f.buf) >= 4 {
		n := int(binary.BigEndian.Uint32(f.buf))
		if n < 16 || n > maxEventStreamMessage {
			return fmt.Errorf("%w: event-stream message of %d bytes", ErrMalformed, n)
		}
		if len(f.buf) < n {
			return nil
		}
		m, err := f.dec.Decode(bytes.NewReader(f.buf[:n]), nil)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		f.buf = f.buf[n:]
		ev := &sse.Event{ID: headerBytes(m, ":message-type"), HasID: true, Data: m.Payload, DataLines: 1}
		ev.Name = headerBytes(m, ":event-type")
		if string(ev.ID) == "exception" {
			ev.Name = headerBytes(m, ":exception-type")
		}
		if err := emit(ev); err != nil {
			return err
		}
	}
	return nil
}

// Finish refuses a stream cut inside a message.
func (f *eventStreamFraming) Finish(func(*sse.Event) error) error {
	if len(f.buf) > 0 {
		return fmt.Errorf("%w: event stream cut inside a message", ErrMalformed)
	}
	return nil
}

func headerBytes(m eventstream.Message, name string) []byte {
	if v := m.Headers.Get(name); v != nil {
		return []byte(v.String())
	}
	return []byte{}
}

func (bedrockCodec) newStreamDecoder() streamDecoder { return &bedrockDecoder{blocks: map[int64]int{}} }

// bedrockDecoder maps Converse's content block indexes to part indexes.
type bedrockDecoder struct {
	started bool
	next    int
	blocks  map[int64]int
	stopped bool
}

func (d *bedrockDecoder) decode(ev *sse.Event, emit func(Event)) error {
	if !gjson.ValidBytes(ev.Data) {
		return fmt.Errorf("%w: Converse event is not JSON", ErrMalformed)
	}
	root := gjson.ParseBytes(ev.Data)
	if string(ev.ID) == "exception" {
		typ := "api_error"
		if n := string(ev.Name); n == "throttlingException" || n == "serviceUnavailableException" {
			typ = "overloaded_error"
		}
		emit(Event{Kind: EventError, ErrorType: typ, Message: root.Get("message").Str})
		return nil
	}
	if !d.started {
		d.started = true
		emit(Event{Kind: EventStart, ID: bedrockID()})
	}
	switch string(ev.Name) {
	case "contentBlockStart":
		if u := root.Get("start.toolUse"); u.Exists() {
			i := d.open(root.Get("contentBlockIndex").Int())
			emit(Event{Kind: EventToolCall, Index: i, ToolCall: ToolCall{ID: u.Get("toolUseId").Str, Name: u.Get("name").Str}})
		}
	case "contentBlockDelta":
		k := root.Get("contentBlockIndex").Int()
		delta := root.Get("delta")
		switch {
		case delta.Get("text").Exists():
			i, ok := d.blocks[k]
			if !ok {
				i = d.open(k)
			}
			if t := delta.Get("text").Str; t != "" {
				emit(Event{Kind: EventText, Index: i, Text: t})
			}
		case delta.Get("toolUse").Exists():
			if i, ok := d.blocks[k]; ok {
				if a := delta.Get("toolUse.input").Str; a != "" {
					emit(Event{Kind: EventToolArgs, Index: i, ToolCall: ToolCall{Arguments: a}})
				}
			}
		}
	case "contentBlockStop":
		if i, ok := d.blocks[root.Get("contentBlockIndex").Int()]; ok {
			emit(Event{Kind: EventPartDone, Index: i})
		}
	case "messageStop":
		d.stopped = true
		emit(Event{Kind: EventFinish, Finish: bedrockFinish(root.Get("stopReason").Str),
			StopSequence: root.Get("additionalModelResponseFields.stop_sequence").Str})
	case "metadata":
		emit(Event{Kind: EventUsage, Usage: bedrockUsage(root.Get("usage"))})
	}
	return nil
}

func (d *bedrockDecoder) open(k int64) int {
	i := d.next
	d.next++
	d.blocks[k] = i
	return i
}

// end completes a stream whose message stopped (the metadata event with the usage
// follows messageStop, so the end is the stream's last byte).
func (d *bedrockDecoder) end(emit func(Event)) error {
	if d.stopped {
		emit(Event{Kind: EventDone})
	}
	return nil
}
