package server_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/accounting/server/servertest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// Each operation of an Apply is answered as its own call would be, in order, and one
// refused or malformed operation fails no other.
func TestApplyAnswersEachOperationAsItsOwnCall(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var observed []string
	f := servertest.Start(t, servertest.NewMemory(), servertest.Options{
		Observe: func(method string, err error, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			observed = append(observed, method+" "+status.Code(err).String())
		},
	})
	admin := f.Admin(t, servertest.AdminToken)
	led := f.Ledger(t, servertest.ServiceToken)
	acc, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: acc.GetAccount().GetId(), AmountMicros: 1_000}); err != nil {
		t.Fatal(err)
	}
	k, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: acc.GetAccount().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	keyID := k.GetKey().GetId()
	held, err := led.Reserve(ctx, &accountingv1.ReserveRequest{RequestId: "held", KeyId: keyID, AmountMicros: 100, Pool: accountingv1.Pool_POOL_GENERAL})
	if err != nil {
		t.Fatal(err)
	}

	reserve := func(id string, amount int64) *accountingv1.LedgerOp {
		return &accountingv1.LedgerOp{Op: &accountingv1.LedgerOp_Reserve{Reserve: &accountingv1.ReserveRequest{
			RequestId: id, KeyId: keyID, AmountMicros: amount, Pool: accountingv1.Pool_POOL_GENERAL}}}
	}
	resp, err := led.Apply(ctx, &accountingv1.ApplyRequest{Ops: []*accountingv1.LedgerOp{
		reserve("fits", 200),
		{Op: &accountingv1.LedgerOp_Commit{Commit: &accountingv1.CommitRequest{ReservationId: held.GetReservationId(), ActualMicros: 60}}},
		reserve("", 10),            // malformed: no request id
		reserve("too-much", 5_000), // refused: more than the balance
		{Op: &accountingv1.LedgerOp_Release{Release: &accountingv1.ReleaseRequest{ReservationId: "no-such-reservation"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	res := resp.GetResults()
	if len(res) != 5 {
		t.Fatalf("%d results for 5 operations", len(res))
	}
	if r := res[0].GetReserve(); r.GetReservationId() == "" || r.GetAmountMicros() != 200 {
		t.Errorf("reserve that fits: %v", res[0])
	}
	if diff := cmp.Diff(&accountingv1.CommitResponse{ChargedMicros: 60}, res[1].GetCommit(), protocmp.Transform()); diff != "" {
		t.Errorf("commit (-want +got):\n%s", diff)
	}
	wantErr := func(i int, code codes.Code, reason accountingv1.Reason) {
		t.Helper()
		e := res[i].GetError()
		if e == nil {
			t.Fatalf("operation %d: %v, want an error", i, res[i])
		}
		err := contract.OpStatus(e)
		if status.Code(err) != code || refusalOf(t, err).GetReason() != reason {
			t.Errorf("operation %d: %v, want %v %v", i, err, code, reason)
		}
	}
	wantErr(2, codes.InvalidArgument, accountingv1.Reason_REASON_INVALID_ARGUMENT)
	wantErr(3, codes.FailedPrecondition, accountingv1.Reason_REASON_INSUFFICIENT_CREDITS)
	wantErr(4, codes.NotFound, accountingv1.Reason_REASON_NOT_FOUND)

	// Replaying an operation of the Apply as its own call gives the same answer.
	again, err := led.Reserve(ctx, reserve("fits", 200).GetReserve())
	if err != nil || again.GetReservationId() != res[0].GetReserve().GetReservationId() {
		t.Errorf("replayed reserve = %v, %v; want reservation %s", again, err, res[0].GetReserve().GetReservationId())
	}

	mu.Lock()
	sort.Strings(observed)
	got := observed
	mu.Unlock()
	want := []string{"Commit OK", "Release NotFound", "Reserve FailedPrecondition", "Reserve InvalidArgument", "Reserve OK"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operations observed (-want +got):\n%s", diff)
	}
}

// An Apply that cannot be read is refused whole, and nothing of it is applied.
func TestApplyRefusesUnreadableBatches(t *testing.T) {
	ctx := context.Background()
	many := make([]*accountingv1.LedgerOp, contract.MaxApplyOps+1)
	for i := range many {
		many[i] = &accountingv1.LedgerOp{Op: &accountingv1.LedgerOp_Reserve{Reserve: validReserve()}}
	}
	for _, tc := range []struct {
		name string
		ops  []*accountingv1.LedgerOp
	}{
		{"no operations", nil},
		{"more than 256", many},
		{"an operation of no kind", []*accountingv1.LedgerOp{{Op: &accountingv1.LedgerOp_Reserve{Reserve: validReserve()}}, {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := servertest.NewMemory()
			led := servertest.Start(t, mem, servertest.Options{}).Ledger(t, servertest.ServiceToken)
			// Were the store reached, this error would be used up.
			mem.FailNext(errors.New("store reached"))
			_, err := led.Apply(ctx, &accountingv1.ApplyRequest{Ops: tc.ops})
			if status.Code(err) != codes.InvalidArgument || refusalOf(t, err).GetReason() != accountingv1.Reason_REASON_INVALID_ARGUMENT {
				t.Fatalf("Apply = %v, want InvalidArgument", err)
			}
			// The armed failure is still there: no operation reached the store.
			if _, err := led.Reserve(ctx, validReserve()); status.Code(err) != codes.Internal {
				t.Fatalf("a store call happened during the refused Apply (next call: %v)", err)
			}
		})
	}
}
