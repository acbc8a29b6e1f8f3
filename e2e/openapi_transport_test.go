package e2e_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	validator "github.com/pb33f/libopenapi-validator"
	oaerrors "github.com/pb33f/libopenapi-validator/errors"
)

// This file validates every answer the e2e suite receives from the gateway against
// docs/openapi.yaml: the SDK clients (openaiClient, anthropicClient) and the raw
// requests (send, through http.DefaultClient) go through apiTransport, which checks
// each answer of an operation the document declares when its body has been read to
// the end. A mismatch is recorded and fails the run (TestMain), naming the request.

// apiTransport validates the gateway's answers; base sends the requests.
type apiTransport struct {
	base http.RoundTripper
	// prefix is the gateway's base address; requests elsewhere are not checked.
	prefix string
	// validator returns the document's validator.
	validator func() (validator.Validator, error)
	// mismatches collects the answers that broke the document.
	mismatches *mismatchLog
}

// mismatchLog is the list of answers that did not follow the document.
type mismatchLog struct {
	mu      sync.Mutex
	list    []string
	checked int
}

// checkedOne counts a validated answer.
func (l *mismatchLog) checkedOne() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checked++
}

// Checked returns how many answers were validated.
func (l *mismatchLog) Checked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checked
}

func (l *mismatchLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, s)
}

// All returns the recorded mismatches.
func (l *mismatchLog) All() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.list...)
}

// apiMismatches collects the suite's mismatches; TestMain fails the run on any.
var apiMismatches = &mismatchLog{}

// newAPITransport wraps base (http.DefaultTransport when nil) for the gateway at prefix.
func newAPITransport(base http.RoundTripper, prefix string) *apiTransport {
	if base == nil {
		base = http.DefaultTransport
	}
	return &apiTransport{base: base, prefix: prefix, validator: loadOpenAPI, mismatches: apiMismatches}
}

func (a *apiTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := a.base.RoundTrip(req)
	if err != nil || a.prefix == "" || !strings.HasPrefix(req.URL.String(), a.prefix) {
		return resp, err
	}
	resp.Body = &checkedBody{rc: resp.Body, check: func(body []byte) { a.check(req, resp, body) }}
	return resp, nil
}

// check validates one complete answer and records a mismatch.
func (a *apiTransport) check(req *http.Request, resp *http.Response, body []byte) {
	v, err := a.validator()
	if err != nil {
		a.mismatches.add(fmt.Sprintf("%s %s: the document does not load: %v", req.Method, req.URL.Path, err))
		return
	}
	copied := *resp
	copied.Body = io.NopCloser(bytes.NewReader(body))
	ok, errs := v.ValidateHttpResponse(req, &copied)
	if undeclared(errs) {
		return
	}
	a.mismatches.checkedOne()
	if ok {
		return
	}
	a.mismatches.add(fmt.Sprintf("%s %s answered %d against the document:%s\n  headers %v\n  body %.3000s",
		req.Method, req.URL.Path, resp.StatusCode, describe(errs), resp.Header, body))
}

// undeclared is true when the errors only say the document has no such operation:
// paths outside the document (the served 404 and 405 answers) are not checked.
func undeclared(errs []*oaerrors.ValidationError) bool {
	for _, e := range errs {
		if !e.IsPathMissingError() && !e.IsOperationMissingError() {
			return false
		}
	}
	return len(errs) > 0
}

// checkedBody hands the whole body to check once it has been read to its end; a body
// closed before its end (a client that stopped reading) is not checked.
type checkedBody struct {
	rc    io.ReadCloser
	buf   bytes.Buffer
	check func([]byte)
	once  sync.Once
}

func (c *checkedBody) Read(p []byte) (int, error) {
	n, err := c.rc.Read(p)
	c.buf.Write(p[:n])
	if err == io.EOF {
		c.once.Do(func() { c.check(c.buf.Bytes()) })
	}
	return n, err
}

func (c *checkedBody) Close() error { return c.rc.Close() }
