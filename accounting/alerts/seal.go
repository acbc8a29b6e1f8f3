package alerts

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Keys seal webhook secrets at rest with AES-256-GCM. The first key seals; every key
// opens, so a rotation adds the new key first and keeps the old ones until Reseal has
// moved every secret to the new key. A sealed secret is the key's id (the first 4
// bytes of its SHA-256) || a 12-byte nonce || the ciphertext with its tag.
type Keys struct {
	seal   cipher.AEAD
	sealID []byte
	open   map[string]cipher.AEAD // by id
}

// ErrNoKeys is the answer of a webhook operation when no key is configured.
var ErrNoKeys = errors.New("no webhook secret key is configured (ACCOUNTING_WEBHOOK_KEY or ACCOUNTING_WEBHOOK_KEY_FILE)")

// ParseKeys reads keys from text: base64 keys of 32 bytes, separated by commas, spaces
// or new lines, the sealing key first. Empty text gives nil, nil (no keys).
func ParseKeys(text string) (*Keys, error) {
	fields := strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
	if len(fields) == 0 {
		return nil, nil
	}
	k := &Keys{open: map[string]cipher.AEAD{}}
	for i, f := range fields {
		raw, err := base64.StdEncoding.DecodeString(f)
		if err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("webhook key %d: want the base64 of 32 bytes", i+1)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(raw)
		id := sum[:4]
		if i == 0 {
			k.seal, k.sealID = aead, id
		}
		k.open[string(id)] = aead
	}
	return k, nil
}

// LoadKeys reads the keys from the environment: ACCOUNTING_WEBHOOK_KEY, else the file
// ACCOUNTING_WEBHOOK_KEY_FILE names. Neither set: nil, nil.
func LoadKeys(getenv func(string) string) (*Keys, error) {
	if v := getenv("ACCOUNTING_WEBHOOK_KEY"); v != "" {
		return ParseKeys(v)
	}
	if f := getenv("ACCOUNTING_WEBHOOK_KEY_FILE"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("webhook key file: %w", err)
		}
		return ParseKeys(string(b))
	}
	return nil, nil
}

// Seal seals secret with the first key.
func (k *Keys) Seal(secret string) ([]byte, error) {
	if k == nil {
		return nil, ErrNoKeys
	}
	out := make([]byte, 0, 4+12+len(secret)+16)
	out = append(out, k.sealID...)
	nonce := make([]byte, k.seal.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out = append(out, nonce...)
	return k.seal.Seal(out, nonce, []byte(secret), k.sealID), nil
}

// Open opens a sealed secret with the key that sealed it.
func (k *Keys) Open(sealed []byte) (string, error) {
	if k == nil {
		return "", ErrNoKeys
	}
	if len(sealed) < 4+12 {
		return "", errors.New("alerts: a sealed secret too short")
	}
	id := sealed[:4]
	aead := k.open[string(id)]
	if aead == nil {
		return "", errors.New("alerts: the secret was sealed with a key that is not configured")
	}
	nonce, ct := sealed[4:4+aead.NonceSize()], sealed[4+aead.NonceSize():]
	pt, err := aead.Open(nil, nonce, ct, id)
	if err != nil {
		return "", fmt.Errorf("alerts: opening a secret: %w", err)
	}
	return string(pt), nil
}

// current reports whether sealed is sealed with the sealing key.
func (k *Keys) current(sealed []byte) bool {
	return len(sealed) >= 4 && bytes.Equal(sealed[:4], k.sealID)
}
