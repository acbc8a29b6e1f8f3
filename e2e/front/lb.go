package front

import (
	"math/rand/v2"
	"sync"
)

// Envoy's defaults for what the front does not let a cluster configure: the
// overprovisioning factor (ClusterLoadAssignment.Policy.overprovisioning_factor, 140)
// and the healthy panic threshold (CommonLbConfig.healthy_panic_threshold, 50%).
const (
	overprovisioningFactor = 140
	healthyPanicThreshold  = 50
)

// balancer is a cluster's ROUND_ROBIN load balancer over its priorities: Envoy's
// RoundRobinLoadBalancer on EdfLoadBalancerBase, ZoneAwareLoadBalancerBase and
// LoadBalancerBase (source/extensions/load_balancing_policies/common/load_balancer_impl.cc,
// round_robin/round_robin_lb.h). Health is fixed per cluster version (the front has no
// health checking; CDS updates rebuild the cluster), so the per-priority state is
// computed once. Envoy keeps one balancer per worker thread; the front has one.
type balancer struct {
	// hosts and healthy are per priority, in configuration order; a priority no endpoint
	// names is an empty host set.
	hosts, healthy [][]*Host
	// health is each priority's healthy availability (0..100); load the share of
	// requests each priority gets; panic whether a priority uses all its hosts.
	health []uint32
	load   []uint32
	panic  []bool

	mu     sync.Mutex
	random func() uint64
	seed   uint64
	rr     map[hostSource]uint64
	edf    map[hostSource]*edf
}

// hostSource is a priority's host list: all hosts (panic) or the healthy ones
// (ZoneAwareLoadBalancerBase::HostsSource, AllHosts / HealthyHosts).
type hostSource struct {
	priority int
	all      bool
}

func newBalancer(eps []*Host, random func() uint64) *balancer {
	if random == nil {
		random = rand.Uint64
	}
	n := 0
	for _, h := range eps {
		n = max(n, h.Priority+1)
	}
	b := &balancer{hosts: make([][]*Host, n), healthy: make([][]*Host, n), random: random,
		rr: map[hostSource]uint64{}, edf: map[hostSource]*edf{}}
	for _, h := range eps {
		b.hosts[h.Priority] = append(b.hosts[h.Priority], h)
		if h.Healthy {
			b.healthy[h.Priority] = append(b.healthy[h.Priority], h)
		}
	}
	b.health = priorityHealth(b.hosts, b.healthy)
	b.load = make([]uint32, n)
	if t := normalizedAvailability(b.health); t > 0 {
		distributeLoad(b.load, b.health, t)
	}
	b.recalculatePanic()
	// EdfLoadBalancerBase: seed_ is one random draw; each host source starts its round
	// robin index at it (RoundRobinLoadBalancer::refreshHostSource), or, when the
	// weights of two or more hosts differ, gets an EDF schedule advanced by it
	// (EdfLoadBalancerBase::refresh).
	b.seed = random()
	for p := range n {
		for _, src := range []hostSource{{p, true}, {p, false}} {
			list := b.sourceHosts(src)
			b.rr[src] = b.seed
			if len(list) > 1 && !equalWeights(list) {
				b.edf[src] = newEDF(list, uint32(b.seed))
			}
		}
	}
	return b
}

func equalWeights(hosts []*Host) bool {
	for _, h := range hosts[1:] {
		if h.Weight != hosts[0].Weight {
			return false
		}
	}
	return true
}

// priorityHealth is LoadBalancerBase::recalculatePerPriorityState's health: the share
// of a priority's hosts that are healthy times the overprovisioning factor, capped at 100
// (by host count: weighted_priority_health is not emulated).
func priorityHealth(hosts, healthy [][]*Host) []uint32 {
	out := make([]uint32, len(hosts))
	for p := range hosts {
		if len(hosts[p]) > 0 {
			out[p] = min(100, uint32(overprovisioningFactor*len(healthy[p])/len(hosts[p])))
		}
	}
	return out
}

// normalizedAvailability is calculateNormalizedTotalAvailability: the priorities'
// availabilities summed, capped at 100 (no degraded hosts are emulated).
func normalizedAvailability(avail []uint32) uint32 {
	var sum uint32
	for _, a := range avail {
		sum += a
	}
	return min(sum, 100)
}

// distributeLoad is load_balancer_impl.cc's distributeLoad followed by
// recalculatePerPriorityState's rounding step: each priority in order takes its
// availability's share of the load while load remains; what rounding leaves goes to
// the first priority with any availability. So a fully available priority takes
// everything and an unavailable one spills its load to the next.
func distributeLoad(load, avail []uint32, total uint32) {
	left := uint32(100)
	first := -1
	for p := range avail {
		if first < 0 && avail[p] > 0 {
			first = p
		}
		load[p] = min(left, avail[p]*100/total)
		left -= load[p]
	}
	if left > 0 && first >= 0 {
		load[first] += left
	}
}

// recalculatePanic is LoadBalancerBase::recalculatePerPriorityPanic: unless the total
// availability is 100, a priority whose healthy share is under the panic threshold is in
// panic (its load goes to all its hosts, healthy or not, isHostSetInPanic); when every
// priority is, the load follows the host counts instead (recalculateLoadInTotalPanic).
func (b *balancer) recalculatePanic() {
	b.panic = make([]bool, len(b.hosts))
	if len(b.hosts) == 0 {
		return
	}
	total := normalizedAvailability(b.health)
	allPanic := true
	for p := range b.hosts {
		b.panic[p] = total != 100 && hostSetInPanic(len(b.hosts[p]), len(b.healthy[p]))
		allPanic = allPanic && b.panic[p]
	}
	if !allPanic {
		return
	}
	count := 0
	for _, hs := range b.hosts {
		count += len(hs)
	}
	if count == 0 {
		b.load[0] = 100
		return
	}
	left, first := uint32(100), -1
	for p, hs := range b.hosts {
		if first < 0 && len(hs) > 0 {
			first = p
		}
		b.load[p] = uint32(100 * len(hs) / count)
		left -= b.load[p]
	}
	b.load[first] += left
}

func hostSetInPanic(hosts, healthy int) bool {
	pct := 0.0
	if hosts > 0 {
		pct = 100 * float64(healthy) / float64(hosts)
	}
	return pct < healthyPanicThreshold
}

func (b *balancer) sourceHosts(s hostSource) []*Host {
	if s.all {
		return b.hosts[s.priority]
	}
	return b.healthy[s.priority]
}

// choosePriority is LoadBalancerBase::choosePriority: hash%100+1 falls in one
// priority's cumulative load.
func choosePriority(hash uint64, load []uint32) int {
	h := uint32(hash%100 + 1)
	var acc uint32
	for p, l := range load {
		acc += l
		if h <= acc {
			return p
		}
	}
	return 0
}

// lbContext is what the router tells the load balancer about an attempt
// (router.h Filter's LoadBalancerContext methods). A nil context is a first attempt.
type lbContext interface {
	// priorityLoad is determinePriorityLoad (the retry priority on a retry).
	priorityLoad(b *balancer, original []uint32) []uint32
	// selectAnother is shouldSelectAnotherHost (the retry host predicates on a retry).
	selectAnother(h *Host) bool
	// selectionRetries is hostSelectionRetryCount.
	selectionRetries() int
}

// choose is ZoneAwareLoadBalancerBase::chooseHost: pick, and pick again (up to the
// context's host selection retries) while the context rejects the host; the last pick
// stands. nil: no host (Envoy's no_healthy_upstream).
func (b *balancer) choose(ctx lbContext) *Host {
	b.mu.Lock()
	defer b.mu.Unlock()
	attempts := 1
	if ctx != nil {
		attempts += ctx.selectionRetries()
	}
	var h *Host
	for range attempts {
		h = b.chooseOnce(ctx)
		if h == nil || ctx == nil || !ctx.selectAnother(h) {
			return h
		}
	}
	return h
}

// chooseOnce is EdfLoadBalancerBase::chooseHostOnce with hostSourceToUse: a priority by
// the (possibly retry-adjusted) load, its healthy hosts or, in panic, all of them; then
// round robin, or EDF when weights differ.
func (b *balancer) chooseOnce(ctx lbContext) *Host {
	if len(b.hosts) == 0 {
		return nil
	}
	load := b.load
	if ctx != nil {
		load = ctx.priorityLoad(b, b.load)
	}
	p := choosePriority(b.random(), load)
	src := hostSource{priority: p, all: b.panic[p]}
	if s := b.edf[src]; s != nil {
		return s.pick()
	}
	list := b.sourceHosts(src)
	if len(list) == 0 {
		return nil
	}
	i := b.rr[src]
	b.rr[src] = i + 1
	return list[i%uint64(len(list))]
}
