package credential

import (
	"context"
	"strings"
	"testing"
)

func TestStaticHeaders(t *testing.T) {
	for _, tc := range []struct{ name, header, want string }{
		{"bearer", HeaderAuthorization, "Bearer sk-secret"},
		{"anthropic", HeaderXAPIKey, "sk-secret"},
		{"azure", HeaderAPIKey, "sk-secret"},
		{"gemini", HeaderGoogAPIKey, "sk-secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(Config{Header: tc.header, Key: "sk-secret"})
			if err != nil {
				t.Fatal(err)
			}
			hs, err := c.Headers(context.Background(), Request{})
			if err != nil || len(hs) != 1 || hs[0] != (Header{tc.header, tc.want}) {
				t.Fatalf("Headers = %v, %v; want %s: %s", hs, err, tc.header, tc.want)
			}
			if s := c.(*Static).String(); strings.Contains(s, "secret") {
				t.Fatalf("String %q shows the key", s)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"unknown header", Config{Header: "x-secret-key", Key: "sk-secret"}},
		{"empty key", Config{Header: HeaderAuthorization, Key: " "}},
		{"no style", Config{}},
		{"two styles", Config{Header: HeaderAuthorization, Key: "sk-secret", AWS: &AWSConfig{Region: "us-east-1", AccessKeyID: "AKID", SecretAccessKey: "sk-secret"}}},
		{"aws without region", Config{AWS: &AWSConfig{AccessKeyID: "AKID", SecretAccessKey: "sk-secret"}}},
		{"aws without secret", Config{AWS: &AWSConfig{Region: "us-east-1", AccessKeyID: "AKID"}}},
		{"gcp not a service account", Config{GCP: &GCPConfig{ServiceAccountJSON: []byte(`{"type":"authorized_user","client_secret":"sk-secret"}`)}}},
		{"gcp not json", Config{GCP: &GCPConfig{ServiceAccountJSON: []byte(`sk-secret`)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), "sk-secret") {
				t.Fatalf("error %q shows the secret", err)
			}
		})
	}
}
