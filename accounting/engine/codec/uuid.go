package codec

// A UUID's canonical text: 32 lowercase hex digits in groups of 8-4-4-4-12.
const uuidLen = 36

const hexDigits = "0123456789abcdef"

func isDash(i int) bool { return i == 8 || i == 13 || i == 18 || i == 23 }

// isUUID says whether s is a UUID in canonical lowercase text, the only text that
// travels as 16 bytes: formatUUID gives back exactly s.
func isUUID(s string) bool {
	if len(s) != uuidLen {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if isDash(i) {
			if c != '-' {
				return false
			}
		} else if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// appendUUID appends the 16 bytes of s, which isUUID accepted.
func appendUUID(dst []byte, s string) []byte {
	for i := 0; i < uuidLen; i += 2 {
		if isDash(i) {
			i++
		}
		dst = append(dst, nibble(s[i])<<4|nibble(s[i+1]))
	}
	return dst
}

func nibble(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

// formatUUID is the canonical text of 16 bytes.
func formatUUID(b []byte) string {
	var out [uuidLen]byte
	j := 0
	for i := range out {
		if isDash(i) {
			out[i] = '-'
			continue
		}
		v := b[j/2]
		if j%2 == 0 {
			v >>= 4
		}
		out[i] = hexDigits[v&0xf]
		j++
	}
	return string(out[:])
}
