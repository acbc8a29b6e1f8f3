package cloudauth

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
)

// ServiceAccount is a Google service account made for a demo or a test: JSON is its
// key file (type service_account, token_uri as given), PublicKey what a token endpoint
// verifies its grants with.
type ServiceAccount struct {
	Email     string
	JSON      []byte
	PublicKey *rsa.PublicKey
}

// NewServiceAccount makes a service account with a fresh RSA key whose grants go to
// tokenURI. The private key exists only in the returned JSON.
func NewServiceAccount(email, tokenURI string) (*ServiceAccount, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	js, err := json.MarshalIndent(map[string]string{
		"type":           "service_account",
		"project_id":     "demo-project",
		"private_key_id": "demo-key",
		"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":   email,
		"client_id":      "1",
		"token_uri":      tokenURI,
	}, "", "  ")
	if err != nil {
		return nil, err
	}
	return &ServiceAccount{Email: email, JSON: js, PublicKey: &key.PublicKey}, nil
}

// PublicKeyPEM is the service account's public key as PEM (PKIX).
func (a *ServiceAccount) PublicKeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(a.PublicKey)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ParsePublicKeyPEM reads a PublicKeyPEM.
func ParsePublicKeyPEM(b []byte) (*rsa.PublicKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("cloudauth: no PEM block")
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	rk, ok := k.(*rsa.PublicKey)
	if !ok {
		return nil, errors.New("cloudauth: not an RSA public key")
	}
	return rk, nil
}
