package credential

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Static is a key sent as is in one header ("authorization" as "Bearer <key>").
type Static struct{ h Header }

// NewStatic returns the key sent in header, one of KeyHeaders.
func NewStatic(header, key string) (*Static, error) {
	if !slices.Contains(KeyHeaders, header) {
		return nil, fmt.Errorf("credential: header %q is not one of %s", header, strings.Join(KeyHeaders, ", "))
	}
	if strings.TrimSpace(key) == "" {
		return nil, errMissing("the key")
	}
	if header == HeaderAuthorization {
		key = "Bearer " + key
	}
	return &Static{Header{header, key}}, nil
}

// Headers is the key's header; the request does not change it.
func (s *Static) Headers(context.Context, Request) ([]Header, error) { return []Header{s.h}, nil }

// String names the header, never the key.
func (s *Static) String() string { return "static key in " + s.h.Name }
