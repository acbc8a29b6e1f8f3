package cloudauth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go/encoding/httpbinding"
)

// AWSKey is an access key the verifier knows.
type AWSKey struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string // required on the request when set
}

// SigV4Error is a refused signature: Type is AWS's error type (the x-amzn-ErrorType
// header), Message its words.
type SigV4Error struct{ Type, Message string }

func (e *SigV4Error) Error() string { return e.Type + ": " + e.Message }

// AWS's error types for a refused signature.
const (
	MissingAuthenticationToken = "MissingAuthenticationTokenException"
	UnrecognizedClient         = "UnrecognizedClientException"
	InvalidSignature           = "InvalidSignatureException"
)

// sigV4MaxSkew is how far x-amz-date may be from the verifier's clock (AWS: 5 minutes).
const sigV4MaxSkew = 5 * time.Minute

// VerifySigV4 checks r's Signature Version 4 for service and region with key, over
// body (r's body, already read): the scope, the date, the body's hash, the session
// token, and the signature itself, recomputed by the SDK signer from the headers the
// request says it signed and from its path escaped as the service escapes it
// (serviceEscapedPath). The error is a *SigV4Error.
func VerifySigV4(r *http.Request, body []byte, key AWSKey, service, region string, now time.Time) error {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return &SigV4Error{MissingAuthenticationToken, "Missing Authentication Token"}
	}
	cred, signed, ok := parseAuthorization(auth)
	if !ok {
		return &SigV4Error{InvalidSignature, "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature'."}
	}
	scope := strings.Split(cred, "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return &SigV4Error{InvalidSignature, "Credential should be scoped to a valid region, service and date."}
	}
	if scope[0] != key.AccessKeyID {
		return &SigV4Error{UnrecognizedClient, "The security token included in the request is invalid."}
	}
	if scope[2] != region || scope[3] != service {
		return &SigV4Error{InvalidSignature, fmt.Sprintf("Credential should be scoped to region %q and service %q.", region, service)}
	}
	for _, h := range []string{"host", "x-amz-date", "x-amz-content-sha256"} {
		if !slices.Contains(signed, h) {
			return &SigV4Error{InvalidSignature, "Header " + h + " must be signed."}
		}
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || at.Format("20060102") != scope[1] {
		return &SigV4Error{InvalidSignature, "X-Amz-Date is missing, malformed or outside the credential's date."}
	}
	if d := now.Sub(at); d > sigV4MaxSkew || d < -sigV4MaxSkew {
		return &SigV4Error{InvalidSignature, "Signature expired: the request time is too far from the server's."}
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	if r.Header.Get("X-Amz-Content-Sha256") != hash {
		return &SigV4Error{InvalidSignature, "The provided x-amz-content-sha256 header does not match what was computed."}
	}
	if key.SessionToken != "" && (!slices.Contains(signed, "x-amz-security-token") || r.Header.Get("X-Amz-Security-Token") != key.SessionToken) {
		return &SigV4Error{UnrecognizedClient, "The security token included in the request is invalid."}
	}

	// The request as the signer saw it: its path as the service escapes it (not as sent),
	// only the headers it signed.
	path, err := serviceEscapedPath(r.URL)
	if err != nil {
		return &SigV4Error{InvalidSignature, "The request path is not validly escaped."}
	}
	u := &url.URL{Scheme: "https", Host: r.Host, Path: r.URL.Path, RawPath: path, RawQuery: r.URL.RawQuery}
	again := &http.Request{Method: r.Method, URL: u, Host: r.Host, Header: http.Header{}}
	for _, h := range signed {
		switch h {
		case "host":
		case "content-length":
			again.ContentLength = r.ContentLength
		default:
			again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	creds := aws.Credentials{AccessKeyID: key.AccessKeyID, SecretAccessKey: key.SecretAccessKey, SessionToken: key.SessionToken}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, again, hash, service, region, at); err != nil {
		return &SigV4Error{InvalidSignature, err.Error()}
	}
	if !hmac.Equal([]byte(again.Header.Get("Authorization")), []byte(auth)) {
		return &SigV4Error{InvalidSignature, "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."}
	}
	return nil
}

// serviceEscapedPath is u's path as an AWS service reads it for the signature: each
// segment of the path received decoded, then escaped the AWS way (every byte but A-Z,
// a-z, 0-9 and -._~, as the AWS SDKs escape a path label, ':' and '/' included). A
// client that sent a segment escaped otherwise signed another path, and is refused;
// the SDK signer then escapes this path once more for the canonical request.
func serviceEscapedPath(u *url.URL) (string, error) {
	segs := strings.Split(u.EscapedPath(), "/")
	for i, seg := range segs {
		raw, err := url.PathUnescape(seg)
		if err != nil {
			return "", err
		}
		segs[i] = httpbinding.EscapePath(raw, true)
	}
	return strings.Join(segs, "/"), nil
}

// parseAuthorization splits "AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…,
// Signature=…" into the credential and the signed header names.
func parseAuthorization(auth string) (cred string, signed []string, ok bool) {
	rest, found := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !found {
		return "", nil, false
	}
	var sig string
	for part := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			cred = v
		case "SignedHeaders":
			signed = strings.Split(v, ";")
		case "Signature":
			sig = v
		}
	}
	return cred, signed, cred != "" && len(signed) > 0 && sig != ""
}
