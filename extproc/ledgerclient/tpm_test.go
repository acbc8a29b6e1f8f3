package ledgerclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/extproc/ledgerclient"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// tpmLedger is accounting on the in-memory ledger (decided by the ledger's state
// machine) with one topped-up account whose key is in a project; it returns the
// store, the client and the key's id.
func tpmLedger(t *testing.T) (*servertest.Memory, *servertest.Fixture, *ledgerclient.Client, string) {
	t.Helper()
	mem := servertest.NewMemory()
	f := servertest.Start(t, mem, servertest.Options{})
	_, keys := accountsWithKeys(t, f.Admin(t, servertest.AdminToken), wideTier, 1, 1_000_000)
	acct, err := mem.GetKey(context.Background(), keys[0])
	if err != nil {
		t.Fatal(err)
	}
	decide(t, mem, func(at time.Time) machine.Command {
		return machine.CreateProject{ID: "proj_1", Project: ledger.NewProject{AccountID: acct.AccountID, Name: "web"}, At: at}
	})
	decide(t, mem, func(at time.Time) machine.Command {
		return machine.PlaceKey{Placement: ledger.KeyPlacement{KeyID: keys[0], ProjectID: ledger.To("proj_1")}, At: at}
	})
	return mem, f, ledgerclient.New(f.Ledger(t, servertest.ServiceToken), ledgerclient.Options{}), keys[0]
}

func decide(t *testing.T, mem *servertest.Memory, build func(at time.Time) machine.Command) {
	t.Helper()
	if _, err := mem.Decide(build); err != nil {
		t.Fatal(err)
	}
}

func wantRateRefusal(t *testing.T, err error, limit string, retry bool) {
	t.Helper()
	var r *ledger.Refusal
	if !errors.As(err, &r) || r.Reason != ledger.ReasonRateLimitExceeded || r.Limit != limit {
		t.Fatalf("err = %v, want rate_limit_exceeded on %s", err, limit)
	}
	if retry != (r.RetryAfter >= 1) {
		t.Errorf("retry-after %d, want one: %v", r.RetryAfter, retry)
	}
}

// TestTokenBoundTravelsToTheLedger: the token bound the client sends arrives in the
// ledger's reserve (a key's and a project's tokens-per-minute refuse what their bucket
// cannot hold, with a retry-after, and a bound beyond the limit without one) and the
// tokens a commit reports give the rest back, over the client's calls and over Apply.
func TestTokenBoundTravelsToTheLedger(t *testing.T) {
	ctx := context.Background()
	t.Run("key tpm", func(t *testing.T) {
		mem, _, led, key := tpmLedger(t)
		decide(t, mem, func(at time.Time) machine.Command {
			return machine.PlaceKey{Placement: ledger.KeyPlacement{KeyID: key, TPM: ledger.To(ptr(int64(1000)))}, At: at}
		})
		req := func(id string, tokens int64) ledger.ReserveRequest {
			return ledger.ReserveRequest{RequestID: id, KeyID: key, Model: "m", Amount: 10, Pool: ledger.PoolGeneral, Tokens: tokens}
		}
		first, err := led.Reserve(ctx, req("r1", 600))
		if err != nil {
			t.Fatal(err)
		}
		_, err = led.Reserve(ctx, req("r2", 600))
		wantRateRefusal(t, err, "key:tpm", true)
		_, err = led.Reserve(ctx, req("r3", 1001))
		wantRateRefusal(t, err, "key:tpm", false)
		// The commit keeps 100 of the 600 taken: 900 are in the bucket again.
		if _, err := led.Commit(ctx, ledger.CommitRequest{ReservationID: first.ID, Actual: 5,
			Usage: ledger.Usage{InputTokens: 60, OutputTokens: 40}}); err != nil {
			t.Fatal(err)
		}
		if _, err := led.Reserve(ctx, req("r4", 850)); err != nil {
			t.Fatalf("after the commit gave back 500 tokens: %v", err)
		}
	})
	t.Run("project tpm over the Reserve call", func(t *testing.T) {
		mem, f, _, key := tpmLedger(t)
		decide(t, mem, func(at time.Time) machine.Command {
			return machine.UpdateProject{Update: ledger.ProjectUpdate{ID: "proj_1", TPM: ledger.To(ptr(int64(1000)))}, At: at}
		})
		reserve := func(id string, tokens int64) (*accountingv1.ReserveResponse, error) {
			return f.Ledger(t, servertest.ServiceToken).Reserve(ctx, &accountingv1.ReserveRequest{
				RequestId: id, KeyId: key, Model: "m", AmountMicros: 10, Pool: accountingv1.Pool_POOL_GENERAL, TokenBound: tokens,
			})
		}
		if _, err := reserve("a1", 700); err != nil {
			t.Fatalf("reserve: %v", err)
		}
		_, err := reserve("a2", 700)
		var r *ledger.Refusal
		if !errors.As(contract.FromStatus(err), &r) || r.Reason != ledger.ReasonRateLimitExceeded || r.Limit != "project:proj_1:tpm" || r.RetryAfter < 1 {
			t.Errorf("refusal %v, want rate_limit_exceeded on project:proj_1:tpm with a retry-after", err)
		}
	})
	t.Run("negative bound", func(t *testing.T) {
		_, _, led, key := tpmLedger(t)
		_, err := led.Reserve(ctx, ledger.ReserveRequest{RequestID: "n1", KeyID: key, Model: "m", Pool: ledger.PoolGeneral, Tokens: -1})
		var r *ledger.Refusal
		if !errors.As(err, &r) || r.Reason != ledger.ReasonInvalidArgument {
			t.Errorf("err = %v, want invalid argument", err)
		}
	})
}

func ptr[T any](v T) *T { return &v }
