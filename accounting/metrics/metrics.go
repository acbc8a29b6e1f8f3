// Package metrics is the accounting service's Prometheus instrumentation, on a registry
// of its own (served at /metrics on the health listener):
//
//   - accounting_grpc_request_duration_seconds{method,code}: a unary server interceptor
//     times every call by method and gRPC status code (refused credentials included);
//   - accounting_forwarded_calls_total and accounting_redirected_calls_total: the calls
//     a standby forwarded to the owner, and those it answered with the owner's address
//     (CountSecondHop): each a call that takes a second hop;
//   - accounting_ledger_errors_total{op}: a decorator of ledger.Store counts the store
//     operations that failed for a reason other than a refusal, a missing row or a
//     caller that went away: the database errors;
//   - accounting_reservations_expired_total: the same decorator counts the
//     reservations the sweeper expired;
//   - accounting_reservations_archived_total: the settled reservations the sweeper moved
//     to the archive (CountArchive, which counts its failures as ledger errors too);
//   - accounting_ledger_group_transactions_total, accounting_ledger_group_operations_total
//     and accounting_ledger_group_alone_total: what the store's group commit did (read
//     from its counters at each scrape, CountGroupCommit): operations per transaction is
//     the batching the load gets, alone the operations sent back to run on their own;
//   - accounting_ledger_owner: whether this process owns the ledger now (WatchOwner);
//   - accounting_journal_append_errors_total and accounting_ledger_takeovers_total: the
//     owner's journal appends that failed (each stops the owner) and the times this
//     process became the owner (CountJournal, read from the engine at each scrape);
//   - accounting_ledger_refusals_total{op,reason}: the same decorator counts the
//     refusals (insufficient_credits, key_limit_reached, ...) by store operation.
//
// It knows the ledger's error taxonomy (ledger.Refusal, ledger.ErrNotFound) but neither
// PostgreSQL nor the wire. Labels come from fixed sets: method names of the registered
// services, status codes, store method names.
package metrics

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/ledger"
)

// Metrics holds the collectors. Safe for concurrent use.
type Metrics struct {
	reg          *prometheus.Registry
	calls        *prometheus.HistogramVec
	ledgerErrors *prometheus.CounterVec
	refusals     *prometheus.CounterVec
	expired      prometheus.Counter
	archived     prometheus.Counter
	forwarded    prometheus.Counter
	redirected   prometheus.Counter
}

// New returns the collectors, registered on a new registry together with the Go
// runtime and process collectors.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "accounting_grpc_request_duration_seconds",
			Help:    "Time accounting takes to handle each unary gRPC call, by method and status code.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"method", "code"}),
		ledgerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "accounting_ledger_errors_total",
			Help: "Ledger operations that failed inside accounting (database errors; refusals and missing rows are not errors).",
		}, []string{"op"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "accounting_ledger_refusals_total",
			Help: "Ledger operations refused (nothing changed), by store operation and reason (insufficient_credits, key_limit_reached, ...).",
		}, []string{"op", "reason"}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "accounting_reservations_expired_total",
			Help: "Held reservations released by the sweeper because their expiry passed.",
		}),
		archived: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "accounting_reservations_archived_total",
			Help: "Settled reservations the sweeper moved from reservations to reservations_archive.",
		}),
		forwarded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "accounting_forwarded_calls_total",
			Help: "Unary calls this process, a standby, sent on to the ledger's owner.",
		}),
		redirected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "accounting_redirected_calls_total",
			Help: "Unary calls this process, a standby, answered with the owner's address for the caller to call it.",
		}),
	}
	m.reg.MustRegister(m.calls, m.ledgerErrors, m.refusals, m.expired, m.archived, m.forwarded, m.redirected,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ArchiveFunc moves up to limit reservations settled olderThan ago to the archive and
// returns how many it moved (tables.Store.ArchiveSettled).
type ArchiveFunc func(ctx context.Context, olderThan time.Duration, limit int) (int, error)

// CountArchive returns archive counting what it moves
// (accounting_reservations_archived_total) and its failures
// (accounting_ledger_errors_total{op="ArchiveSettled"}).
func (m *Metrics) CountArchive(archive ArchiveFunc) ArchiveFunc {
	return func(ctx context.Context, olderThan time.Duration, limit int) (int, error) {
		n, err := archive(ctx, olderThan, limit)
		m.failed(ctx, "ArchiveSettled", err)
		if err == nil {
			m.archived.Add(float64(n))
		}
		return n, err
	}
}

// Registry returns the registry the collectors are on.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// UnaryServerInterceptor times unary calls by method (the last element of the full
// method name) and status code.
func (m *Metrics) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		m.ObserveCall(methodName(info.FullMethod), err, time.Since(start))
		return resp, err
	}
}

// ObserveCall times one call of method (a method name of the registered services) that
// ended with err, a status error or nil.
func (m *Metrics) ObserveCall(method string, err error, elapsed time.Duration) {
	m.calls.WithLabelValues(method, status.Code(err).String()).Observe(elapsed.Seconds())
}

// CountSecondHop counts a call a standby answered for the owner: redirected (told the
// owner's address) or forwarded.
func (m *Metrics) CountSecondHop(redirected bool) {
	if redirected {
		m.redirected.Inc()
		return
	}
	m.forwarded.Inc()
}

func methodName(full string) string {
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		return full[i+1:]
	}
	return full
}

// failed counts err against op: a refusal by its reason, a failure of the ledger
// itself as an error.
func (m *Metrics) failed(ctx context.Context, op string, err error) {
	if err == nil || errors.Is(err, ledger.ErrNotFound) {
		return
	}
	if r := ledger.ReasonOf(err); r != 0 {
		m.refusals.WithLabelValues(op, r.String()).Inc()
		return
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The caller gave up: not the ledger's failure.
		return
	}
	m.ledgerErrors.WithLabelValues(op).Inc()
}

// CountGroupCommit exports a store's group-commit counters, which read returns (the
// transactions its writer ran, the operations they carried, those sent back to run
// alone), reading them at each scrape.
func (m *Metrics) CountGroupCommit(read func() (transactions, operations, alone int64)) {
	for i, c := range []struct{ name, help string }{
		{"accounting_ledger_group_transactions_total", "Transactions the ledger's group commit ran (a batch of one included)."},
		{"accounting_ledger_group_operations_total", "Reserve, Commit and Release operations the group commit's transactions carried."},
		{"accounting_ledger_group_alone_total", "Operations the group commit sent back to run alone (rows held elsewhere, a failed batch)."},
	} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help}, func() float64 {
			t, o, a := read()
			return float64([...]int64{t, o, a}[i])
		}))
	}
}

// CountJournal exports the journal engine's counters, read at each scrape: the appends
// that failed (appendErrors) and the times this process became the owner (takeovers).
func (m *Metrics) CountJournal(appendErrors, takeovers func() int64) {
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "accounting_journal_append_errors_total",
			Help: "Journal appends of the ledger's owner that failed in the database (each stops the owner, which rebuilds itself as a standby); a takeover's fenced append is not one.",
		}, func() float64 { return float64(appendErrors()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "accounting_ledger_takeovers_total",
			Help: "Times this accounting process became the ledger's owner (its start included).",
		}, func() float64 { return float64(takeovers()) }))
}

// WatchOwner exports accounting_ledger_owner: 1 while owning says this process owns the
// ledger, 0 on a standby, read at each scrape. Its changes over time are the takeovers
// (changes(accounting_ledger_owner[1h]) on the replicas).
func (m *Metrics) WatchOwner(owning func() bool) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "accounting_ledger_owner",
		Help: "1 while this accounting process owns the ledger (decides every operation), 0 on a standby.",
	}, func() float64 {
		if owning() {
			return 1
		}
		return 0
	}))
}

// WrapStore returns st with its failures and expiries counted.
func (m *Metrics) WrapStore(st ledger.Store) ledger.Store { return &countingStore{st: st, m: m} }

// countingStore is WrapStore's decorator. Every method of ledger.Store is listed, so a
// method added to the interface fails to compile here until it is counted too.
type countingStore struct {
	st ledger.Store
	m  *Metrics
}

var _ ledger.Store = (*countingStore)(nil)

func (s *countingStore) CreateAccount(ctx context.Context, a ledger.NewAccount) (ledger.Account, error) {
	v, err := s.st.CreateAccount(ctx, a)
	s.m.failed(ctx, "CreateAccount", err)
	return v, err
}

func (s *countingStore) GetAccount(ctx context.Context, id string) (ledger.Account, error) {
	v, err := s.st.GetAccount(ctx, id)
	s.m.failed(ctx, "GetAccount", err)
	return v, err
}

func (s *countingStore) TopUp(ctx context.Context, accountID string, amount ledger.Micros, idempotencyKey string) (ledger.Account, error) {
	v, err := s.st.TopUp(ctx, accountID, amount, idempotencyKey)
	s.m.failed(ctx, "TopUp", err)
	return v, err
}

func (s *countingStore) SetAccountSuspended(ctx context.Context, accountID string, suspended bool) (ledger.Account, error) {
	v, err := s.st.SetAccountSuspended(ctx, accountID, suspended)
	s.m.failed(ctx, "SetAccountSuspended", err)
	return v, err
}

func (s *countingStore) UpdateAccount(ctx context.Context, u ledger.AccountUpdate) (ledger.Account, error) {
	v, err := s.st.UpdateAccount(ctx, u)
	s.m.failed(ctx, "UpdateAccount", err)
	return v, err
}

func (s *countingStore) CreateKey(ctx context.Context, k ledger.NewKey) (ledger.Key, error) {
	v, err := s.st.CreateKey(ctx, k)
	s.m.failed(ctx, "CreateKey", err)
	return v, err
}

func (s *countingStore) GetKey(ctx context.Context, id string) (ledger.Key, error) {
	v, err := s.st.GetKey(ctx, id)
	s.m.failed(ctx, "GetKey", err)
	return v, err
}

func (s *countingStore) SetKeyDisabled(ctx context.Context, id string, disabled bool) (ledger.Key, error) {
	v, err := s.st.SetKeyDisabled(ctx, id, disabled)
	s.m.failed(ctx, "SetKeyDisabled", err)
	return v, err
}

func (s *countingStore) RevokeKey(ctx context.Context, id string) (ledger.Key, error) {
	v, err := s.st.RevokeKey(ctx, id)
	s.m.failed(ctx, "RevokeKey", err)
	return v, err
}

func (s *countingStore) Authenticate(ctx context.Context, hash []byte) (ledger.Grant, error) {
	v, err := s.st.Authenticate(ctx, hash)
	s.m.failed(ctx, "Authenticate", err)
	return v, err
}

func (s *countingStore) Reserve(ctx context.Context, r ledger.ReserveRequest) (ledger.Reservation, error) {
	v, err := s.st.Reserve(ctx, r)
	s.m.failed(ctx, "Reserve", err)
	return v, err
}

func (s *countingStore) Commit(ctx context.Context, c ledger.CommitRequest) (ledger.CommitResult, error) {
	v, err := s.st.Commit(ctx, c)
	s.m.failed(ctx, "Commit", err)
	return v, err
}

func (s *countingStore) Release(ctx context.Context, reservationID, reason string) (ledger.ReleaseResult, error) {
	v, err := s.st.Release(ctx, reservationID, reason)
	s.m.failed(ctx, "Release", err)
	return v, err
}

func (s *countingStore) Renew(ctx context.Context, reservationID string, ttl time.Duration) (time.Time, error) {
	v, err := s.st.Renew(ctx, reservationID, ttl)
	s.m.failed(ctx, "Renew", err)
	return v, err
}

func (s *countingStore) ExpireDue(ctx context.Context, limit int) (int, error) {
	n, err := s.st.ExpireDue(ctx, limit)
	s.m.failed(ctx, "ExpireDue", err)
	if err == nil && n > 0 {
		s.m.expired.Add(float64(n))
	}
	return n, err
}

func (s *countingStore) RecordVideoTask(ctx context.Context, taskID, keyID, model string, origin ledger.TaskOrigin) (ledger.VideoTask, error) {
	v, err := s.st.RecordVideoTask(ctx, taskID, keyID, model, origin)
	s.m.failed(ctx, "RecordVideoTask", err)
	return v, err
}

func (s *countingStore) GetVideoTask(ctx context.Context, taskID string) (ledger.VideoTask, error) {
	v, err := s.st.GetVideoTask(ctx, taskID)
	s.m.failed(ctx, "GetVideoTask", err)
	return v, err
}

func (s *countingStore) Changes(ctx context.Context) (<-chan ledger.Change, error) {
	ch, err := s.st.Changes(ctx)
	s.m.failed(ctx, "Changes", err)
	return ch, err
}

func (s *countingStore) ListAccounts(ctx context.Context, q ledger.AccountQuery) ([]ledger.Account, error) {
	v, err := s.st.ListAccounts(ctx, q)
	s.m.failed(ctx, "ListAccounts", err)
	return v, err
}

func (s *countingStore) ListKeys(ctx context.Context, accountID string) ([]ledger.Key, error) {
	v, err := s.st.ListKeys(ctx, accountID)
	s.m.failed(ctx, "ListKeys", err)
	return v, err
}

func (s *countingStore) UpdateKey(ctx context.Context, u ledger.KeyUpdate) (ledger.Key, error) {
	v, err := s.st.UpdateKey(ctx, u)
	s.m.failed(ctx, "UpdateKey", err)
	return v, err
}

func (s *countingStore) Usage(ctx context.Context, q ledger.UsageQuery) (ledger.UsageReport, error) {
	v, err := s.st.Usage(ctx, q)
	s.m.failed(ctx, "Usage", err)
	return v, err
}

func (s *countingStore) LedgerEntries(ctx context.Context, accountID string, beforeID int64, limit int) ([]ledger.Entry, error) {
	v, err := s.st.LedgerEntries(ctx, accountID, beforeID, limit)
	s.m.failed(ctx, "LedgerEntries", err)
	return v, err
}

func (s *countingStore) Reconcile(ctx context.Context, q ledger.ReconcileQuery) ([]ledger.ReconcileRow, error) {
	v, err := s.st.Reconcile(ctx, q)
	s.m.failed(ctx, "Reconcile", err)
	return v, err
}

func (s *countingStore) Tiers(ctx context.Context) ([]ledger.Tier, error) {
	v, err := s.st.Tiers(ctx)
	s.m.failed(ctx, "Tiers", err)
	return v, err
}

func (s *countingStore) PutTier(ctx context.Context, t ledger.Tier) (ledger.Tier, error) {
	v, err := s.st.PutTier(ctx, t)
	s.m.failed(ctx, "PutTier", err)
	return v, err
}
