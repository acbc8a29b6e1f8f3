package console

// Sealed cookies: a person's session and a sign-in under way live in cookies the
// console encrypts and authenticates (AES-256-GCM) with its session key, so that they
// survive a restart of the console (or another replica of it) without a database. The
// cookie's name is the additional data: a value sealed for one cookie is refused in
// another.

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
)

// SessionKeyBytes is the length of a session key.
const SessionKeyBytes = 32

// DeriveSessionKey derives a session key from secrets the console is configured with
// and that stay the same across its restarts (its credential to accounting, the OIDC
// client secret): every replica and every restart derives the same key, and rotating
// either secret ends every session.
func DeriveSessionKey(secrets ...string) ([]byte, error) {
	var ikm []byte
	for _, s := range secrets {
		ikm = append(ikm, s...)
		ikm = append(ikm, 0)
	}
	return hkdf.Key(sha256.New, ikm, nil, "gateway console session key v1", SessionKeyBytes)
}

// sealer seals and opens cookie values.
type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (*sealer, error) {
	if len(key) != SessionKeyBytes {
		return nil, errors.New("console: the session key must be 32 bytes")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

// seal returns v as JSON, encrypted for the cookie name.
func (s *sealer) seal(name string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(name))), nil
}

// open decrypts a value sealed for the cookie name into v.
func (s *sealer) open(name, value string, v any) error {
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return errors.New("console: not a sealed value")
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(name))
	if err != nil {
		return errors.New("console: not a sealed value")
	}
	return json.Unmarshal(plain, v)
}
