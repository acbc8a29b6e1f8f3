package server

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
)

// KeyPrefix starts every gateway API key.
const KeyPrefix = "gw-"

// keyPrefixLen is how many leading characters of a secret are stored for humans
// ("gw-" and 5 random characters: 30 of the 256 random bits).
const keyPrefixLen = 8

// NewSecret returns a fresh API key secret, "gw-" followed by the 43-character
// base64url encoding (no padding) of 32 bytes read from random.
func NewSecret(random io.Reader) (string, error) {
	var b [32]byte
	if _, err := io.ReadFull(random, b[:]); err != nil {
		return "", fmt.Errorf("read random bytes: %w", err)
	}
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// HashSecret returns SHA-256 over the secret string's bytes: what the store keeps and
// what extproc presents to Authenticate.
func HashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// secretPrefix is the short, non-secret part of a secret shown to humans.
func secretPrefix(secret string) string {
	if len(secret) <= keyPrefixLen {
		return secret
	}
	return secret[:keyPrefixLen]
}

var defaultRandom io.Reader = rand.Reader
