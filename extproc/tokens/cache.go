package tokens

import (
	"hash/maphash"
	"sync"
)

// CachedBytes is the shortest text whose count is remembered. Conversations come back
// whole with every turn and an application sends the same system prompt with every
// request, so most of a long prompt's text was counted before; a remembered count costs
// two hashes of the text (≈10 GB/s) instead of the tokenizer (≈130 MB/s). (An answer's
// text is counted only when no usage came, or in 64 KB parts: it seldom reaches the
// cache.) Shorter texts are counted each time: it costs about as little as a lookup.
const CachedBytes = 512

// cacheShards × shardEntries bound what the cache holds (≈1 MB of counts).
const (
	cacheShards  = 64
	shardEntries = 512
)

// countCache remembers the token counts of texts by a 128-bit keyed hash of their bytes:
// two maphash sums under independent random seeds, so that nobody can make two texts
// collide (a wrong count would be a wrong hold). A shard that fills is emptied: counts
// are cheap to make again, and what comes back often is soon back.
type countCache struct {
	seeds  [2]maphash.Seed
	shards [cacheShards]struct {
		mu     sync.Mutex
		counts map[[2]uint64]int
	}
}

func newCountCache() *countCache {
	c := &countCache{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
	for i := range c.shards {
		c.shards[i].counts = make(map[[2]uint64]int)
	}
	return c
}

// count is s's count, from the cache or from count(s), which it then remembers.
func (c *countCache) count(s string, count func(string) int) int {
	key := [2]uint64{maphash.String(c.seeds[0], s), maphash.String(c.seeds[1], s)}
	sh := &c.shards[key[0]%cacheShards]
	sh.mu.Lock()
	n, ok := sh.counts[key]
	sh.mu.Unlock()
	if ok {
		return n
	}
	n = count(s)
	sh.mu.Lock()
	if len(sh.counts) >= shardEntries {
		clear(sh.counts)
	}
	sh.counts[key] = n
	sh.mu.Unlock()
	return n
}
