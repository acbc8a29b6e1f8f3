package ledgerclient

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/contract"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// Routing to the owner. Every unary ledger call goes to the replica that owns the ledger
// once the client knows which one it is: the first calls go through the connection the
// client was made with (every replica, round robin), asking for redirects
// (contract.RedirectHeader); a standby answers such a call with the owner's address
// instead of forwarding it, nothing decided, and the call is made again at once at that
// address, on a connection of its own kept for the replica. Later calls go there
// directly: one hop, with the owner's batching the only batching.
//
// A call at the learned owner is one attempt of at most half the time left (waitForOwner
// makes no retries there). One that fails UNAVAILABLE or DEADLINE_EXCEEDED (the owner
// died, stopped or froze) forgets it, and the call is made again through base: round
// robin, waiting for an owner within the caller's deadline (retry.go) and learning the
// new one from the first standby that names it. Every ledger call may be made again:
// each is idempotent by its ids (a reserve by its request id, a settlement by its
// reservation id). A NotOwner answer at the learned owner (it handed its lease over)
// moves to the owner it names.
//
// maxRedirects bounds the redirects one call follows, so that replicas that name each
// other (a lease changing hands twice during a call) cannot keep it bouncing.
const maxRedirects = 2

// failedFor is how long a redirect to an owner that failed a call is not followed: about
// the default lease (accounting/engine.DefaultLease), after which a standby names the
// new owner, or the old one is still the owner and answers again.
const failedFor = time.Second

// maxReplicas bounds the connections kept: replicas replaced over time (new addresses)
// leave theirs behind until a new address finds this many, and then all but the
// owner's are closed.
const maxReplicas = 8

// ownerConn is a connection to one accounting replica, by the address it advertises.
type ownerConn struct {
	addr string
	conn *grpc.ClientConn
	rpc  accountingv1.LedgerServiceClient
}

// router sends unary ledger calls to the owner it learned, or through base.
type router struct {
	base accountingv1.LedgerServiceClient
	dial func(addr string) (*grpc.ClientConn, error) // nil: no redirects, every call on base
	log  *zap.Logger

	owner atomic.Pointer[ownerConn] // nil: not known; calls go through base

	mu       sync.Mutex
	replicas map[string]*ownerConn
	closed   bool
	lastFail map[string]time.Time // when a call at a learned owner last failed, by address
}

func newRouter(base accountingv1.LedgerServiceClient, dial func(string) (*grpc.ClientConn, error), log *zap.Logger) *router {
	return &router{base: base, dial: dial, log: log, replicas: map[string]*ownerConn{}, lastFail: map[string]time.Time{}}
}

// call makes one unary call with f at the owner, following redirects.
//
// While a dead owner's lease has not lapsed, the standbys still name it. A redirect to
// an owner that failed a call lately (failedFor) is therefore not followed: the call
// waits a pause and asks again through base, within its deadline, until a standby
// names the new owner or the old one answers again (at most 2 × failedFor a call).
func call[Req, Resp any](ctx context.Context, r *router, req Req,
	f func(accountingv1.LedgerServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	if r.dial == nil {
		return f(r.base, ctx, req)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, contract.RedirectHeader, "1")
	at := r.owner.Load()
	pause, start := RetryPause, time.Now()
	for redirects := 0; ; {
		rpc, actx := r.base, ctx
		if at != nil {
			rpc, actx = at.rpc, oneAttempt(ctx)
		}
		resp, err := f(rpc, actx, req)
		if err == nil {
			return resp, nil
		}
		addr, redirected := contract.OwnerOf(err)
		if !redirected {
			if at != nil && (status.Code(err) == codes.Unavailable || status.Code(err) == codes.DeadlineExceeded) {
				r.forget(at)
				r.failed(at.addr)
				if ctx.Err() == nil {
					at = nil // once more through base, waiting for an owner
					continue
				}
			}
			return resp, err
		}
		if r.failedLately(addr) {
			// A standby names an owner that just failed: its lease has not lapsed yet.
			if time.Since(start) > 2*failedFor || !sleep(ctx, pause) {
				return resp, err
			}
			pause = min(2*pause, MaxRetryPause)
			at = nil
			continue
		}
		if redirects >= maxRedirects || (at != nil && at.addr == addr) {
			// Bouncing, or a replica that names itself as it stops owning (a fenced owner
			// woken from a pause, before it has read the new lease): that replica is
			// not followed for failedFor, and the call waits and asks again through
			// base like a call to a failed owner (bounded the same way).
			r.forget(at)
			if at != nil && at.addr == addr {
				r.failed(addr)
			}
			if time.Since(start) > 2*failedFor || !sleep(ctx, pause) {
				return resp, err
			}
			pause = min(2*pause, MaxRetryPause)
			at, redirects = nil, 0
			continue
		}
		redirects++
		next, derr := r.learn(addr)
		if derr != nil {
			r.log.Warn("accounting owner: cannot dial the address a standby named", zap.String("addr", addr), zap.Error(derr))
			return resp, err
		}
		at = next
	}
}

// learn makes the replica at addr the owner, with the connection kept for it.
func (r *router) learn(addr string) (*ownerConn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, status.Error(codes.Canceled, "ledger client closed")
	}
	rep, ok := r.replicas[addr]
	if !ok {
		if len(r.replicas) >= maxReplicas {
			r.dropAllBut(r.owner.Load())
		}
		conn, err := r.dial(addr)
		if err != nil {
			return nil, err
		}
		rep = &ownerConn{addr: addr, conn: conn, rpc: accountingv1.NewLedgerServiceClient(conn)}
		r.replicas[addr] = rep
	}
	if prev := r.owner.Swap(rep); prev != rep {
		r.log.Info("accounting owner learned", zap.String("addr", addr))
	}
	return rep, nil
}

// dropAllBut closes every replica's connection but keep's; r.mu is held.
func (r *router) dropAllBut(keep *ownerConn) {
	for addr, rep := range r.replicas {
		if rep != keep {
			_ = rep.conn.Close()
			delete(r.replicas, addr)
		}
	}
}

// forget stops sending to rep as the owner (unless another call learned an owner
// since). Its connection is kept for when it owns again.
func (r *router) forget(rep *ownerConn) {
	if rep != nil {
		r.owner.CompareAndSwap(rep, nil)
	}
}

// close closes the connections to the replicas learned.
func (r *router) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	r.owner.Store(nil)
	r.dropAllBut(nil)
}

// failed notes that a call at the owner at addr failed now.
func (r *router) failed(addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastFail[addr] = time.Now()
	for a, at := range r.lastFail {
		if time.Since(at) > failedFor {
			delete(r.lastFail, a)
		}
	}
}

// failedLately says whether a call at the owner at addr failed within failedFor.
func (r *router) failedLately(addr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.lastFail[addr]
	return ok && time.Since(at) <= failedFor
}

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
