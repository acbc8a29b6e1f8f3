package codec

import (
	"errors"
	"fmt"
	"time"
)

// idMarker opens the form of an id whose text is 16 bytes or longer, so that its length
// (more than 16) cannot be taken for a UUID's.
const idMarker = 0x00

// enc turns the machine's values into the schema's. Text is copied into one buffer
// (sized by the caller) instead of a slice per string, and the first time that cannot
// travel exactly is kept in err.
type enc struct {
	buf []byte
	err error
}

// text is s's bytes.
func (e *enc) text(s string) []byte {
	if s == "" {
		return nil
	}
	start := len(e.buf)
	e.buf = append(e.buf, s...)
	return e.buf[start:len(e.buf):len(e.buf)]
}

// id is s in the schema's id form: 16 raw bytes for a canonical lowercase UUID, the
// text when shorter than 16 bytes, and idMarker followed by the text otherwise.
func (e *enc) id(s string) []byte {
	start := len(e.buf)
	switch {
	case s == "":
		return nil
	case isUUID(s):
		e.buf = appendUUID(e.buf, s)
	case len(s) < 16:
		e.buf = append(e.buf, s...)
	default:
		e.buf = append(append(e.buf, idMarker), s...)
	}
	return e.buf[start:len(e.buf):len(e.buf)]
}

// texts is a list of strings, and whether it is empty but not nil.
func (e *enc) texts(list []string) ([][]byte, bool) {
	if len(list) == 0 {
		return nil, list != nil
	}
	out := make([][]byte, len(list))
	for i, s := range list {
		out[i] = e.text(s)
	}
	return out, false
}

// time is t in microseconds since the epoch. A time finer than a microsecond cannot
// travel exactly; it is an error rather than a journal that replays another state.
func (e *enc) time(t time.Time) int64 {
	if t.Nanosecond()%1000 != 0 && e.err == nil {
		e.err = fmt.Errorf("codec: time %s is finer than a microsecond", t.Format(time.RFC3339Nano))
	}
	return t.UnixMicro()
}

func (e *enc) timePtr(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	v := e.time(*t)
	return &v
}

// textSize is how much of enc's buffer the strings need at most (an id may take one
// byte more than its text).
func textSize(strs ...string) int {
	n := 0
	for _, s := range strs {
		n += len(s) + 1
	}
	return n
}

// errID is a malformed id: longer than 16 bytes without the marker.
var errID = errors.New("codec: malformed id")

// decodeID is the id that b holds.
func decodeID(b []byte) (string, error) {
	switch {
	case len(b) == 16:
		return formatUUID(b), nil
	case len(b) < 16:
		return string(b), nil
	case b[0] != idMarker:
		return "", errID
	default:
		return string(b[1:]), nil
	}
}

// decodeTime is the UTC time of v microseconds since the epoch.
func decodeTime(v int64) time.Time { return time.UnixMicro(v).UTC() }

func decodeTimePtr(v *int64) *time.Time {
	if v == nil {
		return nil
	}
	t := decodeTime(*v)
	return &t
}

// decodeTexts is the list of strings; empty says a list of none is empty, not nil.
func decodeTexts(list [][]byte, empty bool) []string {
	if len(list) == 0 {
		if empty {
			return []string{}
		}
		return nil
	}
	out := make([]string, len(list))
	for i, b := range list {
		out[i] = string(b)
	}
	return out
}

// copyPtr is a pointer to a copy of *p, nil when p is; the event and the message never
// share a limit.
func copyPtr(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
