package catalog

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
