package tokens

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"strconv"

	"github.com/pkoukk/tiktoken-go-loader/assets"
)

// vocab is a BPE vocabulary: the rank of every token (its bytes). It holds no pointer
// the garbage collector must follow: the index is a slice of plain structs, which hold
// the tokens of up to 8 bytes themselves, and the longer ones are one byte slice. (tiktoken-go keeps o200k_base's 200,000 tokens in two maps of
// strings and a slice of byte slices, which every collection marked: ≈17 ms of CPU a
// cycle, a cycle every 0.64 s in extproc at 1,000 requests/s.)
type vocab struct {
	blob  []byte // the bytes of every token longer than 8 bytes, one after another
	slots []slot // open addressing, linear probing; len is a power of two
	seed  maphash.Seed
	key   uint64 // the seed of the hash of short tokens
}

// slot is one token in vocab.slots (16 bytes: four to a cache line); n == 0 marks an
// empty slot.
type slot struct {
	// word is the token's bytes when it has at most 8 (word's value), else the offset of
	// its bytes in blob: most lookups compare one word and touch nothing else.
	word uint64
	rank uint32
	n    uint16
	tag  uint16 // the hash's top bits: most misses end without comparing bytes
}

// loadVocab reads a tiktoken rank file ("base64token rank" per line) from the embedded
// offline loader's assets.
func loadVocab(name string) (*vocab, error) {
	data, err := assets.Assets.ReadFile(name + ".tiktoken")
	if err != nil {
		return nil, err
	}
	lines := bytes.Count(data, []byte{'\n'}) + 1
	size := 1
	for size < lines*2 {
		size <<= 1
	}
	v := &vocab{slots: make([]slot, size), seed: maphash.MakeSeed(), key: rand.Uint64()}
	var tok []byte
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(line) == 0 {
			continue
		}
		text, rankText, ok := bytes.Cut(line, []byte{' '})
		rank, err := strconv.ParseUint(string(rankText), 10, 32)
		if !ok || err != nil {
			return nil, fmt.Errorf("tokens: %s: bad line %q", name, line)
		}
		tok = append(tok[:0], make([]byte, base64.StdEncoding.DecodedLen(len(text)))...)
		n, err := base64.StdEncoding.Decode(tok, text)
		if err != nil || n == 0 || n > 0xffff {
			return nil, fmt.Errorf("tokens: %s: bad token %q", name, text)
		}
		if err := v.add(string(tok[:n]), uint32(rank)); err != nil {
			return nil, fmt.Errorf("tokens: %s: %w", name, err)
		}
	}
	return v, nil
}

func (v *vocab) add(tok string, rank uint32) error {
	if _, ok := v.rank(tok); ok {
		return errors.New("token listed twice")
	}
	w := wordOf(tok)
	h := v.hash(tok, w)
	if len(tok) > 8 {
		w = uint64(len(v.blob))
		v.blob = append(v.blob, tok...)
	}
	mask := uint64(len(v.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		if s := &v.slots[i]; s.n == 0 {
			*s = slot{word: w, rank: rank, n: uint16(len(tok)), tag: uint16(h >> 48)}
			return nil
		}
	}
}

// rank is tok's rank, ok false when tok is not a token.
func (v *vocab) rank(tok string) (rank int, ok bool) { return v.rankWord(tok, wordOf(tok)) }

// rankWord is rank(tok) for w == wordOf(tok), which the caller may have at hand.
func (v *vocab) rankWord(tok string, w uint64) (rank int, ok bool) {
	h := v.hash(tok, w)
	mask := uint64(len(v.slots) - 1)
	tag := uint16(h >> 48)
	short := len(tok) <= 8
	for i := h & mask; ; i = (i + 1) & mask {
		s := &v.slots[i]
		if s.n == 0 {
			return 0, false
		}
		if s.tag != tag || int(s.n) != len(tok) {
			continue
		}
		if short && s.word == w || !short && string(v.blob[s.word:s.word+uint64(s.n)]) == tok {
			return int(s.rank), true
		}
	}
}

// hash is tok's hash, w being wordOf(tok): for up to 8 bytes a multiply-xorshift mix of
// w, its length and a random key (cheaper than maphash's call for the short pieces most
// text is made of), else maphash's.
func (v *vocab) hash(tok string, w uint64) uint64 {
	if len(tok) > 8 {
		return maphash.String(v.seed, tok)
	}
	x := w ^ v.key ^ uint64(len(tok))<<59
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	return x ^ x>>33
}

// wordOf is the first 8 bytes of s as a little-endian word, zero past its end.
func wordOf(s string) uint64 {
	var w uint64
	for i := min(len(s), 8) - 1; i >= 0; i-- {
		w = w<<8 | uint64(s[i])
	}
	return w
}

// wordAt is wordOf(s[p:q]), read as one 8-byte load when s has 8 bytes from p.
func wordAt(s string, p, q int) uint64 {
	if p+8 > len(s) {
		return wordOf(s[p:q])
	}
	b := s[p : p+8]
	w := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
	if n := q - p; n < 8 {
		w &= 1<<(8*n) - 1
	}
	return w
}

// countWord is how many tokens byte-pair encoding makes of piece (one pre-token), w
// being wordOf(piece): tiktoken's merge, lowest rank first, counted rather than listed.
// It is quadratic in len(piece), as tiktoken's is (Text bounds the pieces it passes).
func (v *vocab) countWord(piece string, w uint64) int {
	if _, ok := v.rankWord(piece, w); ok || len(piece) <= 1 {
		return min(len(piece), 1)
	}
	const none = int(^uint(0) >> 1)
	// parts[i] is a part's start and the rank of it merged with the next part.
	type part struct{ start, rank int }
	var buf [64]part
	parts := buf[:0]
	if len(piece)+1 > len(buf) {
		parts = make([]part, 0, len(piece)+1)
	}
	for i := 0; i <= len(piece); i++ {
		parts = append(parts, part{i, none})
	}
	// pairRank is the rank of parts i … i+skip+1 merged into one (none: not a token).
	pairRank := func(i, skip int) int {
		if i+skip+2 < len(parts) {
			if r, ok := v.rank(piece[parts[i].start:parts[i+skip+2].start]); ok {
				return r
			}
		}
		return none
	}
	for i := 0; i < len(parts)-2; i++ {
		parts[i].rank = pairRank(i, 0)
	}
	for len(parts) > 1 {
		best, at := none, -1
		for i := 0; i < len(parts)-1; i++ {
			if parts[i].rank < best {
				best, at = parts[i].rank, i
			}
		}
		if at < 0 {
			break
		}
		parts[at].rank = pairRank(at, 1)
		if at > 0 {
			parts[at-1].rank = pairRank(at-1, 1)
		}
		parts = append(parts[:at+1], parts[at+2:]...)
	}
	return len(parts) - 1
}
