package alerts

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"strconv"
	"strings"
)

// SecretPrefix starts every webhook secret.
const SecretPrefix = "whsec_"

// secretBytes is a new secret's length (the convention allows 24 to 64).
const secretBytes = 32

// NewSecret returns a new secret, "whsec_" + base64 of 32 random bytes from r
// (crypto/rand when nil).
func NewSecret(r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	b := make([]byte, secretBytes)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// secretKey is the HMAC key of secret: the base64-decoded bytes after "whsec_".
func secretKey(secret string) ([]byte, error) {
	raw, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, errors.New("alerts: a webhook secret starts with " + SecretPrefix)
	}
	return base64.StdEncoding.DecodeString(raw)
}

// Sign is the webhook-signature header of a delivery: "v1," + base64 of HMAC-SHA256
// over "{id}.{timestamp}.{body}", keyed with secret's decoded bytes.
func Sign(secret, id string, timestamp int64, body []byte) (string, error) {
	key, err := secretKey(secret)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write(strconv.AppendInt(nil, timestamp, 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
