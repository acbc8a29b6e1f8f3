// Package ledgerclient implements the request lifecycle's Ledger over the accounting
// gRPC service, with a key cache in front of Authenticate.
//
// It is the only extproc package that imports the generated accounting code: it turns
// refused calls into *ledger.Refusal errors read from the status's accountingv1.Refusal
// detail (never from messages), and wire types into the ledger domain types.
//
// # Key cache
//
// Authenticate results are cached by key hash, but only while the WatchChanges stream is
// connected: every change drops the key's and the account's entries, a RESET (sent
// first on every stream) or the loss of the stream drops everything, and while the
// stream is down nothing is cached at all (every call goes to accounting) until it
// reconnects, with backoff. Entries also have a maximum age (default 30 s). So a revoked
// key stops working on every replica as soon as the change reaches it (normally well
// under a second); and Reserve rechecks key and account state authoritatively anyway.
// An invalid_api_key refusal is cached too, for NegativeMaxAge only (default 3 s), so
// that a flood of random well-formed keys costs one accounting round trip per key and
// few seconds rather than one per request. Under the same rules as grants (only while
// the stream is up; a RESET or the loss of the stream drops them) and also dropped by
// every key change. A key created just after a refusal was cached works within
// NegativeMaxAge at most: the change stream does not name an unknown key's hash.
// Other refusals always go back to accounting.
//
// # Routing
//
// Every unary call goes to the replica that owns the ledger, once a standby named it
// (route.go): with Options.Dial, the client asks standbys for redirects instead of
// forwarding and keeps a connection per replica it learned. Reserve, Commit, Release and
// Renew are each a call of their own: the owner's decide loop is the one place where
// operations are batched.
//
// # Load balancing
//
// DialOptions selects a round robin policy: with a target that resolves to every
// accounting replica (dns:///accounting-headless:50052) the calls made before the owner
// is known, and the change stream, spread over all of them, and a replica that goes
// away is dropped from the rotation, instead of pick_first's one connection per
// process. A replica that stops answering (paused) is skipped within a second or so
// (pick.go), and every call waits, within its deadline, for an owner while the
// ledger's owner is replaced (retry.go).
package ledgerclient

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"

	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/lifecycle"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// ServiceConfig is the default gRPC service config of the accounting connection: round
// robin over the replicas that answer (BalancerName, pick.go).
const ServiceConfig = `{"loadBalancingConfig":[{"` + BalancerName + `":{}}]}`

// Keepalive pings an idle accounting connection, so that a replica gone without a word
// (its host, or the network) is noticed and the connection made again. grpc-go pings
// no more often than every 10 s (accounting permits that); a paused replica is noticed
// sooner by the picker (pick.go).
var Keepalive = keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 3 * time.Second, PermitWithoutStream: true}

// DialOptions are the options extproc dials accounting with (see the package doc): the
// service config, keepalive, and the wait for an owner (retry.go). With traced (tracing
// is on), the OpenTelemetry client instrumentation makes each ledger call a span of
// the request's trace, propagated to accounting; without, no handler runs at all (even
// a no-op one costs each call some work).
func DialOptions(traced bool) []grpc.DialOption {
	opts := []grpc.DialOption{grpc.WithDefaultServiceConfig(ServiceConfig), grpc.WithKeepaliveParams(Keepalive),
		grpc.WithChainUnaryInterceptor(waitForOwner)}
	if traced {
		opts = append(opts, grpc.WithStatsHandler(otelgrpc.NewClientHandler()))
	}
	return opts
}

// DefaultMaxAge is how long a cached grant is used at most.
const DefaultMaxAge = 30 * time.Second

// DefaultNegativeMaxAge is how long a cached invalid_api_key refusal is used at most.
const DefaultNegativeMaxAge = 3 * time.Second

// Options tune a Client; the zero value is usable.
type Options struct {
	MaxAge time.Duration
	// NegativeMaxAge is how long an invalid_api_key refusal is cached; default
	// DefaultNegativeMaxAge.
	NegativeMaxAge time.Duration
	// MaxEntries bounds each cache (grants, refusals); it is cleared when full. Default
	// 100,000.
	MaxEntries int
	// Backoff bounds the reconnect delay of the watch (min, max); defaults 100 ms, 5 s.
	MinBackoff, MaxBackoff time.Duration
	Now                    func() time.Time
	Log                    *zap.Logger
	// Dial connects to one accounting replica at the address it advertises (with the
	// options the client's own connection was dialled with). Set, the client follows
	// standbys' redirects to the owner (route.go); nil, every call goes through the
	// connection New was given and standbys forward them.
	Dial func(addr string) (*grpc.ClientConn, error)
}

// Client is a lifecycle.Ledger over accountingv1.LedgerServiceClient. Safe for
// concurrent use.
type Client struct {
	rpc   accountingv1.LedgerServiceClient // every replica: the change stream
	opts  Options
	route *router // the unary calls

	mu        sync.Mutex
	connected bool // the watch stream is up and has delivered its RESET
	entries   map[string]entry
	refused   map[string]time.Time // key hash → end of the cached invalid_api_key refusal
	gen       uint64               // bumped on every invalidation; stale fills are dropped
}

type entry struct {
	grant   ledger.Grant
	expires time.Time
}

var _ lifecycle.Ledger = (*Client)(nil)

// New returns a Client. Call Watch (in its own goroutine) to enable the cache.
func New(rpc accountingv1.LedgerServiceClient, opts Options) *Client {
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.NegativeMaxAge <= 0 {
		opts.NegativeMaxAge = DefaultNegativeMaxAge
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = 100_000
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	return &Client{rpc: rpc, opts: opts, entries: map[string]entry{}, refused: map[string]time.Time{},
		route: newRouter(rpc, opts.Dial, opts.Log)}
}

// Close closes the connections the client made to the replicas it learned (not the
// one it was given).
func (c *Client) Close() { c.route.close() }

// Connected reports whether the change stream is up (and the cache in use).
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connected
}

// Authenticate implements lifecycle.Ledger.
func (c *Client) Authenticate(ctx context.Context, keyHash []byte) (ledger.Grant, error) {
	k := string(keyHash)
	c.mu.Lock()
	gen, connected := c.gen, c.connected
	if connected {
		if e, ok := c.entries[k]; ok && c.opts.Now().Before(e.expires) {
			c.mu.Unlock()
			return e.grant, nil
		}
		if until, ok := c.refused[k]; ok && c.opts.Now().Before(until) {
			c.mu.Unlock()
			return ledger.Grant{}, &ledger.Refusal{Reason: ledger.ReasonInvalidAPIKey}
		}
	}
	c.mu.Unlock()

	resp, err := call(ctx, c.route, &accountingv1.AuthenticateRequest{KeyHash: keyHash}, accountingv1.LedgerServiceClient.Authenticate)
	if err != nil {
		err = contract.FromStatus(err)
		var ref *ledger.Refusal
		if errors.As(err, &ref) && ref.Reason == ledger.ReasonInvalidAPIKey {
			c.mu.Lock()
			if c.connected && c.gen == gen {
				if len(c.refused) >= c.opts.MaxEntries {
					clear(c.refused)
				}
				c.refused[k] = c.opts.Now().Add(c.opts.NegativeMaxAge)
			}
			c.mu.Unlock()
		}
		return ledger.Grant{}, err
	}
	g := contract.GrantFromProto(resp.GetGrant())
	c.mu.Lock()
	// Cache only when no invalidation happened during the call and the stream is up.
	if c.connected && c.gen == gen {
		if len(c.entries) >= c.opts.MaxEntries {
			c.entries = map[string]entry{}
		}
		c.entries[k] = entry{grant: g, expires: c.opts.Now().Add(c.opts.MaxAge)}
	}
	c.mu.Unlock()
	return g, nil
}

// Reserve implements lifecycle.Ledger.
func (c *Client) Reserve(ctx context.Context, r ledger.ReserveRequest) (ledger.Reservation, error) {
	resp, err := call(ctx, c.route, &accountingv1.ReserveRequest{
		RequestId: r.RequestID, KeyId: r.KeyID, Model: r.Model, AmountMicros: r.Amount,
		Pool: contract.PoolToProto(r.Pool), TtlSeconds: int32(r.TTL / time.Second), TokenBound: r.Tokens,
	}, accountingv1.LedgerServiceClient.Reserve)
	if err != nil {
		return ledger.Reservation{}, contract.FromStatus(err)
	}
	out := ledger.Reservation{
		ID: resp.GetReservationId(), AccountID: resp.GetAccountId(), KeyID: r.KeyID, Model: r.Model,
		Amount: resp.GetAmountMicros(), Pool: r.Pool, State: ledger.StateHeld,
	}
	if resp.GetExpiresAt() != nil {
		out.ExpiresAt = resp.GetExpiresAt().AsTime()
	}
	return out, nil
}

// Commit implements lifecycle.Ledger.
func (c *Client) Commit(ctx context.Context, cr ledger.CommitRequest) (ledger.CommitResult, error) {
	resp, err := call(ctx, c.route, &accountingv1.CommitRequest{
		ReservationId: cr.ReservationID, ActualMicros: cr.Actual,
		Usage:         contract.UsageToProto(cr.Usage),
		UpstreamModel: cr.UpstreamModel, Channel: cr.Channel,
	}, accountingv1.LedgerServiceClient.Commit)
	if err != nil {
		return ledger.CommitResult{}, contract.FromStatus(err)
	}
	return ledger.CommitResult{Charged: resp.GetChargedMicros(), Capped: resp.GetCapped(), Replayed: resp.GetReplayed()}, nil
}

// Release implements lifecycle.Ledger.
func (c *Client) Release(ctx context.Context, id, reason string) (ledger.ReleaseResult, error) {
	resp, err := call(ctx, c.route, &accountingv1.ReleaseRequest{ReservationId: id, Reason: reason},
		accountingv1.LedgerServiceClient.Release)
	if err != nil {
		return ledger.ReleaseResult{}, contract.FromStatus(err)
	}
	return ledger.ReleaseResult{State: contract.StateFromProto(resp.GetState()), Charged: resp.GetChargedMicros()}, nil
}

// Renew pushes a held reservation's expiry forward.
func (c *Client) Renew(ctx context.Context, id string, ttl time.Duration) (time.Time, error) {
	resp, err := call(ctx, c.route, &accountingv1.RenewRequest{ReservationId: id, TtlSeconds: int32(ttl / time.Second)},
		accountingv1.LedgerServiceClient.Renew)
	if err != nil {
		return time.Time{}, contract.FromStatus(err)
	}
	return resp.GetExpiresAt().AsTime(), nil
}

// Watch follows accounting's change stream until ctx ends, reconnecting with backoff.
// The cache is used only while a stream is up.
func (c *Client) Watch(ctx context.Context) {
	backoff := c.opts.MinBackoff
	for ctx.Err() == nil {
		healthy := c.watchOnce(ctx)
		c.disconnect()
		if ctx.Err() != nil {
			return
		}
		if healthy {
			backoff = c.opts.MinBackoff
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, c.opts.MaxBackoff)
	}
}

// watchOnce runs one stream; it reports whether the stream delivered anything.
func (c *Client) watchOnce(ctx context.Context) bool {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.rpc.WatchChanges(sctx, &accountingv1.WatchChangesRequest{})
	if err != nil {
		c.opts.Log.Warn("watch changes: connect failed", zap.Error(err))
		return false
	}
	got := false
	for {
		ch, err := stream.Recv()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				c.opts.Log.Warn("watch changes: stream lost", zap.Error(err))
			}
			return got
		}
		got = true
		c.apply(ch)
	}
}

func (c *Client) apply(msg *accountingv1.WatchChangesResponse) {
	ch := contract.ChangeFromProto(msg)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	switch ch.Kind {
	case ledger.ChangeKey, ledger.ChangeAccount:
		if ch.Kind == ledger.ChangeKey {
			clear(c.refused) // maybe a key created (or re-enabled) that was refused
		}
		for k, e := range c.entries {
			if (ch.KeyID != "" && e.grant.KeyID == ch.KeyID) ||
				(ch.AccountID != "" && e.grant.AccountID == ch.AccountID) {
				delete(c.entries, k)
			}
		}
	default: // a reset, or a change nobody can describe: drop everything
		clear(c.entries)
		clear(c.refused)
		c.connected = true
	}
}

func (c *Client) disconnect() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.connected = false
	clear(c.entries)
	clear(c.refused)
}

// RecordVideoTask implements lifecycle.Ledger.
func (c *Client) RecordVideoTask(ctx context.Context, taskID, keyID, model string, origin ledger.TaskOrigin) error {
	_, err := call(ctx, c.route, &accountingv1.RecordVideoTaskRequest{TaskId: taskID, KeyId: keyID, Model: model,
		Channel: origin.Channel, UpstreamTaskId: origin.UpstreamTaskID}, accountingv1.LedgerServiceClient.RecordVideoTask)
	if err != nil {
		return contract.FromStatus(err)
	}
	return nil
}

// GetVideoTask implements lifecycle.Ledger: an unknown task is ledger.ErrNotFound; the
// age is accounting's.
func (c *Client) GetVideoTask(ctx context.Context, taskID string) (lifecycle.VideoTask, error) {
	resp, err := call(ctx, c.route, &accountingv1.GetVideoTaskRequest{TaskId: taskID}, accountingv1.LedgerServiceClient.GetVideoTask)
	if err != nil {
		return lifecycle.VideoTask{}, contract.FromStatus(err)
	}
	task, age := contract.VideoTaskFromProto(resp.GetTask())
	return lifecycle.VideoTask{VideoTask: task, Age: age}, nil
}
