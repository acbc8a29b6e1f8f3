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

// The same holds one level further for the usual chunk, one choice whose delta has
// members: its bytes through the opening quote of that delta's first key (`"choices":
// [{"index":0,"delta":{"`) repeat too, and no member before that key makes an edit or
// counts text. So a chunk that starts with the longer recorded bytes resumes there,
// inside the delta (see chatResume); a chunk that matches only the shorter ones resumes
// at "choices" and records the longer ones anew when it has them.

// maxChatPrefix bounds the bytes a stream holds for the comparison; a head and a tail
// (see chatTail) of up to chatPrefixInline bytes together (usual ones: about 230 through
// the delta, and 40 to 60) are held in the rewriter itself, which then fills its
// allocation size class (1 KB with the allocator's 8-byte header; a test holds it there).
const (
	maxChatPrefix    = 1 << 10
	chatPrefixInline = 376
)

// chatPrefix is the walk of a chunk up to its first top-level "choices" member.
type chatPrefix struct {
	// bytes are the chunk's bytes through the opening quote of the "choices" key (the
	// first short of them), then, when the longer prefix is recorded, on through the
	// opening quote of the first delta's first key (empty: nothing recorded).
	bytes []byte
	short int32 // int32s and a uint8: the rewriter stays in its allocation size class
	// prevEnd is the end of the member before "choices" (-1 when it is the first).
	prevEnd int32
	// edits are the edits made before "choices" (the model's replacement).
	edits  [2]edit
	nEdits uint8
	// armed: the current walk resumed at, or recorded, the "choices" key and has not yet
	// walked past its first choice's first delta; that delta records the longer prefix.
	armed bool
	// tail is the walk after the first delta (see chatTail), its bytes after bytes.
	tail chatTail

	inline [chatPrefixInline]byte // bytes' first array
}

// Where a chunk's walk may resume (see match).
const (
	atStart   = iota // nothing recorded matches: the walk starts at the beginning
	atChoices        // at the "choices" key, offset short-1
	atDelta          // at the first delta's first key, offset len(bytes)-1
)

// match reports how much of the recorded bytes data starts with.
func (p *chatPrefix) match(data []byte) int {
	n := int(p.short)
	if n == 0 || len(data) < n {
		return atStart
	}
	// The longer bytes first, in one comparison: the usual chunk matches them.
	if m := len(p.bytes); m > n && len(data) >= m && bytes.Equal(data[:m], p.bytes) {
		return atDelta
	}
	if bytes.Equal(data[:n], p.bytes[:n]) {
		return atChoices
	}
	return atStart
}

// record keeps the walk of data up to the "choices" key at keyStart, reached with no
// "usage" or "choices" member before it; it reports whether it did.
func (p *chatPrefix) record(data []byte, keyStart, prevEnd int, edits []edit) bool {
	if p.bytes == nil {
		p.bytes = p.inline[:0]
	}
	p.bytes, p.short, p.tail.n = p.bytes[:0], 0, 0
	if keyStart >= maxChatPrefix || len(edits) > len(p.edits) {
		return false
	}
	p.bytes = append(p.bytes, data[:keyStart+1]...)
	p.short = int32(len(p.bytes))
	p.prevEnd = int32(prevEnd)
	p.nEdits = uint8(copy(p.edits[:], edits))
	return true
}

// recordDelta extends the recorded bytes through data[k], the opening quote of the first
// key of the first delta (data starts with the shorter recorded bytes).
func (p *chatPrefix) recordDelta(data []byte, k int) {
	p.bytes, p.tail.n = p.bytes[:p.short], 0
	if k < maxChatPrefix && data[k] == '"' {
		p.bytes = append(p.bytes, data[p.short:k+1]...)
	}
}
