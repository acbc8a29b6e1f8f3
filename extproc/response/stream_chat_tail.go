package response

import "bytes"

// After its first delta, the usual chunk repeats the last one's bytes again up to some
// top-level key: the rest of the choice, the end of the choices array and members such
// as "usage":null (`},"logprobs":null,"finish_reason":null}],"usage":null,"`), then
// maybe a member that differs in every chunk (OpenAI's "obfuscation"). The walk from the
// end of the first delta to any top-level key is a function of the bytes between them,
// as long as nothing in between counts text, makes an edit or reads usage: no other
// delta is walked, and no "model", "error", "choices" or non-null "usage" member is
// crossed (a null usage only records where it is, for the end of the walk). So a chunk
// that resumed inside its first delta (see chatPrefix) and continues, after that delta,
// with the bytes recorded from the last such chunk through the opening quote of a
// top-level key resumes there, with the usage member's place recorded then (shifted);
// the member at that key and any after it are walked. Otherwise the chunk is walked on
// and records, when it ends well, the bytes through the last top-level key its walk
// reached under those conditions.
//
// Unlike reusing a whole repeated tail, this pays off on chunks whose last members
// differ every time: the walk resumes at the last key that the bytes before it fix.
// The tail's bytes are kept after the prefix's, in the prefix's array (held in the
// rewriter, with room for both), not in a slice of their own; they are dropped
// whenever the prefix's bytes change.

// maxChatTail bounds the tail's bytes.
const maxChatTail = 256

// chatTail is the walk of a chunk from the end of its first delta to a top-level key.
// Offsets are relative to the end of the delta.
type chatTail struct {
	n       int16 // bytes through the key's opening quote (0: none recorded)
	prevEnd int16 // end of the member before the key
	// usage*: where a null "usage" member before the key was, when hasUsage.
	usageKey, usageStart, usageEnd, usagePrev int16
	hasUsage                                  bool
}

// chatTailWalk is what a walk that may record a tail notes on its way.
type chatTailWalk struct {
	d    int  // end of the first delta
	on   bool // nothing since d stops a tail
	last chatTail
}

// note records the walk's state at the top-level key at data[k].
func (w *chatTailWalk) note(k, prevEnd int, hasUsage bool, usageKey, usageStart, usageEnd, usagePrev int) {
	if k+1-w.d > maxChatTail {
		w.on = false
		return
	}
	d := w.d
	w.last = chatTail{n: int16(k + 1 - d), prevEnd: int16(prevEnd - d), hasUsage: hasUsage}
	if hasUsage {
		w.last.usageKey, w.last.usageStart = int16(usageKey-d), int16(usageStart-d)
		w.last.usageEnd, w.last.usagePrev = int16(usageEnd-d), int16(usagePrev-d)
	}
}

// tailBytes returns the recorded tail's bytes (after the prefix's in their array).
func (p *chatPrefix) tailBytes() []byte {
	n := len(p.bytes)
	return p.bytes[n : n+int(p.tail.n)]
}

// tailMatches reports whether data continues at d, the end of its first delta, with the
// recorded tail.
func (p *chatPrefix) tailMatches(data []byte, d int) bool {
	n := int(p.tail.n)
	return n > 0 && len(data)-d >= n && bytes.Equal(data[d:d+n], p.tailBytes())
}

// recordTail keeps data's tail as w noted it.
func (p *chatPrefix) recordTail(data []byte, w *chatTailWalk) {
	n := len(p.bytes)
	// The array may move; the prefix's bytes stay the same.
	setSlice(&p.bytes, append(p.bytes, data[w.d:w.d+int(w.last.n)]...)[:n])
	p.tail = w.last
}
