package cloudauth

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/oauth2/google"
)

// grant sends acct's JWT bearer grant to its token_uri, as the gateway does.
func grant(acct *ServiceAccount) (string, error) {
	cfg, err := google.JWTConfigFromJSON(acct.JSON, "https://www.googleapis.com/auth/cloud-platform")
	if err != nil {
		return "", err
	}
	tok, err := cfg.TokenSource(context.Background()).Token()
	if err != nil {
		return "", err
	}
	return tok.AccessToken, nil
}

func TestTokenIssuer(t *testing.T) {
	iss := &TokenIssuer{TTL: time.Hour}
	srv := httptest.NewServer(iss)
	defer srv.Close()
	acct, err := NewServiceAccount("gw@demo.iam.gserviceaccount.com", srv.URL+"/token")
	if err != nil {
		t.Fatal(err)
	}
	iss.Email, iss.PublicKey, iss.Audience = acct.Email, acct.PublicKey, srv.URL+"/token"

	tok, err := grant(acct)
	if err != nil || !iss.Valid(tok) {
		t.Fatalf("the account's grant: %q, %v (valid %v)", tok, err, iss.Valid(tok))
	}
	if iss.Valid("ya29.mock-made-up") || iss.Valid("") {
		t.Fatal("a token not issued here is valid")
	}

	for _, tc := range []struct {
		name  string
		email string
		aud   string
	}{
		{"another key", acct.Email, srv.URL + "/token"},
		{"another issuer", "intruder@demo.iam.gserviceaccount.com", srv.URL + "/token"},
		{"another audience", acct.Email, srv.URL + "/elsewhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// "another key" is a fresh key under the same claims; the others use the
			// key the endpoint knows (set below) with another issuer or audience (a
			// token_uri on the same server at another path).
			bad, err := NewServiceAccount(tc.email, tc.aud)
			if err != nil {
				t.Fatal(err)
			}
			if tc.name != "another key" {
				iss.PublicKey = bad.PublicKey
				defer func() { iss.PublicKey = acct.PublicKey }()
			}
			before := iss.Issued()
			if tok, err := grant(bad); err == nil {
				t.Fatalf("refused grant gave %q", tok)
			}
			if iss.Issued() != before {
				t.Fatal("a token was issued")
			}
		})
	}

	// An expired token is no longer valid.
	iss.Now = func() time.Time { return time.Now().Add(time.Hour + time.Second) }
	if iss.Valid(tok) {
		t.Fatal("an expired token is valid")
	}
}
