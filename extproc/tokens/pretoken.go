package tokens

import (
	"unicode"
	"unicode/utf8"
)

// o200k_base splits text into pre-tokens with this regular expression before merging
// bytes (tiktoken's, as tiktoken-go runs it with a backtracking engine):
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}
//	| ?[^\s\p{L}\p{N}]+[\r\n/]*
//	|\s*[\r\n]+
//	|\s+(?!\S)
//	|\s+
//
// pieceEnd matches it by hand, alternative by alternative in that order, with the
// backtracking each one needs worked out below: the same pieces as the engine (a test
// compares them with tiktoken-go's on text of every class and on fuzzed input) at a small
// fraction of its cost (tiktoken-go: ≈4.4 MB/s and ≈100 bytes of garbage per byte of
// text). \s is unicode.IsSpace and the classes are Go's unicode tables, as in regexp2.

// A rune's classes. upper is [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and lower
// [\p{Ll}\p{Lm}\p{Lo}\p{M}]: modifier and other letters and marks are both.
const (
	cLetter = 1 << iota
	cNumber
	cSpace
	cUpper
	cLower
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for r := range rune(utf8.RuneSelf) {
		t[r] = classOf(r)
	}
	return t
}()

func classOf(r rune) uint8 {
	var c uint8
	switch {
	case unicode.IsLetter(r):
		c = cLetter
		switch {
		case unicode.Is(unicode.Ll, r):
			c |= cLower
		case unicode.Is(unicode.Lu, r), unicode.Is(unicode.Lt, r):
			c |= cUpper
		default: // Lm, Lo
			c |= cUpper | cLower
		}
	case unicode.Is(unicode.M, r):
		c = cUpper | cLower
	case unicode.IsNumber(r):
		c = cNumber
	}
	if unicode.IsSpace(r) {
		c |= cSpace
	}
	return c
}

// prefix is [^\r\n\p{L}\p{N}] for a rune whose first byte is b; symbol is
// [^\s\p{L}\p{N}].
func prefix(b byte, c uint8) bool { return b != '\r' && b != '\n' && c&(cLetter|cNumber) == 0 }
func symbol(c uint8) bool         { return c&(cSpace|cLetter|cNumber) == 0 }

// at is the size and the classes of the rune at s[i]. s must be valid UTF-8.
func at(s string, i int) (int, uint8) {
	if b := s[i]; b < utf8.RuneSelf {
		return 1, asciiClass[b]
	}
	return wide(s, i)
}

func wide(s string, i int) (int, uint8) {
	r, n := utf8.DecodeRuneInString(s[i:])
	return n, classOf(r)
}

// run is the end of the run of runes from i that have any of the classes in want.
func run(s string, i int, want uint8) int {
	for i < len(s) {
		if b := s[i]; b < utf8.RuneSelf { // at, by hand: it is not inlined
			if asciiClass[b]&want == 0 {
				break
			}
			i++
			continue
		}
		n, c := wide(s, i)
		if c&want == 0 {
			break
		}
		i += n
	}
	return i
}

// pieceEnd is the end of the pre-token that starts at s[p] (p < len(s)).
func pieceEnd(s string, p int) int {
	// Most of prose: a lowercase ASCII word, after a space or not. Alternative 1 takes
	// it (the space as its prefix; upper* is empty, as a lowercase letter is not upper).
	if b := s[p]; b-'a' < 26 {
		return contraction(s, run(s, p+1, cLower))
	} else if b == ' ' && p+1 < len(s) && s[p+1]-'a' < 26 {
		return contraction(s, run(s, p+2, cLower))
	}
	// A capitalized ASCII word, after a space or not: upper* takes the one capital (the
	// lowercase letter after it is not upper), lower+ the rest.
	if b := s[p]; b == ' ' && p+2 < len(s) && s[p+1]-'A' < 26 && s[p+2]-'a' < 26 {
		return contraction(s, run(s, p+3, cLower))
	} else if b-'A' < 26 && p+1 < len(s) && s[p+1]-'a' < 26 {
		return contraction(s, run(s, p+2, cLower))
	}
	// ASCII punctuation that cannot prefix a word: alternative 4 takes it. A space before it
	// is the alternative's optional space; a symbol followed by a letter prefixes the word.
	if b := s[p]; b == ' ' && p+1 < len(s) && asciiSymbol(s[p+1]) {
		return symbolsFrom(s, p+1)
	} else if asciiSymbol(b) && (p+1 == len(s) || s[p+1] < utf8.RuneSelf && asciiClass[s[p+1]]&cLetter == 0) {
		return symbolsFrom(s, p)
	}
	n, c := at(s, p)
	pre := prefix(s[p], c)
	// 1: an optional prefix, upper*, lower+, a contraction. upper* takes its whole run;
	// when no lower follows, it gives runes back until one it gave back is also lower
	// (the last such in the run), and lower+ is that rune alone (what follows it in the
	// run is upper only). Without the prefix when that fails.
	for _, q := range [2]int{p + n, p} {
		if q == p+n && (!pre || q >= len(s)) {
			continue
		}
		i, lastLower := q, -1
		for i < len(s) {
			m, ci := at(s, i)
			if ci&cUpper == 0 {
				break
			}
			if ci&cLower != 0 {
				lastLower = i + m
			}
			i += m
		}
		if i < len(s) {
			if _, ci := at(s, i); ci&cLower != 0 {
				return contraction(s, run(s, i, cLower))
			}
		}
		if lastLower >= 0 {
			return contraction(s, lastLower)
		}
	}
	// 2: an optional prefix, upper+, lower*, a contraction.
	for _, q := range [2]int{p + n, p} {
		if q == p+n && (!pre || q >= len(s)) {
			continue
		}
		if i := run(s, q, cUpper); i > q {
			return contraction(s, run(s, i, cLower))
		}
	}
	// 3: one to three numbers.
	if c&cNumber != 0 {
		i := p + n
		for k := 1; k < 3 && i < len(s); k++ {
			m, ci := at(s, i)
			if ci&cNumber == 0 {
				break
			}
			i += m
		}
		return i
	}
	// 4: an optional space, symbols, then any \r, \n and /.
	q := -1
	if symbol(c) {
		q = p
	} else if s[p] == ' ' && p+1 < len(s) {
		if _, c1 := at(s, p+1); symbol(c1) {
			q = p + 1
		}
	}
	if q >= 0 {
		return symbolsFrom(s, q)
	}
	if c&cSpace == 0 { // unreachable: every rune is a letter, a number, a symbol or a space
		return p + n
	}
	// 5: spaces through the last \r or \n among them (\s* gives back down to it).
	end, last, lastNewline := p, p, -1
	for end < len(s) {
		m, ci := at(s, end)
		if ci&cSpace == 0 {
			break
		}
		if s[end] == '\r' || s[end] == '\n' {
			lastNewline = end
		}
		last = end
		end += m
	}
	if lastNewline >= 0 {
		return lastNewline + 1
	}
	// 6: spaces not followed by a non-space: all of them at the end of the text, else
	// all but the last. 7: the one space before a non-space.
	if end == len(s) || last == p {
		return end
	}
	return last
}

// symbolsFrom is the end of alternative 4's match whose symbols start at s[q]: the run of
// symbols, then any \r, \n and /.
func symbolsFrom(s string, q int) int {
	i := q
	for i < len(s) {
		m, ci := at(s, i)
		if !symbol(ci) {
			break
		}
		i += m
	}
	for i < len(s) && (s[i] == '\r' || s[i] == '\n' || s[i] == '/') {
		i++
	}
	return i
}

// asciiSymbol reports whether b is an ASCII symbol ([^\s\p{L}\p{N}]).
func asciiSymbol(b byte) bool { return b < utf8.RuneSelf && symbol(asciiClass[b]) }

// contraction is i past an English contraction suffix that starts at s[i], if any
// (?i:'s|'t|'re|'ve|'m|'ll|'d).
func contraction(s string, i int) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return i
	}
	switch s[i+1] | 0x20 {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v', 'l':
		want := byte('e') // 're, 've
		if s[i+1]|0x20 == 'l' {
			want = 'l' // 'll
		}
		if i+2 < len(s) && s[i+2]|0x20 == want {
			return i + 3
		}
	}
	return i
}
