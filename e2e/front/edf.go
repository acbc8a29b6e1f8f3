package front

import "container/heap"

// edf is Envoy's earliest-deadline-first scheduler, the weighted round robin of a host
// list whose weights differ (source/common/upstream/edf_scheduler.h, EdfScheduler): each
// entry's next deadline is the scheduler's time plus 1/weight; a pick takes the earliest
// deadline (ties: the earliest inserted) and puts the entry back with its next deadline.
type edf struct {
	now   float64
	order uint64
	q     edfQueue
}

type edfEntry struct {
	deadline float64
	order    uint64
	host     *Host
}

type edfQueue []edfEntry

func (q edfQueue) Len() int { return len(q) }
func (q edfQueue) Less(i, j int) bool {
	return q[i].deadline < q[j].deadline || q[i].deadline == q[j].deadline && q[i].order < q[j].order
}
func (q edfQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *edfQueue) Push(x any)   { *q = append(*q, x.(edfEntry)) }
func (q *edfQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// pick is EdfScheduler::pickAndAdd.
func (s *edf) pick() *Host {
	if len(s.q) == 0 {
		return nil
	}
	e := heap.Pop(&s.q).(edfEntry)
	s.now = e.deadline
	s.add(e.host)
	return e.host
}

func (s *edf) add(h *Host) {
	heap.Push(&s.q, edfEntry{deadline: s.now + 1/float64(h.Weight), order: s.order, host: h})
	s.order++
}

// newEDF is EdfScheduler::createWithPicks: a scheduler in the state it would reach after
// `picks` picks (picks modulo 429496729), computed by giving each entry the whole picks
// its share of the total weight implies (weights nudged by 1e-13 so that no weight is an
// exact multiple of another), then doing the few remaining picks one by one. Envoy seeds
// it with the load balancer's random seed (EdfLoadBalancerBase::refresh), so that every
// worker starts at a different point of the schedule.
func newEDF(hosts []*Host, picks uint32) *edf {
	picks %= 429496729
	s := &edf{}
	if len(hosts) == 0 {
		return s
	}
	aug := func(h *Host) float64 { return float64(h.Weight) + 1e-13 }
	var sum float64
	for _, h := range hosts {
		sum += aug(h)
	}
	var done uint32
	for i, h := range hosts {
		w := aug(h)
		floor := uint32(w * float64(picks) / sum)
		if floor > 0 && float64(floor)/w >= float64(picks)/sum {
			floor-- // floating point disagreeing with the floor, as Envoy corrects it
		}
		s.now = max(s.now, float64(floor)/w)
		s.q = append(s.q, edfEntry{deadline: float64(floor+1) / w, order: uint64(i), host: h})
		done += floor
	}
	s.order = uint64(len(hosts))
	heap.Init(&s.q)
	for ; done < picks; done++ {
		s.pick()
	}
	return s
}
