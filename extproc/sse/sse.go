// Package sse is an incremental decoder and an encoder for server-sent events
// (text/event-stream), as the WHATWG HTML standard defines them.
//
// The decoder takes a byte stream in arbitrary chunks: an event, a line, even a "\r\n"
// pair may be split at any byte. It hands out each event as soon as its terminating blank
// line is complete, together with the exact bytes it was made of (Event.Raw), so a caller
// that rewrites only some events can pass every other byte on unchanged: the Raw bytes of
// all events, in order, are exactly the input. Blank lines that end no event and
// comment-only blocks are handed out too (with no fields), for the same reason.
//
// Memory is bounded by the largest single event (Decoder.MaxEventSize): only the current
// partial event is kept between chunks; complete events inside a chunk are handed out
// without copying. Lines may end in "\n", "\r\n" or "\r"; a "\r" at the very end of a
// chunk is held back until the next byte shows whether a "\n" follows.
//
// The package knows nothing of HTTP, Envoy or the payloads: bytes in, events out.
// A Decoder is not safe for concurrent use.
package sse

import (
	"bytes"
	"errors"
)

// DefaultMaxEventSize is the event size limit of a Decoder made with NewDecoder(0).
const DefaultMaxEventSize = 1 << 20

// ErrEventTooLarge is returned when a single event (its raw bytes) exceeds the decoder's
// limit. The decoder is unusable afterwards.
var ErrEventTooLarge = errors.New("sse: event exceeds the size limit")

// Event is one server-sent event. The byte slices of an event handed out by a Decoder
// alias the decoder's buffer or the caller's chunk: they are valid only until the emit
// callback returns.
type Event struct {
	// Raw is the exact bytes of the event, from its first line through the line ending of
	// the blank line that terminated it (absent when Incomplete).
	Raw []byte
	// Name is the value of the last "event" field; nil when there was none.
	Name []byte
	// ID is the value of the last "id" field (HasID reports whether there was one).
	ID    []byte
	HasID bool
	// Data is the values of all "data" fields joined with "\n".
	Data []byte
	// DataLines is the number of "data" fields; 0 means the event carries no data.
	DataLines int
	// Retry is the value of the last "retry" field consisting only of ASCII digits.
	Retry []byte
	// Incomplete is set on the final event handed out by Finish when the stream ended
	// before its terminating blank line.
	Incomplete bool

	// dataStart and dataEnd locate the value of the only data field in Raw (DataLines == 1).
	dataStart, dataEnd int
}

// field positions relative to the start of the event.
type span struct{ start, end int }

// Decoder decodes a server-sent event stream incrementally. The zero value is not ready;
// use NewDecoder. A Decoder must not be copied once it has decoded anything.
type Decoder struct {
	max int

	// pending holds the bytes of the current, not yet complete event; ls is the offset in
	// pending of its current, incomplete line (pending[ls:] holds no '\n' and no '\r'
	// except possibly as its last byte).
	pending []byte
	ls      int

	// fields of the current event, as offsets from its first byte.
	name, id, retry span
	hasName, hasID  bool
	hasRetry        bool
	data            []span
	dataBuf         [2]span // data's first array: most events have one data field
	joined          []byte  // scratch for multi-line data
	ev              Event   // the event handed to emit, reused
	err             error
}

// NewDecoder returns a decoder whose events may be at most maxEventSize bytes
// (DefaultMaxEventSize when maxEventSize <= 0).
func NewDecoder(maxEventSize int) *Decoder {
	if maxEventSize <= 0 {
		maxEventSize = DefaultMaxEventSize
	}
	return &Decoder{max: maxEventSize}
}

// MaxEventSize reports the decoder's event size limit.
func (d *Decoder) MaxEventSize() int { return d.max }

// Buffered reports how many bytes of an incomplete event the decoder holds.
func (d *Decoder) Buffered() int { return len(d.pending) }

// Feed decodes the next chunk of the stream and calls emit for every event that the chunk
// completes, in order. An error from emit stops decoding and is returned. The decoder keeps
// no reference to chunk after Feed returns (the incomplete tail is copied).
func (d *Decoder) Feed(chunk []byte, emit func(*Event) error) error {
	if d.err != nil {
		return d.err
	}
	p := chunk
	if len(d.pending) > 0 {
		n, done, err := d.continuePending(p)
		if err != nil {
			return d.fail(err)
		}
		if !done {
			return nil
		}
		d.setEvent(d.pending, false)
		err = emit(&d.ev)
		d.reset()
		if err != nil {
			return err
		}
		p = p[n:]
	}
	s := 0 // start of the current event in p
	i := 0 // start of the current line in p
	for i < len(p) {
		ce, next, ok := nextLine(p, i, false)
		if !ok {
			break
		}
		if next-s > d.max {
			return d.fail(ErrEventTooLarge)
		}
		if ce == i { // blank line: the event is complete
			d.setEvent(p[s:next], false)
			err := emit(&d.ev)
			d.reset()
			if err != nil {
				return err
			}
			s, i = next, next
			continue
		}
		d.parseLine(p[s:], i-s, ce-s)
		i = next
	}
	if s < len(p) {
		if len(p)-s > d.max {
			return d.fail(ErrEventTooLarge)
		}
		d.pending = append(d.pending[:0], p[s:]...)
		d.ls = i - s
	}
	return nil
}

// Finish ends the stream: if an incomplete event is held, it is handed to emit (with
// Incomplete set, unless the held bytes end with a blank line terminated by a lone "\r").
// The decoder is reset and may decode a new stream afterwards.
func (d *Decoder) Finish(emit func(*Event) error) error {
	if d.err != nil {
		return d.err
	}
	if len(d.pending) == 0 {
		d.reset()
		return nil
	}
	line := d.pending[d.ls:]
	complete := false
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
		complete = len(line) == 0
	}
	if len(line) > 0 {
		d.parseLine(d.pending, d.ls, d.ls+len(line))
	}
	d.setEvent(d.pending, !complete)
	err := emit(&d.ev)
	d.reset()
	return err
}

// Reset discards any held partial event and error, to decode a new stream.
func (d *Decoder) Reset() {
	d.reset()
	d.err = nil
}

func (d *Decoder) fail(err error) error {
	d.err = err
	d.reset()
	return err
}

func (d *Decoder) reset() {
	d.pending = d.pending[:0]
	d.ls = 0
	d.hasName, d.hasID, d.hasRetry = false, false, false
	d.data = d.data[:0]
}

// continuePending completes the held event with bytes of p. It reports how many bytes of p
// it consumed and whether the event is now complete (in d.pending).
func (d *Decoder) continuePending(p []byte) (consumed int, done bool, err error) {
	i := 0
	for {
		if n := len(d.pending); n > d.ls && d.pending[n-1] == '\r' {
			// The line's terminator is the held '\r'; a following '\n' belongs to it.
			if i >= len(p) {
				return i, false, nil
			}
			if p[i] == '\n' {
				d.pending = append(d.pending, '\n')
				i++
			}
		} else {
			_, next, ok := nextLine(p, i, false)
			if !ok {
				if len(d.pending)+len(p)-i > d.max {
					return 0, false, ErrEventTooLarge
				}
				d.pending = append(d.pending, p[i:]...)
				return len(p), false, nil
			}
			if len(d.pending)+next-i > d.max {
				return 0, false, ErrEventTooLarge
			}
			d.pending = append(d.pending, p[i:next]...)
			i = next
		}
		if len(d.pending) > d.max {
			return 0, false, ErrEventTooLarge
		}
		// pending[ls:] is now one whole line with its terminator.
		end := len(d.pending)
		for end > d.ls && (d.pending[end-1] == '\n' || d.pending[end-1] == '\r') {
			end--
		}
		if end == d.ls {
			return i, true, nil
		}
		d.parseLine(d.pending, d.ls, end)
		d.ls = len(d.pending)
	}
}

// nextLine finds the line starting at b[i]. It returns the end of its content and the
// start of the next line; ok is false when the line is not yet complete (a '\r' at the
// end of b counts as complete only when final).
func nextLine(b []byte, i int, final bool) (contentEnd, next int, ok bool) {
	rest := b[i:]
	j := bytes.IndexByte(rest, '\n')
	var k int
	if j < 0 {
		k = bytes.IndexByte(rest, '\r')
	} else if j > 0 {
		k = bytes.IndexByte(rest[:j], '\r')
	} else {
		k = -1
	}
	if k >= 0 {
		c := i + k
		if c+1 < len(b) {
			if b[c+1] == '\n' {
				return c, c + 2, true
			}
			return c, c + 1, true
		}
		if final {
			return c, c + 1, true
		}
		return 0, 0, false
	}
	if j >= 0 {
		return i + j, i + j + 1, true
	}
	return 0, 0, false
}

// parseLine records the field on ev[start:end] (a line without its terminator).
func (d *Decoder) parseLine(ev []byte, start, end int) {
	line := ev[start:end]
	if line[0] == ':' { // comment
		return
	}
	nameEnd, vs := end, end
	if c := bytes.IndexByte(line, ':'); c >= 0 {
		nameEnd = start + c
		vs = nameEnd + 1
		if vs < end && ev[vs] == ' ' {
			vs++
		}
	}
	v := span{vs, end}
	switch string(ev[start:nameEnd]) {
	case "data":
		if d.data == nil {
			d.data = d.dataBuf[:0]
		}
		d.data = append(d.data, v)
	case "event":
		d.name, d.hasName = v, true
	case "id":
		if bytes.IndexByte(ev[vs:end], 0) < 0 {
			d.id, d.hasID = v, true
		}
	case "retry":
		if vs < end && allDigits(ev[vs:end]) {
			d.retry, d.hasRetry = v, true
		}
	}
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// setEvent makes d.ev the Event for raw from the recorded fields.
func (d *Decoder) setEvent(raw []byte, incomplete bool) {
	ev := &d.ev
	*ev = Event{Raw: raw, Incomplete: incomplete, DataLines: len(d.data)}
	if d.hasName {
		ev.Name = raw[d.name.start:d.name.end:d.name.end]
	}
	if d.hasID {
		ev.ID, ev.HasID = raw[d.id.start:d.id.end:d.id.end], true
	}
	if d.hasRetry {
		ev.Retry = raw[d.retry.start:d.retry.end:d.retry.end]
	}
	switch len(d.data) {
	case 0:
	case 1:
		s := d.data[0]
		ev.Data = raw[s.start:s.end:s.end]
		ev.dataStart, ev.dataEnd = s.start, s.end
	default:
		j := d.joined[:0]
		for n, s := range d.data {
			if n > 0 {
				j = append(j, '\n')
			}
			j = append(j, raw[s.start:s.end]...)
		}
		d.joined = j
		ev.Data = j[:len(j):len(j)]
	}
}

// DataSpan locates the value of the event's only data field in Raw; ok is false unless
// DataLines == 1.
func (e *Event) DataSpan() (start, end int, ok bool) {
	if e.DataLines != 1 || e.Raw == nil {
		return 0, 0, false
	}
	return e.dataStart, e.dataEnd, true
}

// AppendWithData appends to dst the event with its data replaced by data, keeping every
// other byte of Raw: with a single data field only that field's value is replaced. An
// event with several data fields, or a new value containing a line break, is written out
// again with AppendEncoded (its comments are not kept).
func (e *Event) AppendWithData(dst, data []byte) []byte {
	if e.DataLines == 1 && e.Raw != nil && bytes.IndexByte(data, '\n') < 0 && bytes.IndexByte(data, '\r') < 0 {
		dst = append(dst, e.Raw[:e.dataStart]...)
		dst = append(dst, data...)
		return append(dst, e.Raw[e.dataEnd:]...)
	}
	c := *e
	c.Data = data
	c.DataLines = 1
	return c.AppendEncoded(dst)
}

// AppendEncoded appends the event to dst in the canonical form: "event", "id", "retry"
// and one "data" line per line of Data (when DataLines > 0 or Data is not empty), each
// "name: value\n", then the terminating blank line. Raw is ignored.
func (e *Event) AppendEncoded(dst []byte) []byte {
	if e.Name != nil {
		dst = appendField(dst, "event", e.Name)
	}
	if e.HasID {
		dst = appendField(dst, "id", e.ID)
	}
	if len(e.Retry) > 0 {
		dst = appendField(dst, "retry", e.Retry)
	}
	if e.DataLines > 0 || len(e.Data) > 0 {
		data := e.Data
		for {
			n := bytes.IndexAny(data, "\r\n")
			if n < 0 {
				dst = appendField(dst, "data", data)
				break
			}
			dst = appendField(dst, "data", data[:n])
			if data[n] == '\r' && n+1 < len(data) && data[n+1] == '\n' {
				n++
			}
			data = data[n+1:]
		}
	}
	return append(dst, '\n')
}

func appendField(dst []byte, name string, value []byte) []byte {
	dst = append(dst, name...)
	dst = append(dst, ':', ' ')
	dst = append(dst, value...)
	return append(dst, '\n')
}
