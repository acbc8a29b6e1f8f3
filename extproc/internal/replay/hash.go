package replay

import "crypto/sha256"

// HashKey is what accounting stores for a key: SHA-256 of the secret's bytes.
func HashKey(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}
