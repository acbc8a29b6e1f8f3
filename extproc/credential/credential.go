package credential

import (
	"context"
	"errors"
	"fmt"
)

// Header is one HTTP header to set on the upstream request; names are lowercase.
type Header struct{ Name, Value string }

// Request is the upstream request a credential authenticates, as the upstream will
// receive it: Host is the host header it will carry, Path the path with its query
// (escaped as sent), Body the exact bytes sent.
type Request struct {
	Method string
	Host   string
	Path   string
	Body   []byte
}

// Credential answers the headers that authenticate one request to an upstream. Safe
// for concurrent use. An error never contains a secret.
type Credential interface {
	Headers(ctx context.Context, req Request) ([]Header, error)
}

// Header names a static key may be sent in.
const (
	HeaderAuthorization = "authorization"  // "Bearer <key>"
	HeaderXAPIKey       = "x-api-key"      // Anthropic
	HeaderAPIKey        = "api-key"        // Azure OpenAI
	HeaderGoogAPIKey    = "x-goog-api-key" // Gemini API
)

// KeyHeaders are the headers a static key may be sent in.
var KeyHeaders = []string{HeaderAuthorization, HeaderXAPIKey, HeaderAPIKey, HeaderGoogAPIKey}

// HeaderNames are every header any credential sets. The lifecycle removes them all from
// the client's request before setting a credential's own, so that neither the client's
// gateway key nor a credential header the client made up reaches a provider.
var HeaderNames = append(append([]string(nil), KeyHeaders...), awsDate, awsContentSHA256, awsSecurityToken)

// Config is one channel's credential, its secrets resolved. Exactly one style is set:
// Key (with Header), AWS or GCP.
type Config struct {
	// Key is a static key sent in Header (one of KeyHeaders).
	Key    string
	Header string
	AWS    *AWSConfig
	GCP    *GCPConfig
}

// AWSConfig is an AWS access key for Signature Version 4.
type AWSConfig struct {
	Region          string
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string // optional: temporary (STS) credentials
}

// GCPConfig is a Google service account.
type GCPConfig struct {
	// ServiceAccountJSON is the key file's content (type "service_account").
	ServiceAccountJSON []byte
}

// New returns the credential cfg describes.
func New(cfg Config) (Credential, error) {
	styles := 0
	for _, set := range []bool{cfg.Key != "" || cfg.Header != "", cfg.AWS != nil, cfg.GCP != nil} {
		if set {
			styles++
		}
	}
	switch {
	case styles != 1:
		return nil, errors.New("credential: set exactly one of a key, aws and gcp")
	case cfg.AWS != nil:
		return NewAWS(*cfg.AWS)
	case cfg.GCP != nil:
		return NewGCP(*cfg.GCP)
	}
	return NewStatic(cfg.Header, cfg.Key)
}

// errMissing says which required value is empty, never its content.
func errMissing(what string) error { return fmt.Errorf("credential: %s is empty", what) }
