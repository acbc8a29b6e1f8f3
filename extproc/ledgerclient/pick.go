package ledgerclient

import (
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/base"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Unresponsive replicas. A replica that is paused (SIGSTOP), or stuck, keeps its
// connections open: round_robin keeps picking it, and gRPC's keepalive notices it only
// after ten seconds or more (grpc-go allows no ping interval below 10 s). So extproc's
// connection to accounting picks replicas with BalancerName, round robin over the ready
// connections that skips a replica found unresponsive:
//
//   - Unresponsive: a call to it ran out of time (DeadlineExceeded), after at least
//     StallAfter, and the replica answered nothing at all since that call went out. A
//     busy replica that answers other calls is never skipped for one slow call.
//   - Skipped for ProbeEvery; then one call (the probe) goes to it: an answer of any kind
//     (a refusal included) makes it usable again, another time-out skips it again.
//   - When every ready replica is unresponsive, the calls go round robin over all.
//
// A call given up at a skipped replica is retried at another by the waiting-for-an-owner
// retry (retry.go).

// BalancerName is the load-balancing policy of extproc's accounting connection (the
// service config, ServiceConfig, names it).
const BalancerName = "ledger_responsive_round_robin"

// StallAfter and ProbeEvery tune the policy (see above).
const (
	StallAfter = 250 * time.Millisecond
	ProbeEvery = time.Second
)

func init() { balancer.Register(responsiveBuilder{}) }

type responsiveBuilder struct{}

func (responsiveBuilder) Name() string { return BalancerName }

// Build makes a balancer of its own per connection: base's, keeping a ready
// connection per address, with a picker builder that remembers each connection's
// responsiveness across pickers.
func (responsiveBuilder) Build(cc balancer.ClientConn, opts balancer.BuildOptions) balancer.Balancer {
	pb := &responsivePickers{replicas: map[balancer.SubConn]*replica{}}
	return base.NewBalancerBuilder(BalancerName, pb, base.Config{HealthCheck: true}).Build(cc, opts)
}

// responsivePickers builds the pickers of one connection.
type responsivePickers struct {
	mu       sync.Mutex
	replicas map[balancer.SubConn]*replica
}

func (b *responsivePickers) Build(info base.PickerBuildInfo) balancer.Picker {
	if len(info.ReadySCs) == 0 {
		return base.NewErrPicker(balancer.ErrNoSubConnAvailable)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	p := &responsivePicker{}
	for sc := range info.ReadySCs {
		r := b.replicas[sc]
		if r == nil {
			r = &replica{sc: sc}
			b.replicas[sc] = r
		}
		p.replicas = append(p.replicas, r)
	}
	for sc := range b.replicas {
		if _, ok := info.ReadySCs[sc]; !ok {
			delete(b.replicas, sc) // reconnected connections start afresh
		}
	}
	return p
}

// replica is what the picker knows of one ready connection.
type replica struct {
	sc balancer.SubConn
	// answered is when (UnixNano) a call to it last came back with an answer.
	answered atomic.Int64
	// skipUntil, when set, is when (UnixNano) its probe may go.
	skipUntil atomic.Int64
	// probed is when (UnixNano) the last probe went: one at a time, and another after
	// ProbeEvery if that one never came back.
	probed atomic.Int64
}

// usable reports whether a call may go to r now; a replica past its skip time takes
// one call, the probe.
func (r *replica) usable(now int64) bool {
	until := r.skipUntil.Load()
	if until == 0 {
		return true
	}
	probed := r.probed.Load()
	return now >= until && now-probed >= int64(ProbeEvery) && r.probed.CompareAndSwap(probed, now)
}

// done records how a call picked at picked ended.
func (r *replica) done(picked time.Time, err error) {
	now := time.Now()
	switch status.Code(err) {
	case codes.DeadlineExceeded:
		if now.Sub(picked) >= StallAfter && r.answered.Load() < picked.UnixNano() {
			r.skipUntil.Store(now.Add(ProbeEvery).UnixNano())
		}
	case codes.Canceled, codes.Unavailable:
		// Nothing learnt of the replica: the caller went away, or the connection did.
	default:
		r.answered.Store(now.UnixNano())
		r.skipUntil.Store(0)
	}
	r.probed.Store(0)
}

type responsivePicker struct {
	replicas []*replica
	next     atomic.Uint32
}

func (p *responsivePicker) Pick(balancer.PickInfo) (balancer.PickResult, error) {
	n := uint32(len(p.replicas))
	start := p.next.Add(1)
	now := time.Now().UnixNano()
	r := p.replicas[start%n]
	for i := range n {
		if c := p.replicas[(start+i)%n]; c.usable(now) {
			r = c
			break
		}
	}
	picked := time.Now()
	return balancer.PickResult{SubConn: r.sc, Done: func(di balancer.DoneInfo) { r.done(picked, di.Err) }}, nil
}
