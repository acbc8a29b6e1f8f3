package contract

// enum is a one-to-one table between a domain enum D and its wire enum W.
type enum[D, W comparable] struct {
	wire   map[D]W
	domain map[W]D
}

type pair[D, W comparable] struct {
	d D
	w W
}

func newEnum[D, W comparable](pairs ...pair[D, W]) enum[D, W] {
	e := enum[D, W]{wire: make(map[D]W, len(pairs)), domain: make(map[W]D, len(pairs))}
	for _, p := range pairs {
		e.wire[p.d] = p.w
		e.domain[p.w] = p.d
	}
	return e
}

func (e enum[D, W]) toWire(d D) (W, bool) {
	w, ok := e.wire[d]
	return w, ok
}

func (e enum[D, W]) toDomain(w W) (D, bool) {
	d, ok := e.domain[w]
	return d, ok
}
