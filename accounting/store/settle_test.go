package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/llmgw/gateway/accounting/ledger"
)

func TestReserveIsIdempotent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 20)
	ctx := context.Background()
	a := f.account(t, "enterprise", 1_000_000)
	k, _ := f.key(t, a.ID, nil)
	other, _ := f.key(t, a.ID, nil)

	req := ledger.ReserveRequest{RequestID: "gw-1", KeyID: k.ID, Model: "demo-chat", Amount: 5_000, Pool: ledger.PoolGeneral, TTL: time.Minute}
	first, err := f.s.Reserve(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want := ledger.Reservation{ID: first.ID, AccountID: a.ID, KeyID: k.ID, Model: "demo-chat", Amount: 5_000,
		Pool: ledger.PoolGeneral, State: ledger.StateHeld, CreatedAt: t0, ExpiresAt: t0.Add(time.Minute)}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("Reserve (-want +got):\n%s", diff)
	}
	again, err := f.s.Reserve(ctx, req)
	if err != nil || again != first {
		t.Errorf("retry = %+v, %v; want the first reservation", again, err)
	}
	if got := f.getAccount(t, a.ID); got.Reserved != 5_000 || got.InFlight != 1 {
		t.Errorf("after a retry the account holds %d in %d slots, want 5000 in 1", got.Reserved, got.InFlight)
	}
	_, err = f.s.Reserve(ctx, ledger.ReserveRequest{RequestID: "gw-1", KeyID: other.ID, Model: "x", Pool: ledger.PoolGeneral})
	wantReason(t, err, ledger.ReasonAlreadyExists)

	// After commit, a retry reports the committed reservation, still without a new hold.
	must(t, errOf(f.s.Commit(ctx, ledger.CommitRequest{ReservationID: first.ID, Actual: 1_000})))
	again, err = f.s.Reserve(ctx, req)
	if err != nil || again.ID != first.ID || again.State != ledger.StateCommitted || again.Charged != 1_000 {
		t.Errorf("retry after commit = %+v, %v", again, err)
	}

	// The same request id from many goroutines at once: one hold.
	var wg sync.WaitGroup
	ids := make([]string, 50)
	for i := range ids {
		wg.Go(func() {
			r, err := f.s.Reserve(ctx, ledger.ReserveRequest{RequestID: "gw-2", KeyID: k.ID, Model: "m", Amount: 1_000, Pool: ledger.PoolGeneral})
			if err != nil {
				t.Errorf("Reserve: %v", err)
			}
			ids[i] = r.ID
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent retries got different reservations %s and %s", ids[0], id)
		}
	}
	if got := f.getAccount(t, a.ID); got.Reserved != 1_000 || got.InFlight != 1 {
		t.Errorf("after 50 concurrent retries the account holds %d in %d slots, want 1000 in 1", got.Reserved, got.InFlight)
	}
	f.checkInvariants(t)
}

func TestReserveArguments(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	a := f.account(t, "default", 1_000)
	k, _ := f.key(t, a.ID, nil)
	tests := []struct {
		name string
		req  ledger.ReserveRequest
		want ledger.Reason
	}{
		{"no request id", ledger.ReserveRequest{KeyID: k.ID, Pool: ledger.PoolGeneral}, ledger.ReasonInvalidArgument},
		{"negative amount", ledger.ReserveRequest{RequestID: "a", KeyID: k.ID, Amount: -1, Pool: ledger.PoolGeneral}, ledger.ReasonInvalidArgument},
		{"no pool", ledger.ReserveRequest{RequestID: "b", KeyID: k.ID}, ledger.ReasonInvalidArgument},
		{"negative ttl", ledger.ReserveRequest{RequestID: "c", KeyID: k.ID, Pool: ledger.PoolGeneral, TTL: -time.Second}, ledger.ReasonInvalidArgument},
		{"unknown key", ledger.ReserveRequest{RequestID: "d", KeyID: "00000000-0000-0000-0000-000000000000", Pool: ledger.PoolGeneral}, ledger.ReasonInvalidAPIKey},
		{"malformed key", ledger.ReserveRequest{RequestID: "e", KeyID: "key-1", Pool: ledger.PoolGeneral}, ledger.ReasonInvalidAPIKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.s.Reserve(context.Background(), tt.req)
			wantReason(t, err, tt.want)
		})
	}
	// The default TTL applies when none is given.
	r := f.mustReserve(t, k.ID, 10, ledger.PoolGeneral)
	if want := t0.Add(10 * time.Minute); !r.ExpiresAt.Equal(want) {
		t.Errorf("expires at %v, want %v", r.ExpiresAt, want)
	}
}

// step is one settlement call and what it must return.
type step struct {
	op          string // commit, release, renew, expire
	actual      ledger.Micros
	wantErr     error
	wantCommit  ledger.CommitResult
	wantRelease ledger.ReleaseResult
}

func TestSettlementSequences(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	const hold = 10_000
	settled := &ledger.Refusal{Reason: ledger.ReasonReservationSettled}

	tests := []struct {
		name        string
		steps       []step
		wantCharged ledger.Micros
	}{
		{name: "commit twice", wantCharged: 6_000, steps: []step{
			{op: "commit", actual: 6_000, wantCommit: ledger.CommitResult{Charged: 6_000}},
			{op: "commit", actual: 9_000, wantCommit: ledger.CommitResult{Charged: 6_000, Replayed: true}},
		}},
		{name: "commit above the hold is capped", wantCharged: hold, steps: []step{
			{op: "commit", actual: 25_000, wantCommit: ledger.CommitResult{Charged: hold, Capped: true}},
			{op: "commit", actual: 1, wantCommit: ledger.CommitResult{Charged: hold, Capped: true, Replayed: true}},
		}},
		{name: "commit zero", wantCharged: 0, steps: []step{
			{op: "commit", actual: 0, wantCommit: ledger.CommitResult{}},
			{op: "release", wantRelease: ledger.ReleaseResult{State: ledger.StateCommitted}},
		}},
		{name: "release twice", steps: []step{
			{op: "release", wantRelease: ledger.ReleaseResult{State: ledger.StateReleased}},
			{op: "release", wantRelease: ledger.ReleaseResult{State: ledger.StateReleased}},
		}},
		{name: "commit after release", steps: []step{
			{op: "release", wantRelease: ledger.ReleaseResult{State: ledger.StateReleased}},
			{op: "commit", actual: 5, wantErr: settled},
			{op: "renew", wantErr: settled},
		}},
		{name: "release after commit", wantCharged: 4_000, steps: []step{
			{op: "commit", actual: 4_000, wantCommit: ledger.CommitResult{Charged: 4_000}},
			{op: "release", wantRelease: ledger.ReleaseResult{State: ledger.StateCommitted, Charged: 4_000}},
			{op: "renew", wantErr: settled},
		}},
		{name: "renew then commit", wantCharged: 100, steps: []step{
			{op: "renew"},
			{op: "commit", actual: 100, wantCommit: ledger.CommitResult{Charged: 100}},
		}},
		{name: "expired then commit and release", steps: []step{
			{op: "expire"},
			{op: "commit", actual: 5, wantErr: settled},
			{op: "release", wantRelease: ledger.ReleaseResult{State: ledger.StateExpired}},
			{op: "renew", wantErr: settled},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			f.clk.Set(t0)
			a := f.account(t, "default", 1_000_000)
			k, _ := f.key(t, a.ID, func(nk *ledger.NewKey) { nk.DailyLimit = ptr[ledger.Micros](1 << 40) })
			r := f.mustReserve(t, k.ID, hold, ledger.PoolHighCost)
			for i, s := range tt.steps {
				var err error
				switch s.op {
				case "commit":
					var got ledger.CommitResult
					got, err = f.s.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: s.actual,
						Usage: ledger.Usage{InputTokens: 10, OutputTokens: 20, Units: map[string]int64{"images": 1}}})
					if err == nil && got != s.wantCommit {
						t.Errorf("step %d commit = %+v, want %+v", i, got, s.wantCommit)
					}
				case "release":
					var got ledger.ReleaseResult
					got, err = f.s.Release(ctx, r.ID, "upstream_error")
					if err == nil && got != s.wantRelease {
						t.Errorf("step %d release = %+v, want %+v", i, got, s.wantRelease)
					}
				case "renew":
					var exp time.Time
					f.clk.Set(t0.Add(9 * time.Minute))
					exp, err = f.s.Renew(ctx, r.ID, 5*time.Minute)
					if err == nil && !exp.Equal(t0.Add(14*time.Minute)) {
						t.Errorf("step %d renewed to %v, want %v", i, exp, t0.Add(14*time.Minute))
					}
				case "expire":
					f.clk.Set(r.ExpiresAt)
					var n int
					n, err = f.s.ExpireDue(ctx, 100)
					if n < 1 {
						t.Errorf("step %d: ExpireDue expired %d, want at least 1", i, n)
					}
				}
				if !errors.Is(err, s.wantErr) || (s.wantErr == nil) != (err == nil) {
					t.Fatalf("step %d %s: error %v, want %v", i, s.op, err, s.wantErr)
				}
			}
			got := f.getAccount(t, a.ID)
			if got.Balance != 1_000_000-tt.wantCharged || got.Reserved != 0 || got.InFlight != 0 || got.InFlightHighCost != 0 {
				t.Errorf("account = %+v, want balance %d and nothing held", got, 1_000_000-tt.wantCharged)
			}
			key, _ := f.s.GetKey(ctx, k.ID)
			if key.SpentToday != tt.wantCharged || key.HeldToday != 0 || key.SpentMonth != tt.wantCharged {
				t.Errorf("key spend = %d/%d held %d, want %d", key.SpentToday, key.SpentMonth, key.HeldToday, tt.wantCharged)
			}
			f.checkInvariants(t)
		})
	}

	t.Run("unknown reservation", func(t *testing.T) {
		ctx := context.Background()
		for _, id := range []string{"00000000-0000-0000-0000-000000000000", "res-1"} {
			if _, err := f.s.Commit(ctx, ledger.CommitRequest{ReservationID: id}); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("Commit(%s) = %v, want ErrNotFound", id, err)
			}
			if _, err := f.s.Release(ctx, id, ""); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("Release(%s) = %v, want ErrNotFound", id, err)
			}
			if _, err := f.s.Renew(ctx, id, time.Minute); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("Renew(%s) = %v, want ErrNotFound", id, err)
			}
		}
		if _, err := f.s.Commit(ctx, ledger.CommitRequest{ReservationID: "00000000-0000-0000-0000-000000000000", Actual: -1}); ledger.ReasonOf(err) != ledger.ReasonInvalidArgument {
			t.Errorf("negative actual: %v, want invalid argument", err)
		}
	})
}

// A commit spanning midnight lands in the windows of the reservation's creation day.
func TestCommitAcrossMidnightUsesCreationWindow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	ctx := context.Background()
	a := f.account(t, "default", 1_000_000)
	k, _ := f.key(t, a.ID, func(nk *ledger.NewKey) { nk.DailyLimit = ptr[ledger.Micros](10_000) })
	f.clk.Set(time.Date(2026, 3, 31, 23, 59, 50, 0, time.UTC))
	r := f.mustReserve(t, k.ID, 10_000, ledger.PoolGeneral)
	f.clk.Set(time.Date(2026, 4, 1, 0, 0, 10, 0, time.UTC))
	// The new day's window is empty: a full-limit hold is admitted.
	r2 := f.mustReserve(t, k.ID, 10_000, ledger.PoolGeneral)
	must(t, errOf(f.s.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: 8_000})))
	key, _ := f.s.GetKey(ctx, k.ID)
	if key.SpentToday != 0 || key.HeldToday != 10_000 || key.SpentMonth != 0 || key.HeldMonth != 10_000 {
		t.Errorf("today's windows = spent %d held %d, month spent %d held %d; want 0/10000, 0/10000",
			key.SpentToday, key.HeldToday, key.SpentMonth, key.HeldMonth)
	}
	must(t, errOf(f.s.Release(ctx, r2.ID, "")))
	f.checkInvariants(t)
}

// ExpireDue and Commit race on the same reservations many times over: each reservation
// ends either committed (and charged once) or expired (and the commit refused), never
// both, and nothing stays held.
func TestExpiryRacesCommit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 20)
	ctx := context.Background()
	f.tier(t, bulkTier)
	const n, amount = 300, 1_000
	a := f.account(t, bulkTier.Name, n*amount)
	k, _ := f.key(t, a.ID, func(nk *ledger.NewKey) { nk.MonthlyLimit = ptr[ledger.Micros](n * amount) })
	res := make([]ledger.Reservation, n)
	for i := range res {
		res[i] = f.mustReserve(t, k.ID, amount, ledger.Pool(1+i%2))
	}
	f.clk.Set(t0.Add(time.Hour)) // all of them are past expiry

	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		committed = map[string]ledger.Micros{}
		refused   = map[string]bool{}
		expired   int
		start     = make(chan struct{})
	)
	for _, r := range res {
		wg.Go(func() {
			<-start
			got, err := f.s.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: amount / 2})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				committed[r.ID] = got.Charged
			case ledger.ReasonOf(err) == ledger.ReasonReservationSettled:
				refused[r.ID] = true
			default:
				t.Errorf("Commit: %v", err)
			}
		})
	}
	sweepers(t, &wg, 4, start, &mu, &expired, func() (int, error) { return f.s.ExpireDue(ctx, 7) })
	close(start)
	wg.Wait()
	// A sweeper may have stopped while commits still held rows it skipped: sweep again.
	for {
		got, err := f.s.ExpireDue(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		if got == 0 {
			break
		}
		expired += got
	}
	if len(committed)+len(refused) != n || expired != len(refused) {
		t.Fatalf("committed %d, refused %d, expired %d; want committed + refused = %d and expired = refused",
			len(committed), len(refused), expired, n)
	}
	t.Logf("race outcome: %d committed, %d expired", len(committed), expired)
	for _, r := range res {
		rel, err := f.s.Release(ctx, r.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		want := ledger.ReleaseResult{State: ledger.StateExpired}
		if c, ok := committed[r.ID]; ok {
			want = ledger.ReleaseResult{State: ledger.StateCommitted, Charged: c}
		}
		if rel != want {
			t.Errorf("reservation %s ended %+v, want %+v", r.ID, rel, want)
		}
	}
	got := f.getAccount(t, a.ID)
	if want := int64(n*amount) - int64(len(committed))*amount/2; got.Balance != want || got.Reserved != 0 || got.InFlight != 0 || got.InFlightHighCost != 0 {
		t.Errorf("account = %+v, want balance %d and nothing held", got, want)
	}
	f.checkInvariants(t)
}

func TestRenewAndExpireDue(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 8)
	ctx := context.Background()
	f.tier(t, bulkTier)
	a := f.account(t, bulkTier.Name, 1_000_000)
	k, _ := f.key(t, a.ID, nil)

	var res []ledger.Reservation
	for i := range 100 {
		r, err := f.s.Reserve(ctx, ledger.ReserveRequest{RequestID: fmt.Sprintf("renew-%d", i), KeyID: k.ID,
			Model: "m", Amount: 100, Pool: ledger.PoolGeneral, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		res = append(res, r)
	}
	// Renew the first ten at t0+30s for 5 minutes; a shorter renewal never shortens.
	f.clk.Set(t0.Add(30 * time.Second))
	for _, r := range res[:10] {
		exp, err := f.s.Renew(ctx, r.ID, 5*time.Minute)
		if err != nil || !exp.Equal(t0.Add(330*time.Second)) {
			t.Fatalf("Renew = %v, %v; want %v", exp, err, t0.Add(330*time.Second))
		}
		if exp, _ := f.s.Renew(ctx, r.ID, time.Second); !exp.Equal(t0.Add(330 * time.Second)) {
			t.Fatalf("a shorter Renew moved the expiry to %v", exp)
		}
	}
	if n, err := f.s.ExpireDue(ctx, 1000); err != nil || n != 0 {
		t.Fatalf("ExpireDue before any expiry = %d, %v; want 0", n, err)
	}
	// At t0+1m the 90 unrenewed ones are due; four sweepers share them exactly.
	f.clk.Set(t0.Add(time.Minute))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
	)
	for range 4 {
		wg.Go(func() {
			for {
				n, err := f.s.ExpireDue(ctx, 5)
				if err != nil {
					t.Errorf("ExpireDue: %v", err)
					return
				}
				if n == 0 {
					return
				}
				mu.Lock()
				total += n
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if total != 90 {
		t.Errorf("sweepers expired %d, want 90", total)
	}
	if got := f.getAccount(t, a.ID); got.Reserved != 1_000 || got.InFlight != 10 {
		t.Errorf("account = %+v, want the 10 renewed holds", got)
	}
	f.clk.Set(t0.Add(330 * time.Second))
	if n, _ := f.s.ExpireDue(ctx, 1000); n != 10 {
		t.Errorf("ExpireDue at the renewed expiry = %d, want 10", n)
	}
	f.checkInvariants(t)
}

// The charge entry records what the request consumed; units are SQL NULL when none.
func TestCommitRecordsUsage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	ctx := context.Background()
	a := f.account(t, "default", 1_000_000)
	k, _ := f.key(t, a.ID, nil)
	tests := []struct {
		name      string
		usage     ledger.Usage
		wantUnits *string
	}{
		{"tokens", ledger.Usage{InputTokens: 12, OutputTokens: 34}, nil},
		{"units", ledger.Usage{Units: map[string]int64{"images": 2}}, ptr(`{"images": 2}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.mustReserve(t, k.ID, 1_000, ledger.PoolGeneral)
			must(t, errOf(f.s.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: 900, Usage: tt.usage,
				UpstreamModel: "gpt-up", Channel: "openai-1"})))
			var (
				amount, in, out int64
				units           *string
				model, upstream string
				channel, keyID  string
			)
			err := f.pool.QueryRow(ctx, `
				SELECT amount, input_tokens, output_tokens, units::text, model, upstream_model, channel, key_id::text
				FROM ledger_entries WHERE reservation_id = $1`, r.ID).Scan(&amount, &in, &out, &units, &model, &upstream, &channel, &keyID)
			if err != nil {
				t.Fatal(err)
			}
			if amount != -900 || in != tt.usage.InputTokens || out != tt.usage.OutputTokens || model != "demo-chat" ||
				upstream != "gpt-up" || channel != "openai-1" || keyID != k.ID || !cmp.Equal(units, tt.wantUnits) {
				t.Errorf("entry = %d %d/%d %v %s %s %s %s", amount, in, out, deref(units), model, upstream, channel, keyID)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// GraceLapsed moves the expiry of the held reservations whose lease ran out (and only
// those) to now + grace, without waiting for a row another transaction holds; ExpireDue
// then leaves them until the grace has passed.
func TestGraceLapsed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	ctx := context.Background()
	a := f.account(t, "default", 1_000_000)
	k, _ := f.key(t, a.ID, nil)
	var res []ledger.Reservation
	for i := range 4 {
		r, err := f.s.Reserve(ctx, ledger.ReserveRequest{RequestID: fmt.Sprintf("grace-%d", i), KeyID: k.ID,
			Model: "m", Amount: 100, Pool: ledger.PoolGeneral, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		res = append(res, r)
	}
	if _, err := f.s.Renew(ctx, res[0].ID, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Commit(ctx, ledger.CommitRequest{ReservationID: res[1].ID, Actual: 50}); err != nil {
		t.Fatal(err)
	}
	// res[3] is locked by a transaction that settles it meanwhile.
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // rolled back unless committed
	if _, err := tx.Exec(ctx, `SELECT 1 FROM reservations WHERE id = $1 FOR UPDATE`, res[3].ID); err != nil {
		t.Fatal(err)
	}
	f.clk.Set(t0.Add(2 * time.Minute))
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	n, err := f.s.GraceLapsed(lctx, 30*time.Second)
	cancel()
	if err != nil || n != 1 {
		t.Fatalf("GraceLapsed = %d, %v; want only the lapsed, unlocked hold moved", n, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// At the same instant only the hold skipped while locked is due.
	if n, err := f.s.ExpireDue(ctx, 100); err != nil || n != 1 {
		t.Fatalf("ExpireDue after the grace was given = %d, %v; want 1 (the locked one)", n, err)
	}
	f.clk.Set(t0.Add(2*time.Minute + 30*time.Second))
	if n, err := f.s.ExpireDue(ctx, 100); err != nil || n != 1 {
		t.Fatalf("ExpireDue once the grace ran out = %d, %v; want 1", n, err)
	}
	if got := f.getAccount(t, a.ID); got.Reserved != 100 || got.InFlight != 1 {
		t.Errorf("account = %+v, want the renewed hold only", got)
	}
	if _, err := f.s.GraceLapsed(ctx, -time.Second); err == nil {
		t.Error("a negative grace was taken")
	}
	f.checkInvariants(t)
}
