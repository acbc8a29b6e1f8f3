// Package server is the accounting gRPC API: it implements accountingv1's
// LedgerService and AdminService over a ledger.Store.
//
// It is the only place where the wire types meet the domain: requests are validated
// and converted here, and every store error is mapped through one table (errors.go)
// to a gRPC status. Refusals and missing rows carry an accountingv1.Refusal detail so
// callers never parse messages; anything else is a generic Internal error whose cause
// is logged, never sent. The package does not know PostgreSQL, and it never logs a
// secret or a key hash.
package server

import (
	"context"
	"io"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// MaxReservationTTL is the longest reservation lifetime a caller may ask for. A zero
// ttl passes through as zero: the store applies its configured default.
const MaxReservationTTL = time.Hour

// Options tune a Server; the zero value is usable.
type Options struct {
	// Logger receives internal errors; nil means no logging.
	Logger *zap.Logger
	// Now is the clock for video task ages; nil means time.Now.
	Now func() time.Time
	// Random is the source of key secrets; nil means crypto/rand.
	Random io.Reader
	// Observe, when set, is told of each operation an Apply made: its method
	// ("Reserve", "Commit", "Release"), the status error its own call would have
	// returned (nil when it succeeded) and how long it took. The unary interceptors do
	// not see them; Apply as a whole is a call of its own.
	Observe func(method string, err error, elapsed time.Duration)
	// Webhooks keeps the alert subscriptions; nil: the webhook calls are unimplemented.
	Webhooks ledger.Webhooks
	// Members keeps who may do what; nil: the member calls are unimplemented, and a
	// call made for a person is refused (Authorize).
	Members ledger.Members
	// Audit lists the audit log (the engine's Store: once the tables hold every
	// decision). Set, each change's call carries a ledger.AuditNote that the store
	// making the change records with it; nil: nothing is recorded and ListAudit is
	// unimplemented.
	Audit ledger.Audit
}

// Server holds the two services. Register both with Register.
type Server struct {
	store   ledger.Store
	hub     *Hub
	log     *zap.Logger
	now     func() time.Time
	random  io.Reader
	observe func(method string, err error, elapsed time.Duration)
	hooks   ledger.Webhooks
	members ledger.Members
	audit   ledger.Audit
}

// New returns a Server over store whose WatchChanges streams are fed by hub (whose Run
// the caller starts).
func New(store ledger.Store, hub *Hub, opts Options) *Server {
	s := &Server{store: store, hub: hub, log: opts.Logger, now: opts.Now, random: opts.Random, observe: opts.Observe, hooks: opts.Webhooks, members: opts.Members, audit: opts.Audit}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.random == nil {
		s.random = defaultRandom
	}
	return s
}

// Register registers LedgerService and AdminService on r.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	accountingv1.RegisterLedgerServiceServer(r, &LedgerServer{s: s})
	accountingv1.RegisterAdminServiceServer(r, &AdminServer{s: s})
}

func (s *Server) fail(ctx context.Context, method string, err error) error {
	return toStatus(ctx, s.log, method, err)
}

func ttlFromProto(seconds int32) (time.Duration, error) {
	switch {
	case seconds < 0:
		return 0, invalidArgument("ttl_seconds must not be negative")
	}
	ttl := time.Duration(seconds) * time.Second
	if ttl > MaxReservationTTL {
		return 0, invalidArgument("ttl_seconds exceeds the maximum of 3600")
	}
	return ttl, nil
}

// LedgerServer implements accountingv1.LedgerServiceServer.
type LedgerServer struct {
	accountingv1.UnimplementedLedgerServiceServer
	s *Server
}

var _ accountingv1.LedgerServiceServer = (*LedgerServer)(nil)

// Authenticate resolves a key hash to its grant.
func (l *LedgerServer) Authenticate(ctx context.Context, req *accountingv1.AuthenticateRequest) (*accountingv1.AuthenticateResponse, error) {
	if len(req.GetKeyHash()) != 32 {
		return nil, invalidArgument("key_hash must be 32 bytes")
	}
	g, err := l.s.store.Authenticate(ctx, req.GetKeyHash())
	if err != nil {
		return nil, l.s.fail(ctx, "Authenticate", err)
	}
	return &accountingv1.AuthenticateResponse{Grant: contract.GrantToProto(g)}, nil
}

// Reserve holds a request's maximum cost.
func (l *LedgerServer) Reserve(ctx context.Context, req *accountingv1.ReserveRequest) (*accountingv1.ReserveResponse, error) {
	switch {
	case req.GetRequestId() == "":
		return nil, invalidArgument("request_id is required")
	case req.GetKeyId() == "":
		return nil, invalidArgument("key_id is required")
	case req.GetAmountMicros() < 0:
		return nil, invalidArgument("amount_micros must not be negative")
	case req.GetTokenBound() < 0:
		return nil, invalidArgument("token_bound must not be negative")
	}
	pool, ok := contract.PoolFromProto(req.GetPool())
	if !ok {
		return nil, invalidArgument("pool must be POOL_GENERAL or POOL_HIGH_COST")
	}
	ttl, err := ttlFromProto(req.GetTtlSeconds())
	if err != nil {
		return nil, err
	}
	r, err := l.s.store.Reserve(ctx, ledger.ReserveRequest{
		RequestID: req.GetRequestId(),
		KeyID:     req.GetKeyId(),
		Model:     req.GetModel(),
		Amount:    req.GetAmountMicros(),
		Pool:      pool,
		TTL:       ttl,
		Tokens:    req.GetTokenBound(),
	})
	if err != nil {
		return nil, l.s.fail(ctx, "Reserve", err)
	}
	return &accountingv1.ReserveResponse{
		ReservationId: r.ID,
		AccountId:     r.AccountID,
		AmountMicros:  r.Amount,
		ExpiresAt:     contract.Timestamp(r.ExpiresAt),
	}, nil
}

// Commit charges a reservation's actual cost once.
func (l *LedgerServer) Commit(ctx context.Context, req *accountingv1.CommitRequest) (*accountingv1.CommitResponse, error) {
	u := req.GetUsage()
	switch {
	case req.GetReservationId() == "":
		return nil, invalidArgument("reservation_id is required")
	case req.GetActualMicros() < 0:
		return nil, invalidArgument("actual_micros must not be negative")
	case u.GetInputTokens() < 0 || u.GetOutputTokens() < 0:
		return nil, invalidArgument("usage token counts must not be negative")
	}
	for _, v := range u.GetUnits() {
		if v < 0 {
			return nil, invalidArgument("usage units must not be negative")
		}
	}
	usage := contract.UsageFromProto(u)
	// A breakdown that does not add up to the charge is refused before anything is
	// charged: the ledger would keep a statement that cannot be checked.
	if err := ledger.ValidateComponents(req.GetActualMicros(), usage.Components); err != nil {
		return nil, invalidArgument(err.Error())
	}
	res, err := l.s.store.Commit(ctx, ledger.CommitRequest{
		ReservationID: req.GetReservationId(),
		Actual:        req.GetActualMicros(),
		Usage:         usage,
		UpstreamModel: req.GetUpstreamModel(),
		Channel:       req.GetChannel(),
	})
	if err != nil {
		return nil, l.s.fail(ctx, "Commit", err)
	}
	return &accountingv1.CommitResponse{ChargedMicros: res.Charged, Capped: res.Capped, Replayed: res.Replayed}, nil
}

// Release returns a held reservation without charge.
func (l *LedgerServer) Release(ctx context.Context, req *accountingv1.ReleaseRequest) (*accountingv1.ReleaseResponse, error) {
	if req.GetReservationId() == "" {
		return nil, invalidArgument("reservation_id is required")
	}
	res, err := l.s.store.Release(ctx, req.GetReservationId(), req.GetReason())
	if err != nil {
		return nil, l.s.fail(ctx, "Release", err)
	}
	return &accountingv1.ReleaseResponse{State: contract.StateToProto(res.State), ChargedMicros: res.Charged}, nil
}

// Renew pushes a held reservation's expiry forward.
func (l *LedgerServer) Renew(ctx context.Context, req *accountingv1.RenewRequest) (*accountingv1.RenewResponse, error) {
	if req.GetReservationId() == "" {
		return nil, invalidArgument("reservation_id is required")
	}
	ttl, err := ttlFromProto(req.GetTtlSeconds())
	if err != nil {
		return nil, err
	}
	exp, err := l.s.store.Renew(ctx, req.GetReservationId(), ttl)
	if err != nil {
		return nil, l.s.fail(ctx, "Renew", err)
	}
	return &accountingv1.RenewResponse{ExpiresAt: contract.Timestamp(exp)}, nil
}

// WatchChanges streams a RESET, then every key and account change, until the caller
// leaves or the hub stops (then the stream ends with Unavailable and the caller
// reconnects, getting a RESET first again).
func (l *LedgerServer) WatchChanges(_ *accountingv1.WatchChangesRequest, stream grpc.ServerStreamingServer[accountingv1.WatchChangesResponse]) error {
	ctx := stream.Context()
	sub, ok := l.s.hub.subscribe()
	if !ok {
		return status.Error(codes.Unavailable, "change feed is shutting down")
	}
	defer l.s.hub.unsubscribe(sub)
	// Subscribed before the RESET goes out: every change after this point is queued,
	// and everything before it is covered by the RESET.
	if err := stream.Send(contract.ChangeToProto(ledger.Change{Kind: ledger.ChangeReset})); err != nil {
		return err
	}
	for {
		c, ok, err := sub.next(ctx)
		if err != nil {
			return status.FromContextError(err).Err()
		}
		if !ok {
			return status.Error(codes.Unavailable, "change feed closed")
		}
		if err := stream.Send(contract.ChangeToProto(c)); err != nil {
			return err
		}
	}
}

// RecordVideoTask stores who submitted a video task.
func (l *LedgerServer) RecordVideoTask(ctx context.Context, req *accountingv1.RecordVideoTaskRequest) (*accountingv1.RecordVideoTaskResponse, error) {
	switch {
	case req.GetTaskId() == "":
		return nil, invalidArgument("task_id is required")
	case req.GetKeyId() == "":
		return nil, invalidArgument("key_id is required")
	}
	t, err := l.s.store.RecordVideoTask(ctx, req.GetTaskId(), req.GetKeyId(), req.GetModel(),
		ledger.TaskOrigin{Channel: req.GetChannel(), UpstreamTaskID: req.GetUpstreamTaskId()})
	if err != nil {
		return nil, l.s.fail(ctx, "RecordVideoTask", err)
	}
	return &accountingv1.RecordVideoTaskResponse{Task: contract.VideoTaskToProto(t, l.s.now())}, nil
}

// GetVideoTask returns a task's owner and age.
func (l *LedgerServer) GetVideoTask(ctx context.Context, req *accountingv1.GetVideoTaskRequest) (*accountingv1.GetVideoTaskResponse, error) {
	if req.GetTaskId() == "" {
		return nil, invalidArgument("task_id is required")
	}
	t, err := l.s.store.GetVideoTask(ctx, req.GetTaskId())
	if err != nil {
		return nil, l.s.fail(ctx, "GetVideoTask", err)
	}
	return &accountingv1.GetVideoTaskResponse{Task: contract.VideoTaskToProto(t, l.s.now())}, nil
}

// AdminServer implements accountingv1.AdminServiceServer.
type AdminServer struct {
	accountingv1.UnimplementedAdminServiceServer
	s *Server
}

var _ accountingv1.AdminServiceServer = (*AdminServer)(nil)

// CreateAccount opens an account in a tier ("default" when none is given).
func (a *AdminServer) CreateAccount(ctx context.Context, req *accountingv1.CreateAccountRequest) (*accountingv1.CreateAccountResponse, error) {
	if err := ledger.CheckAccountLabel(req.GetLabel()); err != nil {
		return nil, invalidArgument(err.Error())
	}
	acc, err := a.s.store.CreateAccount(ctx, ledger.NewAccount{Tier: req.GetTier(), Label: req.GetLabel()})
	if err != nil {
		return nil, a.s.fail(ctx, "CreateAccount", err)
	}
	return &accountingv1.CreateAccountResponse{Account: contract.AccountToProto(acc)}, nil
}

// GetAccount returns an account.
func (a *AdminServer) GetAccount(ctx context.Context, req *accountingv1.GetAccountRequest) (*accountingv1.GetAccountResponse, error) {
	if req.GetAccountId() == "" {
		return nil, invalidArgument("account_id is required")
	}
	acc, err := a.s.store.GetAccount(ctx, req.GetAccountId())
	if err != nil {
		return nil, a.s.fail(ctx, "GetAccount", err)
	}
	return &accountingv1.GetAccountResponse{Account: contract.AccountToProto(acc)}, nil
}

// TopUp adds credits to an account.
func (a *AdminServer) TopUp(ctx context.Context, req *accountingv1.TopUpRequest) (*accountingv1.TopUpResponse, error) {
	switch {
	case req.GetAccountId() == "":
		return nil, invalidArgument("account_id is required")
	case req.GetAmountMicros() <= 0:
		return nil, invalidArgument("amount_micros must be positive")
	}
	acc, err := a.s.store.TopUp(ctx, req.GetAccountId(), req.GetAmountMicros(), req.GetIdempotencyKey())
	if err != nil {
		return nil, a.s.fail(ctx, "TopUp", err)
	}
	return &accountingv1.TopUpResponse{Account: contract.AccountToProto(acc)}, nil
}

// SetAccountSuspended suspends or unsuspends an account.
func (a *AdminServer) SetAccountSuspended(ctx context.Context, req *accountingv1.SetAccountSuspendedRequest) (*accountingv1.SetAccountSuspendedResponse, error) {
	if req.GetAccountId() == "" {
		return nil, invalidArgument("account_id is required")
	}
	acc, err := a.s.store.SetAccountSuspended(ctx, req.GetAccountId(), req.GetSuspended())
	if err != nil {
		return nil, a.s.fail(ctx, "SetAccountSuspended", err)
	}
	return &accountingv1.SetAccountSuspendedResponse{Account: contract.AccountToProto(acc)}, nil
}

// UpdateAccount changes the settings the request carries.
func (a *AdminServer) UpdateAccount(ctx context.Context, req *accountingv1.UpdateAccountRequest) (*accountingv1.UpdateAccountResponse, error) {
	if req.GetAccountId() == "" {
		return nil, invalidArgument("account_id is required")
	}
	u := ledger.AccountUpdate{ID: req.GetAccountId()}
	if req.Label != nil {
		if err := ledger.CheckAccountLabel(req.GetLabel()); err != nil {
			return nil, invalidArgument(err.Error())
		}
		u.Label = ledger.To(req.GetLabel())
	}
	switch {
	case req.LowBalanceMicros != nil && req.GetClearLowBalance():
		return nil, invalidArgument("low_balance_micros and clear_low_balance exclude each other")
	case req.LowBalanceMicros != nil:
		if req.GetLowBalanceMicros() < 0 {
			return nil, invalidArgument("a low-balance threshold must not be negative")
		}
		u.LowBalance = ledger.To(ptrTo(req.GetLowBalanceMicros()))
	case req.GetClearLowBalance():
		u.LowBalance = ledger.To[*ledger.Micros](nil)
	}
	acc, err := a.s.store.UpdateAccount(ctx, u)
	if err != nil {
		return nil, a.s.fail(ctx, "UpdateAccount", err)
	}
	return &accountingv1.UpdateAccountResponse{Account: contract.AccountToProto(acc)}, nil
}

// CreateKey generates a key secret, stores only its hash and prefix, and returns the
// secret once.
func (a *AdminServer) CreateKey(ctx context.Context, req *accountingv1.CreateKeyRequest) (*accountingv1.CreateKeyResponse, error) {
	switch {
	case req.GetAccountId() == "":
		return nil, invalidArgument("account_id is required")
	case req.DailyLimitMicros != nil && req.GetDailyLimitMicros() < 0:
		return nil, invalidArgument("daily_limit_micros must not be negative")
	case req.MonthlyLimitMicros != nil && req.GetMonthlyLimitMicros() < 0:
		return nil, invalidArgument("monthly_limit_micros must not be negative")
	}
	if err := ledger.CheckKeyName(req.GetName()); err != nil {
		return nil, invalidArgument(err.Error())
	}
	if err := ledger.CheckAllowedModels(req.GetAllowedModels()); err != nil {
		return nil, invalidArgument(err.Error())
	}
	var expires *time.Time
	if req.GetExpiresAt() != nil {
		if err := req.GetExpiresAt().CheckValid(); err != nil {
			return nil, invalidArgument("expires_at is not a valid timestamp")
		}
		t := req.GetExpiresAt().AsTime()
		expires = &t
	}
	nk := ledger.NewKey{
		AccountID:     req.GetAccountId(),
		Name:          req.GetName(),
		AllowedModels: append([]string(nil), req.GetAllowedModels()...),
		DailyLimit:    copyMicros(req.DailyLimitMicros),
		MonthlyLimit:  copyMicros(req.MonthlyLimitMicros),
		ExpiresAt:     expires,
		AdminCreated:  req.GetAdminCreated(),
		ProjectID:     req.GetProjectId(),
		RPM:           copyMicros(req.Rpm),
		TPM:           copyMicros(req.Tpm),
	}
	if err := a.fitsProjects(ctx, nk); err != nil {
		return nil, err
	}
	secret, err := NewSecret(a.s.random)
	if err != nil {
		return nil, a.s.fail(ctx, "CreateKey", err)
	}
	nk.Hash, nk.Prefix = HashSecret(secret), secretPrefix(secret)
	k, err := a.s.store.CreateKey(ctx, nk)
	if err != nil {
		return nil, a.s.fail(ctx, "CreateKey", err)
	}
	return &accountingv1.CreateKeyResponse{Key: contract.KeyToProto(k), Secret: secret}, nil
}

// GetKey returns a key's record and current spend.
func (a *AdminServer) GetKey(ctx context.Context, req *accountingv1.GetKeyRequest) (*accountingv1.GetKeyResponse, error) {
	if req.GetKeyId() == "" {
		return nil, invalidArgument("key_id is required")
	}
	k, err := a.s.store.GetKey(ctx, req.GetKeyId())
	if err != nil {
		return nil, a.s.fail(ctx, "GetKey", err)
	}
	return &accountingv1.GetKeyResponse{Key: contract.KeyToProto(k)}, nil
}

// SetKeyDisabled disables or enables a key.
func (a *AdminServer) SetKeyDisabled(ctx context.Context, req *accountingv1.SetKeyDisabledRequest) (*accountingv1.SetKeyDisabledResponse, error) {
	if req.GetKeyId() == "" {
		return nil, invalidArgument("key_id is required")
	}
	k, err := a.s.store.SetKeyDisabled(ctx, req.GetKeyId(), req.GetDisabled())
	if err != nil {
		return nil, a.s.fail(ctx, "SetKeyDisabled", err)
	}
	return &accountingv1.SetKeyDisabledResponse{Key: contract.KeyToProto(k)}, nil
}

// RevokeKey revokes a key for good.
func (a *AdminServer) RevokeKey(ctx context.Context, req *accountingv1.RevokeKeyRequest) (*accountingv1.RevokeKeyResponse, error) {
	if req.GetKeyId() == "" {
		return nil, invalidArgument("key_id is required")
	}
	k, err := a.s.store.RevokeKey(ctx, req.GetKeyId())
	if err != nil {
		return nil, a.s.fail(ctx, "RevokeKey", err)
	}
	return &accountingv1.RevokeKeyResponse{Key: contract.KeyToProto(k)}, nil
}
