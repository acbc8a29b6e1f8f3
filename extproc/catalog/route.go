package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
)

// Pick chooses a channel among candidates (as returned by Model.Candidates, sorted by
// priority): the lowest priority value wins, and among channels of that priority one is
// drawn at random in proportion to its weight. intn returns a uniform int in [0, n)
// (math/rand/v2's IntN in production; a fixed function in tests). It returns nil when
// candidates is empty.
func Pick(candidates []*Channel, intn func(n int) int) *Channel {
	if len(candidates) == 0 {
		return nil
	}
	best := candidates[0].Priority
	total, end := 0, 0
	for _, c := range candidates {
		if c.Priority < best {
			best, total, end = c.Priority, 0, 0
		}
	}
	for _, c := range candidates {
		if c.Priority == best {
			total += c.EffectiveWeight()
			end++
		}
	}
	if end == 1 || total <= 0 {
		for _, c := range candidates {
			if c.Priority == best {
				return c
			}
		}
	}
	r := intn(total)
	for _, c := range candidates {
		if c.Priority != best {
			continue
		}
		r -= c.EffectiveWeight()
		if r < 0 {
			return c
		}
	}
	return nil
}

// Order is the failover order of candidates (as returned by Model.Candidates): lowest
// priority value first and, within a priority, a weighted random order (each next
// channel drawn in proportion to its weight among those not drawn yet), so that the
// first channel is distributed exactly as Pick's choice. intn is as for Pick.
func Order(candidates []*Channel, intn func(n int) int) []*Channel {
	out := make([]*Channel, 0, len(candidates))
	rest := append([]*Channel(nil), candidates...)
	for len(rest) > 0 {
		c := Pick(rest, intn)
		out = append(out, c)
		for i, x := range rest {
			if x == c {
				rest = append(rest[:i], rest[i+1:]...)
				break
			}
		}
	}
	return out
}

// FailoverClusterPrefix starts the name of every failover cluster; no catalog cluster
// may use it.
const FailoverClusterPrefix = "failover/"

// FailoverCluster names the Envoy cluster whose endpoints are exactly candidates, the
// channels of model m a request may use (extproc/xds builds one per CandidateSets
// entry): the model id and a digest of the channel names, so two tiers that see the
// same channels share a cluster and a catalog edit that changes the set changes the name.
func FailoverCluster(m *Model, candidates []*Channel) string {
	names := make([]string, len(candidates))
	for i, c := range candidates {
		names[i] = c.Name
	}
	slices.Sort(names)
	sum := sha256.Sum256([]byte(strings.Join(names, "\x00")))
	return FailoverClusterPrefix + m.ID + "/" + hex.EncodeToString(sum[:4])
}

// CandidateSets are the distinct candidate sets of m over every tier: one for each tier
// some channel of m is restricted to, and one for every other tier. Empty sets are left
// out.
func (m *Model) CandidateSets() [][]*Channel {
	tiers := []string{""} // a tier no channel names
	for _, c := range m.channels {
		for _, t := range c.Tiers {
			if !slices.Contains(tiers, t) {
				tiers = append(tiers, t)
			}
		}
	}
	var out [][]*Channel
	seen := map[string]bool{}
	for _, t := range tiers {
		cs := m.Candidates(t)
		if len(cs) == 0 {
			continue
		}
		if name := FailoverCluster(m, cs); !seen[name] {
			seen[name] = true
			out = append(out, cs)
		}
	}
	return out
}
