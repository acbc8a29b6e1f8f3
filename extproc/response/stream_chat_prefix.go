package response

import "bytes"

// The chunks of one chat stream repeat the members before "choices" (id, object,
// created, model, system_fingerprint): most of a small chunk's bytes. The walk of a chunk
// up to its first top-level "choices" key is a function of the bytes before it: every
// scan stops where what it reads ends (a word loaded past a string's closing quote
// notwithstanding), and no member before "choices" counts text. So when a chunk starts
// with the bytes of the last chunk that reached "choices", through the key's opening
// quote, one comparison stands in for that part of the walk, which resumes at the key
// with the state and edits recorded then (the model's replacement; noting the upstream
// model again would change nothing, the first one seen is kept). The rest of every chunk
// is walked, and a chunk that starts otherwise is walked whole, and recorded.

// maxChatPrefix bounds the bytes a stream holds for the comparison; a head of up to
// chatPrefixInline bytes (a usual one: about 200) is held in the rewriter itself.
const (
	maxChatPrefix    = 1 << 10
	chatPrefixInline = 256
)

// chatPrefix is the walk of a chunk up to its first top-level "choices" member.
type chatPrefix struct {
	// bytes are the chunk's bytes through the opening quote of the "choices" key (empty:
	// nothing recorded).
	bytes []byte
	// prevEnd is the end of the member before "choices" (-1 when it is the first).
	prevEnd int
	// edits are the edits made before "choices" (the model's replacement).
	edits  [2]edit
	nEdits int

	inline [chatPrefixInline]byte // bytes' first array
}

// matches reports whether data starts with the recorded bytes; its walk may then resume at
// the "choices" key (offset len(p.bytes)-1) with p's state.
func (p *chatPrefix) matches(data []byte) bool {
	n := len(p.bytes)
	return n > 0 && len(data) >= n && bytes.Equal(data[:n], p.bytes)
}

// record keeps the walk of data up to the "choices" key at keyStart, reached with no
// "usage" or "choices" member before it.
func (p *chatPrefix) record(data []byte, keyStart, prevEnd int, edits []edit) {
	if p.bytes == nil {
		p.bytes = p.inline[:0]
	}
	p.bytes = p.bytes[:0]
	if keyStart >= maxChatPrefix || len(edits) > len(p.edits) {
		return
	}
	p.bytes = append(p.bytes, data[:keyStart+1]...)
	p.prevEnd = prevEnd
	p.nEdits = copy(p.edits[:], edits)
}
