package credential

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// AWSService is the SigV4 signing name of the Bedrock runtime API.
const AWSService = "bedrock"

const (
	awsDate          = "x-amz-date"
	awsContentSHA256 = "x-amz-content-sha256"
	awsSecurityToken = "x-amz-security-token"
)

// AWS signs each request with Signature Version 4 for service bedrock.
type AWS struct {
	region string
	creds  aws.Credentials
	signer *v4.Signer
	now    func() time.Time
}

// NewAWS returns the SigV4 signer of c.
func NewAWS(c AWSConfig) (*AWS, error) {
	switch {
	case c.Region == "":
		return nil, errMissing("aws region")
	case c.AccessKeyID == "":
		return nil, errMissing("aws access key id")
	case c.SecretAccessKey == "":
		return nil, errMissing("aws secret access key")
	}
	return &AWS{
		region: c.Region,
		creds:  aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken},
		signer: v4.NewSigner(),
		now:    time.Now,
	}, nil
}

// Headers signs req: the signed headers are host, x-amz-date, x-amz-content-sha256
// (the body's SHA-256, so the signature covers the exact bytes) and, with temporary
// credentials, x-amz-security-token. content-length is left unsigned on purpose: the
// body hash already binds the bytes, and the proxy may re-frame the body.
func (s *AWS) Headers(ctx context.Context, req Request) ([]Header, error) {
	hr, err := signingRequest(req)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(req.Body)
	hash := hex.EncodeToString(sum[:])
	hr.Header.Set(awsContentSHA256, hash)
	if err := s.signer.SignHTTP(ctx, s.creds, hr, hash, AWSService, s.region, s.now().UTC()); err != nil {
		return nil, fmt.Errorf("credential: sigv4: %w", err)
	}
	out := []Header{
		{HeaderAuthorization, hr.Header.Get("Authorization")},
		{awsDate, hr.Header.Get(awsDate)},
		{awsContentSHA256, hash},
	}
	if s.creds.SessionToken != "" {
		out = append(out, Header{awsSecurityToken, s.creds.SessionToken})
	}
	return out, nil
}

// String names the style and region, never a key.
func (s *AWS) String() string { return "aws sigv4 (" + AWSService + ", " + s.region + ")" }

// signingRequest is req as the net/http request the SDK signer reads: the path kept
// escaped as it is sent (RawPath), since SigV4's canonical URI is built from it.
func signingRequest(req Request) (*http.Request, error) {
	if req.Host == "" || !strings.HasPrefix(req.Path, "/") {
		return nil, fmt.Errorf("credential: sigv4 needs a host and an absolute path")
	}
	u, err := url.ParseRequestURI(req.Path)
	if err != nil {
		return nil, fmt.Errorf("credential: sigv4: path: %w", err)
	}
	u.Scheme, u.Host = "https", req.Host
	method := req.Method
	if method == "" {
		method = http.MethodPost
	}
	return &http.Request{Method: method, URL: u, Host: req.Host, Header: http.Header{}}, nil
}
