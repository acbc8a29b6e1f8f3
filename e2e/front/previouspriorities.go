package front

// previousPriorities is one request's envoy.retry_priorities.previous_priorities
// (source/extensions/retry/priority/previous_priorities/previous_priorities.cc,
// PreviousPrioritiesRetryPriority): every update_frequency attempts, the priorities of
// the hosts attempted so far get no load, and the load is spread over the others by
// their health.
type previousPriorities struct {
	frequency int
	attempted []*Host
	excluded  []bool
	load      []uint32
}

// determine is PreviousPrioritiesRetryPriority::determinePriorityLoad.
func (pp *previousPriorities) determine(b *balancer, original []uint32) []uint32 {
	n := len(pp.attempted)
	switch {
	case n < pp.frequency:
		return original
	case n%pp.frequency == 0:
		if len(pp.excluded) < len(b.hosts) {
			pp.excluded = append(pp.excluded, make([]bool, len(b.hosts)-len(pp.excluded))...)
		}
		for _, h := range pp.attempted {
			pp.excluded[h.Priority] = true
		}
		if !pp.adjust(b) {
			return original
		}
	}
	return pp.load
}

// adjust is adjustForAttemptedPriorities: the health of the priorities not excluded,
// their total capped at 100, distributed in priority order with the rounding remainder
// going again to the first ones. When no priority is left, Envoy means to start over:
// its loop meant to clear the exclusions assigns to copies of the flags, so only the
// attempted hosts are forgotten; the exclusions stay, the total stays 0, and the
// original load is used (for this and, as no exclusion is ever cleared, every later
// retry of the request).
func (pp *previousPriorities) adjust(b *balancer) bool {
	adjusted := make([]uint32, len(b.health))
	total := pp.available(b, adjusted)
	if total == 0 {
		pp.attempted = nil
		total = pp.available(b, adjusted)
	}
	if total == 0 {
		return false
	}
	pp.load = make([]uint32, len(b.health))
	left := uint32(100)
	for left != 0 {
		for p, a := range adjusted {
			d := min(left, a*100/total)
			pp.load[p] += d
			left -= d
		}
	}
	return true
}

// available is adjustedAvailability: excluded priorities count as unavailable.
func (pp *previousPriorities) available(b *balancer, adjusted []uint32) uint32 {
	var total uint32
	for p, h := range b.health {
		adjusted[p] = 0
		if p < len(pp.excluded) && pp.excluded[p] {
			continue
		}
		adjusted[p] = h
		total += h
	}
	return min(total, 100)
}
