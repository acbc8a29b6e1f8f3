package machine

import "time"

// expiryHeap is a min-heap of held reservations by (expiry, id). Entries are not
// removed when a reservation is settled or renewed: an entry is live only while its
// reservation is held with that expiry, and stale ones are dropped when they reach the
// top or when they outnumber the live ones.
type expiryHeap []expiryEntry

type expiryEntry struct {
	at  time.Time
	res *reservation
}

func (e expiryEntry) live() bool {
	return e.res.state == stateHeld && e.res.expiresAt.Equal(e.at)
}

func (e expiryEntry) less(o expiryEntry) bool {
	if c := e.at.Compare(o.at); c != 0 {
		return c < 0
	}
	return e.res.id < o.res.id
}

func (h *expiryHeap) push(e expiryEntry) {
	*h = append(*h, e)
	q := *h
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q[i].less(q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *expiryHeap) pop() {
	q := *h
	n := len(q) - 1
	q[0] = q[n]
	q[n] = expiryEntry{}
	q = q[:n]
	*h = q
	h.down(0)
}

func (h expiryHeap) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r].less(h[l]) {
			m = r
		}
		if !h[m].less(h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// top drops stale entries and returns the live entry of the earliest expiry.
func (h *expiryHeap) top() (expiryEntry, bool) {
	for len(*h) > 0 {
		if e := (*h)[0]; e.live() {
			return e, true
		}
		h.pop()
	}
	return expiryEntry{}, false
}

// track adds r's current expiry, rebuilding the heap from its live entries when stale
// ones outnumber them.
func (s *State) track(r *reservation) {
	if len(s.expiry) > 2*s.held+1024 {
		live := s.expiry[:0]
		for _, e := range s.expiry {
			if e.live() {
				live = append(live, e)
			}
		}
		clear(s.expiry[len(live):])
		s.expiry = live
		for i := len(live)/2 - 1; i >= 0; i-- {
			live.down(i)
		}
	}
	s.expiry.push(expiryEntry{at: r.expiresAt, res: r})
}
