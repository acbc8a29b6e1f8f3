package materialize_test

import (
	"crypto/sha256"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

func TestMain(m *testing.M) { tablestest.Main(m) }

// clock is a settable clock for store.Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// hash is a key hash made from a name.
func hash(name string) []byte {
	h := sha256.Sum256([]byte(name))
	return h[:]
}

func ptr[T any](v T) *T { return &v }

// must(f())(t) is f's value, failing t on f's error.
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
