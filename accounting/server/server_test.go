package server_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/server/servertest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

func refusalOf(t *testing.T, err error) *accountingv1.Refusal {
	t.Helper()
	st, _ := status.FromError(err)
	var found *accountingv1.Refusal
	for _, d := range st.Details() {
		if r, ok := d.(*accountingv1.Refusal); ok {
			if found != nil {
				t.Fatalf("more than one Refusal detail in %v", err)
			}
			found = r
		}
	}
	return found
}

func validReserve() *accountingv1.ReserveRequest {
	return &accountingv1.ReserveRequest{RequestId: "req-1", KeyId: "key_1", Model: "demo-chat", AmountMicros: 10, Pool: accountingv1.Pool_POOL_GENERAL}
}

func TestStoreErrorsMapToStatus(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		wantCode    codes.Code
		wantRefusal *accountingv1.Refusal // nil: no detail expected
	}{
		{"invalid key", ledger.Refuse(ledger.ReasonInvalidAPIKey, ""), codes.Unauthenticated,
			&accountingv1.Refusal{Reason: accountingv1.Reason_REASON_INVALID_API_KEY}},
		{"suspended", ledger.Refuse(ledger.ReasonAccountSuspended, ""), codes.PermissionDenied,
			&accountingv1.Refusal{Reason: accountingv1.Reason_REASON_ACCOUNT_SUSPENDED}},
		{"insufficient credits", ledger.Refuse(ledger.ReasonInsufficientCredits, ""), codes.FailedPrecondition,
			&accountingv1.Refusal{Reason: accountingv1.Reason_REASON_INSUFFICIENT_CREDITS}},
		{"key daily limit", &ledger.Refusal{Reason: ledger.ReasonKeyLimitReached, RetryAfter: 3600, Limit: "daily"}, codes.ResourceExhausted,
			&accountingv1.Refusal{Reason: accountingv1.Reason_REASON_KEY_LIMIT_REACHED, RetryAfterSeconds: 3600, Limit: "daily"}},
		{"concurrency", &ledger.Refusal{Reason: ledger.ReasonConcurrencyLimitExceeded, RetryAfter: ledger.ConcurrencyRetryAfter, Limit: "high_cost"}, codes.ResourceExhausted,
			&accountingv1.Refusal{Reason: accountingv1.Reason_REASON_CONCURRENCY_LIMIT_EXCEEDED, RetryAfterSeconds: 5, Limit: "high_cost"}},
		{"rate limit", &ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, RetryAfter: 17, Limit: "rpm"}, codes.ResourceExhausted,
			&accountingv1.Refusal{Reason: accountingv1.Reason_REASON_RATE_LIMIT_EXCEEDED, RetryAfterSeconds: 17, Limit: "rpm"}},
		{"settled", ledger.Refuse(ledger.ReasonReservationSettled, ""), codes.FailedPrecondition,
			&accountingv1.Refusal{Reason: accountingv1.Reason_REASON_RESERVATION_SETTLED}},
		{"invalid argument", ledger.Refuse(ledger.ReasonInvalidArgument, "unknown tier"), codes.InvalidArgument,
			&accountingv1.Refusal{Reason: accountingv1.Reason_REASON_INVALID_ARGUMENT}},
		{"already exists", ledger.Refuse(ledger.ReasonAlreadyExists, ""), codes.AlreadyExists,
			&accountingv1.Refusal{Reason: accountingv1.Reason_REASON_ALREADY_EXISTS}},
		{"wrapped refusal", fmt.Errorf("reserve: %w", &ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, RetryAfter: 2, Limit: "rpm"}), codes.ResourceExhausted,
			&accountingv1.Refusal{Reason: accountingv1.Reason_REASON_RATE_LIMIT_EXCEEDED, RetryAfterSeconds: 2, Limit: "rpm"}},
		{"not found", fmt.Errorf("get key: %w", ledger.ErrNotFound), codes.NotFound,
			&accountingv1.Refusal{Reason: accountingv1.Reason_REASON_NOT_FOUND}},
		{"account busy (a lock wait timed out)", fmt.Errorf("ledger store: %w", ledger.ErrBusy), codes.Unavailable, nil},
		{"internal", errors.New(`ERROR: relation "reservations" does not exist (SQLSTATE 42P01) SELECT secret`), codes.Internal, nil},
		{"unknown refusal reason", &ledger.Refusal{Reason: ledger.Reason(99)}, codes.Internal, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zap.ErrorLevel)
			mem := servertest.NewMemory()
			f := servertest.Start(t, mem, servertest.Options{Logger: zap.New(core)})
			mem.FailNext(tc.err)
			_, err := f.Ledger(t, servertest.ServiceToken).Reserve(context.Background(), validReserve())
			if got := status.Code(err); got != tc.wantCode {
				t.Fatalf("code = %v, want %v (err %v)", got, tc.wantCode, err)
			}
			got := refusalOf(t, err)
			if diff := cmp.Diff(tc.wantRefusal, got, protocmp.Transform()); diff != "" {
				t.Errorf("refusal detail (-want +got):\n%s", diff)
			}
			if tc.wantCode == codes.Internal {
				msg := status.Convert(err).Message()
				if msg != "internal error" {
					t.Errorf("internal message = %q, want the generic one", msg)
				}
				if logs.FilterMessage("accounting call failed").FilterField(zap.String("method", "Reserve")).Len() != 1 {
					t.Errorf("internal cause not logged once: %v", logs.All())
				}
			} else if logs.Len() != 0 {
				t.Errorf("refusals must not be logged as errors: %v", logs.All())
			}
		})
	}
}

func TestInvalidArgumentsNeverReachTheStore(t *testing.T) {
	ctx := context.Background()
	neg := int64(-1)
	tests := []struct {
		name string
		call func(l accountingv1.LedgerServiceClient, a accountingv1.AdminServiceClient) error
	}{
		{"authenticate short hash", func(l accountingv1.LedgerServiceClient, _ accountingv1.AdminServiceClient) error {
			_, err := l.Authenticate(ctx, &accountingv1.AuthenticateRequest{KeyHash: make([]byte, 31)})
			return err
		}},
		{"authenticate no hash", func(l accountingv1.LedgerServiceClient, _ accountingv1.AdminServiceClient) error {
			_, err := l.Authenticate(ctx, &accountingv1.AuthenticateRequest{})
			return err
		}},
		{"reserve no request id", func(l accountingv1.LedgerServiceClient, _ accountingv1.AdminServiceClient) error {
			r := validReserve()
			r.RequestId = ""
			_, err := l.Reserve(ctx, r)
			return err
		}},
		{"reserve no key id", func(l accountingv1.LedgerServiceClient, _ accountingv1.AdminServiceClient) error {
			r := validReserve()
			r.KeyId = ""
			_, err := l.Reserve(ctx, r)
			return err
		}},
		{"reserve negative amount", func(l accountingv1.LedgerServiceClient, _ accountingv1.AdminServiceClient) error {
			r := validReserve()
			r.AmountMicros = -1
			_, err := l.Reserve(ctx, r)
			return err
		}},
		{"reserve pool unset", func(l accountingv1.LedgerServiceClient, _ accountingv1.AdminServiceClient) error {
			r := validReserve()
			r.Pool = accountingv1.Pool_POOL_UNSPECIFIED
			_, err := l.Reserve(ctx, r)
			return err
		}},
		{"reserve negative ttl", func(l accountingv1.LedgerServiceClient, _ accountingv1.AdminServiceClient) error {
			r := validReserve()
			r.TtlSeconds = -5
			_, err := l.Reserve(ctx, r)
			return err
		}},
		{"reserve ttl too long", func(l accountingv1.LedgerServiceClient, _ accountingv1.AdminServiceClient) error {
			r := validReserve()
			r.TtlSeconds = 7200
			_, err := l.Reserve(ctx, r)
			return err
		}},
		{"commit no id", func(l accountingv1.LedgerServiceClient, _ accountingv1.AdminServiceClient) error {
			_, err := l.Commit(ctx, &accountingv1.CommitRequest{ActualMicros: 1})
			return err
		}},
		{"commit negative actual", func(l accountingv1.LedgerServiceClient, _ accountingv1.AdminServiceClient) error {
			_, err := l.Commit(ctx, &accountingv1.CommitRequest{ReservationId: "r", ActualMicros: -1})
			return err
		}},
		{"commit negative usage", func(l accountingv1.LedgerServiceClient, _ accountingv1.AdminServiceClient) error {
			_, err := l.Commit(ctx, &accountingv1.CommitRequest{ReservationId: "r", Usage: &accountingv1.Usage{Units: map[string]int64{"images": -1}}})
			return err
		}},
		{"commit components that miss the actual cost", func(l accountingv1.LedgerServiceClient, _ accountingv1.AdminServiceClient) error {
			_, err := l.Commit(ctx, &accountingv1.CommitRequest{ReservationId: "r", ActualMicros: 11, Usage: &accountingv1.Usage{
				Components: []*accountingv1.ChargeComponent{{Name: "input", Units: 2_000, PricePerMtok: 5_000, AmountMicros: 10}}}})
			return err
		}},
		{"commit a component priced wrong", func(l accountingv1.LedgerServiceClient, _ accountingv1.AdminServiceClient) error {
			_, err := l.Commit(ctx, &accountingv1.CommitRequest{ReservationId: "r", ActualMicros: 9, Usage: &accountingv1.Usage{
				Components: []*accountingv1.ChargeComponent{{Name: "input", Units: 2_000, PricePerMtok: 5_000, AmountMicros: 9}}}})
			return err
		}},
		{"commit an unknown component", func(l accountingv1.LedgerServiceClient, _ accountingv1.AdminServiceClient) error {
			_, err := l.Commit(ctx, &accountingv1.CommitRequest{ReservationId: "r", ActualMicros: 10, Usage: &accountingv1.Usage{
				Components: []*accountingv1.ChargeComponent{{Name: "tips", Units: 2_000, PricePerMtok: 5_000, AmountMicros: 10}}}})
			return err
		}},
		{"reconcile without days", func(_ accountingv1.LedgerServiceClient, a accountingv1.AdminServiceClient) error {
			_, err := a.Reconcile(ctx, &accountingv1.ReconcileRequest{FromDay: "2026-03-01"})
			return err
		}},
		{"reconcile a bad day", func(_ accountingv1.LedgerServiceClient, a accountingv1.AdminServiceClient) error {
			_, err := a.Reconcile(ctx, &accountingv1.ReconcileRequest{FromDay: "2026-02-30", ToDay: "2026-03-01"})
			return err
		}},
		{"reconcile a reversed range", func(_ accountingv1.LedgerServiceClient, a accountingv1.AdminServiceClient) error {
			_, err := a.Reconcile(ctx, &accountingv1.ReconcileRequest{FromDay: "2026-03-02", ToDay: "2026-03-01"})
			return err
		}},
		{"release no id", func(l accountingv1.LedgerServiceClient, _ accountingv1.AdminServiceClient) error {
			_, err := l.Release(ctx, &accountingv1.ReleaseRequest{})
			return err
		}},
		{"renew no id", func(l accountingv1.LedgerServiceClient, _ accountingv1.AdminServiceClient) error {
			_, err := l.Renew(ctx, &accountingv1.RenewRequest{TtlSeconds: 10})
			return err
		}},
		{"record task no key", func(l accountingv1.LedgerServiceClient, _ accountingv1.AdminServiceClient) error {
			_, err := l.RecordVideoTask(ctx, &accountingv1.RecordVideoTaskRequest{TaskId: "t"})
			return err
		}},
		{"get task no id", func(l accountingv1.LedgerServiceClient, _ accountingv1.AdminServiceClient) error {
			_, err := l.GetVideoTask(ctx, &accountingv1.GetVideoTaskRequest{})
			return err
		}},
		{"top-up zero", func(_ accountingv1.LedgerServiceClient, a accountingv1.AdminServiceClient) error {
			_, err := a.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: "a"})
			return err
		}},
		{"top-up negative", func(_ accountingv1.LedgerServiceClient, a accountingv1.AdminServiceClient) error {
			_, err := a.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: "a", AmountMicros: -5})
			return err
		}},
		{"top-up no account", func(_ accountingv1.LedgerServiceClient, a accountingv1.AdminServiceClient) error {
			_, err := a.TopUp(ctx, &accountingv1.TopUpRequest{AmountMicros: 5})
			return err
		}},
		{"get account no id", func(_ accountingv1.LedgerServiceClient, a accountingv1.AdminServiceClient) error {
			_, err := a.GetAccount(ctx, &accountingv1.GetAccountRequest{})
			return err
		}},
		{"create key no account", func(_ accountingv1.LedgerServiceClient, a accountingv1.AdminServiceClient) error {
			_, err := a.CreateKey(ctx, &accountingv1.CreateKeyRequest{})
			return err
		}},
		{"create key negative limit", func(_ accountingv1.LedgerServiceClient, a accountingv1.AdminServiceClient) error {
			_, err := a.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: "a", DailyLimitMicros: &neg})
			return err
		}},
		{"create key bad expiry", func(_ accountingv1.LedgerServiceClient, a accountingv1.AdminServiceClient) error {
			_, err := a.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: "a", ExpiresAt: &timestamppb.Timestamp{Nanos: -1}})
			return err
		}},
		{"create key empty model", func(_ accountingv1.LedgerServiceClient, a accountingv1.AdminServiceClient) error {
			_, err := a.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: "a", AllowedModels: []string{"demo-chat", ""}})
			return err
		}},
		{"get key no id", func(_ accountingv1.LedgerServiceClient, a accountingv1.AdminServiceClient) error {
			_, err := a.GetKey(ctx, &accountingv1.GetKeyRequest{})
			return err
		}},
		{"revoke no id", func(_ accountingv1.LedgerServiceClient, a accountingv1.AdminServiceClient) error {
			_, err := a.RevokeKey(ctx, &accountingv1.RevokeKeyRequest{})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := servertest.NewMemory()
			f := servertest.Start(t, mem, servertest.Options{})
			// Were the store reached, this error would come back as Internal.
			sentinel := errors.New("store reached")
			mem.FailNext(sentinel)
			err := tc.call(f.Ledger(t, servertest.AdminToken), f.Admin(t, servertest.AdminToken))
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("code = %v, want InvalidArgument (err %v)", status.Code(err), err)
			}
			if r := refusalOf(t, err); r.GetReason() != accountingv1.Reason_REASON_INVALID_ARGUMENT {
				t.Errorf("refusal = %v, want REASON_INVALID_ARGUMENT", r)
			}
		})
	}
}

func TestCredentials(t *testing.T) {
	f := servertest.Start(t, servertest.NewMemory(), servertest.Options{})
	ctx := context.Background()
	ledgerCall := func(token string) error {
		_, err := f.Ledger(t, token).GetVideoTask(ctx, &accountingv1.GetVideoTaskRequest{TaskId: "nope"})
		return err
	}
	adminCall := func(token string) error {
		_, err := f.Admin(t, token).GetAccount(ctx, &accountingv1.GetAccountRequest{AccountId: "nope"})
		return err
	}
	watchCall := func(token string) error {
		st, err := f.Ledger(t, token).WatchChanges(ctx, &accountingv1.WatchChangesRequest{})
		if err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
	tests := []struct {
		name  string
		call  func(string) error
		token string
		// want is the code when the credential is accepted (the store answers NotFound
		// or the stream starts) or Unauthenticated.
		want codes.Code
	}{
		{"ledger without token", ledgerCall, "", codes.Unauthenticated},
		{"ledger wrong token", ledgerCall, "not-the-service-token-at-all", codes.Unauthenticated},
		{"ledger service token", ledgerCall, servertest.ServiceToken, codes.NotFound},
		{"ledger admin token", ledgerCall, servertest.AdminToken, codes.NotFound},
		{"admin without token", adminCall, "", codes.Unauthenticated},
		{"admin wrong token", adminCall, servertest.AdminToken + "x", codes.Unauthenticated},
		{"admin service token", adminCall, servertest.ServiceToken, codes.Unauthenticated},
		{"admin admin token", adminCall, servertest.AdminToken, codes.NotFound},
		{"watch without token", watchCall, "", codes.Unauthenticated},
		{"watch service token", watchCall, servertest.ServiceToken, codes.OK},
	}
	var messages []string
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(tc.token)
			if got := status.Code(err); got != tc.want {
				t.Fatalf("code = %v, want %v (err %v)", got, tc.want, err)
			}
			if tc.want == codes.Unauthenticated {
				if r := refusalOf(t, err); r != nil {
					t.Errorf("credential failure carries a ledger refusal %v", r)
				}
				messages = append(messages, status.Convert(err).Message())
			}
		})
	}
	for _, m := range messages {
		if m != messages[0] {
			t.Errorf("credential failures differ (%q vs %q): they must not say which", m, messages[0])
		}
	}
}

func TestKeyLifecycle(t *testing.T) {
	mem := servertest.NewMemory()
	f := servertest.Start(t, mem, servertest.Options{})
	ctx := context.Background()
	admin := f.Admin(t, servertest.AdminToken)
	led := f.Ledger(t, servertest.ServiceToken)

	acc, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if acc.GetAccount().GetTier() != "default" {
		t.Errorf("tier = %q, want default", acc.GetAccount().GetTier())
	}
	acctID := acc.GetAccount().GetId()
	if _, err := admin.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: acctID, AmountMicros: 10_000_000}); err != nil {
		t.Fatal(err)
	}
	daily := int64(1_000_000)
	exp := time.Date(2099, 1, 2, 3, 4, 5, 0, time.UTC)
	created, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{
		AccountId: acctID, Name: "ci", AllowedModels: []string{"demo-chat"},
		DailyLimitMicros: &daily, ExpiresAt: timestamppb.New(exp), AdminCreated: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	secret := created.GetSecret()
	if !regexp.MustCompile(`^gw-[A-Za-z0-9_-]{43,}$`).MatchString(secret) {
		t.Fatalf("secret %q has the wrong shape", secret)
	}
	key := created.GetKey()
	wantHash := sha256.Sum256([]byte(secret))
	if got := mem.HashOf(key.GetId()); string(got) != string(wantHash[:]) {
		t.Errorf("stored hash is not SHA-256 of the secret")
	}
	if key.GetPrefix() != secret[:8] {
		t.Errorf("prefix = %q, want %q", key.GetPrefix(), secret[:8])
	}
	if strings.Contains(key.String(), secret[8:]) {
		t.Errorf("key record contains the secret")
	}
	other, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: acctID})
	if err != nil {
		t.Fatal(err)
	}
	if other.GetSecret() == secret {
		t.Fatal("two keys got the same secret")
	}

	got, err := led.Authenticate(ctx, &accountingv1.AuthenticateRequest{KeyHash: wantHash[:]})
	if err != nil {
		t.Fatal(err)
	}
	want := &accountingv1.KeyGrant{
		KeyId: key.GetId(), AccountId: acctID, AllowedModels: []string{"demo-chat"},
		DailyLimitMicros: &daily, ExpiresAt: timestamppb.New(exp), AdminCreated: true,
		Tier: "default", AccountToppedUp: true,
	}
	if diff := cmp.Diff(want, got.GetGrant(), protocmp.Transform()); diff != "" {
		t.Errorf("grant (-want +got):\n%s", diff)
	}

	res, err := led.Reserve(ctx, &accountingv1.ReserveRequest{RequestId: "r1", KeyId: key.GetId(), AmountMicros: 400, Pool: accountingv1.Pool_POOL_GENERAL})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetExpiresAt() == nil || res.GetAmountMicros() != 400 || res.GetAccountId() != acctID {
		t.Errorf("reserve response %v", res)
	}
	com, err := led.Commit(ctx, &accountingv1.CommitRequest{ReservationId: res.GetReservationId(), ActualMicros: 500})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&accountingv1.CommitResponse{ChargedMicros: 400, Capped: true}, com, protocmp.Transform()); diff != "" {
		t.Errorf("commit (-want +got):\n%s", diff)
	}
	rel, err := led.Release(ctx, &accountingv1.ReleaseRequest{ReservationId: res.GetReservationId()})
	if err != nil {
		t.Fatal(err)
	}
	if rel.GetState() != accountingv1.ReservationState_RESERVATION_STATE_COMMITTED || rel.GetChargedMicros() != 400 {
		t.Errorf("release after commit = %v", rel)
	}
	shown, err := admin.GetAccount(ctx, &accountingv1.GetAccountRequest{AccountId: acctID})
	if err != nil {
		t.Fatal(err)
	}
	if a := shown.GetAccount(); a.GetBalanceMicros() != 9_999_600 || a.GetAvailableMicros() != 9_999_600 || a.GetReservedMicros() != 0 {
		t.Errorf("account after commit = %v", a)
	}

	if _, err := admin.RevokeKey(ctx, &accountingv1.RevokeKeyRequest{KeyId: key.GetId()}); err != nil {
		t.Fatal(err)
	}
	_, err = led.Authenticate(ctx, &accountingv1.AuthenticateRequest{KeyHash: wantHash[:]})
	if status.Code(err) != codes.Unauthenticated || refusalOf(t, err).GetReason() != accountingv1.Reason_REASON_INVALID_API_KEY {
		t.Errorf("authenticate revoked key: %v", err)
	}
}

func TestVideoTaskAgeUsesServerClock(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	mem := servertest.NewMemory()
	mem.Now = clock
	f := servertest.Start(t, mem, servertest.Options{Now: clock})
	ctx := context.Background()
	admin := f.Admin(t, servertest.AdminToken)
	acc, _ := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{Tier: "tight"})
	k, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: acc.GetAccount().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	led := f.Ledger(t, servertest.ServiceToken)
	if _, err := led.RecordVideoTask(ctx, &accountingv1.RecordVideoTaskRequest{TaskId: "vid_1", KeyId: k.GetKey().GetId(), Model: "demo-video"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(90*time.Second + 500*time.Millisecond)
	mu.Unlock()
	got, err := led.GetVideoTask(ctx, &accountingv1.GetVideoTaskRequest{TaskId: "vid_1"})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetTask().GetAgeSeconds() != 90 || got.GetTask().GetAccountId() != acc.GetAccount().GetId() {
		t.Errorf("task = %v, want age 90 s", got.GetTask())
	}
	_, err = led.GetVideoTask(ctx, &accountingv1.GetVideoTaskRequest{TaskId: "vid_2"})
	if status.Code(err) != codes.NotFound || refusalOf(t, err).GetReason() != accountingv1.Reason_REASON_NOT_FOUND {
		t.Errorf("unknown task: %v", err)
	}
}
