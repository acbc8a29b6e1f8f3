package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"sync/atomic"
	"time"
)

// Source is the live catalog: read with Current (once per request, so that a request
// sees one catalog for its whole life), replaced atomically by Watch when the file
// changes. A catalog that fails validation never replaces the one serving. Safe for
// concurrent use.
type Source struct {
	cur atomic.Pointer[versioned]
}

type versioned struct {
	cat     *Catalog
	version string
}

// NewSource returns a Source serving c, labelled version.
func NewSource(c *Catalog, version string) *Source {
	s := &Source{}
	s.cur.Store(&versioned{c, version})
	return s
}

// LoadSource reads the catalog file at path into a Source.
func LoadSource(path string) (*Source, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(data, os.LookupEnv, os.ReadFile)
	if err != nil {
		return nil, err
	}
	return NewSource(c, Version(data)), nil
}

// Current is the catalog serving now.
func (s *Source) Current() *Catalog { return s.cur.Load().cat }

// Version is the serving catalog's version (Version of its file's bytes).
func (s *Source) Version() string { return s.cur.Load().version }

// Version names a catalog document: the first 12 hex digits of its SHA-256.
func Version(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// Reload is what one look at the file found.
type Reload struct {
	Version string // the file's version
	Changed bool   // the file differs from the serving catalog
	Err     error  // the file could not be read or failed validation (the old one serves)
}

// Check reads the file once: a changed, valid catalog replaces the serving one.
func (s *Source) Check(path string) Reload {
	data, err := os.ReadFile(path)
	if err != nil {
		return Reload{Err: err}
	}
	v := Version(data)
	if v == s.Version() {
		return Reload{Version: v}
	}
	c, err := Parse(data, os.LookupEnv, os.ReadFile)
	if err != nil {
		return Reload{Version: v, Changed: true, Err: err}
	}
	s.cur.Store(&versioned{c, v})
	return Reload{Version: v, Changed: true}
}

// Watch checks the file every interval until ctx ends and reports each change (and each
// refusal, once per version) to report. It reads the file's content, not its metadata,
// so a Kubernetes ConfigMap volume — which swaps a symlink to a new directory — is
// followed like an edited file.
func (s *Source) Watch(ctx context.Context, path string, interval time.Duration, report func(Reload)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	refused := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r := s.Check(path)
		switch {
		case r.Err != nil && r.Version == refused:
		case r.Err != nil:
			refused = r.Version
			report(r)
		case r.Changed:
			refused = ""
			report(r)
		}
	}
}
