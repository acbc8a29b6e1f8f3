package front

import (
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// Header names change case on their way through the front: Go's header maps hold the
// canonical form (Content-Type), Envoy's header maps and ext_proc the lowercase one.
// Each conversion of a name not already in the target form allocates; the names a
// gateway sees are few, so the conversions are remembered, for up to keyCacheMax names
// each way.
const keyCacheMax = 256

var (
	lowerKeys     = keyCache{convert: strings.ToLower}
	canonicalKeys = keyCache{convert: http.CanonicalHeaderKey}
)

// lowerKey is strings.ToLower(k).
func lowerKey(k string) string { return lowerKeys.get(k) }

// canonicalKey is http.CanonicalHeaderKey(k).
func canonicalKey(k string) string { return canonicalKeys.get(k) }

// keyCache remembers a conversion: readers look up an immutable map; a new name
// replaces the map with a copy holding it.
type keyCache struct {
	convert func(string) string
	cur     atomic.Pointer[map[string]string]
	mu      sync.Mutex // serializes additions
}

func (c *keyCache) get(k string) string {
	if m := c.cur.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	v := c.convert(k)
	c.add(k, v)
	return v
}

func (c *keyCache) add(k, v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := map[string]string{}
	if old := c.cur.Load(); old != nil {
		if len(*old) >= keyCacheMax {
			return
		}
		next = maps.Clone(*old)
	}
	// Copies: k or v may share the memory of a larger buffer.
	next[strings.Clone(k)] = strings.Clone(v)
	c.cur.Store(&next)
}
