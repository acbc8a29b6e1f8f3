package machine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

var small = ledger.Tier{Name: "small", RPMBeforeTopUp: 3, RPMAfterTopUp: 3, InFlightGeneral: 2, InFlightHighCost: 1}

// TestReserveRefusalOrder: with several limits hit at once, the first in the store's
// order refuses, with its limit and retry-after, and changes nothing.
func TestReserveRefusalOrder(t *testing.T) {
	endOfDay := time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC)
	endOfMonth := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	endOfMinute := time.Date(2026, 3, 14, 12, 1, 0, 0, time.UTC)
	type state struct {
		revoked, disabled, expired, suspended bool
		balance                               ledger.Micros
		daily, monthly                        *ledger.Micros
		heldGeneral, heldHighCost             int
		usedRPM                               bool
	}
	tests := []struct {
		name   string
		state  state
		amount ledger.Micros
		pool   ledger.Pool
		want   ledger.Refusal
	}{
		{"revoked key first", state{revoked: true, suspended: true, balance: 2, heldGeneral: 2, usedRPM: true}, 100, 1,
			ledger.Refusal{Reason: ledger.ReasonInvalidAPIKey}},
		{"disabled key", state{disabled: true, suspended: true, balance: 1000}, 100, 1,
			ledger.Refusal{Reason: ledger.ReasonInvalidAPIKey}},
		{"expired key", state{expired: true, suspended: true, balance: 1000}, 100, 1,
			ledger.Refusal{Reason: ledger.ReasonInvalidAPIKey}},
		{"suspended before credits", state{suspended: true, balance: 50, daily: ptr[ledger.Micros](1), heldGeneral: 2}, 100, 1,
			ledger.Refusal{Reason: ledger.ReasonAccountSuspended}},
		{"credits before key limit", state{balance: 101, daily: ptr[ledger.Micros](10), heldGeneral: 2, usedRPM: true}, 100, 1,
			ledger.Refusal{Reason: ledger.ReasonInsufficientCredits}},
		{"daily limit before pools", state{balance: 1000, daily: ptr[ledger.Micros](99), heldGeneral: 2, usedRPM: true}, 100, 1,
			ledger.Refusal{Reason: ledger.ReasonKeyLimitReached, Limit: "daily", RetryAfter: secondsUntil(t0, endOfDay)}},
		{"monthly limit before daily", state{balance: 1000, daily: ptr[ledger.Micros](50), monthly: ptr[ledger.Micros](50)}, 100, 1,
			ledger.Refusal{Reason: ledger.ReasonKeyLimitReached, Limit: "monthly", RetryAfter: secondsUntil(t0, endOfMonth)}},
		{"limit exactly reached is allowed, so the pool refuses",
			state{balance: 1000, daily: ptr[ledger.Micros](100), monthly: ptr[ledger.Micros](100), heldGeneral: 2}, 100, 1,
			ledger.Refusal{Reason: ledger.ReasonConcurrencyLimitExceeded, Limit: "general", RetryAfter: 5}},
		{"free request is never refused by a limit", state{balance: 2, daily: ptr[ledger.Micros](0), heldGeneral: 2}, 0, 1,
			ledger.Refusal{Reason: ledger.ReasonConcurrencyLimitExceeded, Limit: "general", RetryAfter: 5}},
		{"general pool before rpm", state{balance: 1000, heldGeneral: 2, usedRPM: true}, 0, 2,
			ledger.Refusal{Reason: ledger.ReasonConcurrencyLimitExceeded, Limit: "general", RetryAfter: 5}},
		{"high-cost pool before rpm", state{balance: 1000, heldHighCost: 1, usedRPM: true}, 0, 2,
			ledger.Refusal{Reason: ledger.ReasonConcurrencyLimitExceeded, Limit: "high_cost", RetryAfter: 5}},
		{"high-cost pool does not bind general requests, rpm does", state{balance: 1000, heldHighCost: 1, usedRPM: true}, 0, 1,
			ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, Limit: "rpm", RetryAfter: secondsUntil(t0, endOfMinute)}},
		{"nothing hit", state{balance: 1000, daily: ptr[ledger.Micros](100)}, 100, 2, ledger.Refusal{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.must(PutTier{Tier: small, At: t0})
			a := h.account("small", tt.state.balance)
			k, _ := h.key(a, func(nk *ledger.NewKey) {
				nk.DailyLimit, nk.MonthlyLimit = tt.state.daily, tt.state.monthly
				if tt.state.expired {
					nk.ExpiresAt = ptr(t0)
				}
			})
			filler, _ := h.key(a, nil)
			held := tt.state.heldGeneral + tt.state.heldHighCost
			if tt.state.usedRPM {
				for range 3 - held {
					r := h.mustReserve(filler, 0, ledger.PoolGeneral)
					h.must(Release{ReservationID: r.ID, At: h.now})
				}
			}
			for range tt.state.heldGeneral {
				h.mustReserve(filler, 1, ledger.PoolGeneral)
			}
			for range tt.state.heldHighCost {
				h.mustReserve(filler, 1, ledger.PoolHighCost)
			}
			if tt.state.revoked {
				h.must(RevokeKey{KeyID: k, At: h.now})
			}
			if tt.state.disabled {
				h.must(SetKeyDisabled{KeyID: k, Disabled: true, At: h.now})
			}
			if tt.state.suspended {
				h.must(SetAccountSuspended{AccountID: a, Suspended: true, At: h.now})
			}
			before := h.s.Snapshot()
			_, err := h.reserve(k, tt.amount, tt.pool)
			if got := refusal(err); got != tt.want {
				t.Fatalf("refusal %+v, want %+v", got, tt.want)
			}
			if err != nil && !equalSnapshots(before, h.s.Snapshot()) {
				t.Error("a refusal changed the state")
			}
		})
	}
}

func equalSnapshots(a, b Snapshot) bool { return snapshotDiff(a, b) == "" }

// TestReserveReplaysRequestID: a request id returns its first reservation in its
// current state, with no second hold; another key's use of it is refused.
func TestReserveReplaysRequestID(t *testing.T) {
	h := newHarness(t)
	a := h.account("", 1000)
	k, _ := h.key(a, nil)
	other, _ := h.key(a, nil)
	req := ledger.ReserveRequest{RequestID: "r1", KeyID: k, Model: "m", Amount: 300, Pool: ledger.PoolGeneral}
	first, evs := h.do(Reserve{ID: uuidOf(3, 1), Request: req, At: t0})
	if first.Err != nil || len(evs) != 1 {
		t.Fatalf("first reserve: %v, %d events", first.Err, len(evs))
	}
	want := ledger.Reservation{ID: uuidOf(3, 1), AccountID: a, KeyID: k, Model: "m", Amount: 300,
		Pool: ledger.PoolGeneral, State: ledger.StateHeld, CreatedAt: t0, ExpiresAt: t0.Add(DefaultTTL)}
	if first.Reservation != want {
		t.Fatalf("reservation %+v, want %+v", first.Reservation, want)
	}
	again, evs := h.do(Reserve{ID: uuidOf(3, 2), Request: req, At: t0.Add(time.Second)})
	if again.Reservation != want || len(evs) != 0 {
		t.Errorf("replay: %+v with %d events, want the first", again.Reservation, len(evs))
	}
	if acc := h.getAccount(a); acc.Reserved != 300 || acc.InFlight != 1 {
		t.Errorf("after a replay: reserved %d in flight %d, want one hold", acc.Reserved, acc.InFlight)
	}
	req.KeyID = other
	if got := refusal(h.must2(Reserve{ID: uuidOf(3, 3), Request: req, At: t0})); got.Reason != ledger.ReasonAlreadyExists {
		t.Errorf("another key's request id: %+v, want already_exists", got)
	}
	h.must(Commit{Request: ledger.CommitRequest{ReservationID: want.ID, Actual: 120}, At: t0})
	req.KeyID = k
	want.State, want.Charged = ledger.StateCommitted, 120
	if r := h.must(Reserve{ID: uuidOf(3, 4), Request: req, At: t0}).Reservation; r != want {
		t.Errorf("replay after commit: %+v, want %+v", r, want)
	}
	// A request id is replayed even when its key has since been revoked.
	h.must(RevokeKey{KeyID: k, At: t0})
	if r := h.must(Reserve{ID: uuidOf(3, 5), Request: req, At: t0}).Reservation; r != want {
		t.Errorf("replay with a revoked key: %+v, want %+v", r, want)
	}
}

// must2 decides c and returns its error.
func (h *harness) must2(c Command) error {
	a, _ := h.do(c)
	return a.Err
}

func TestReserveArguments(t *testing.T) {
	h := newHarness(t)
	a := h.account("", 1000)
	k, _ := h.key(a, nil)
	base := ledger.ReserveRequest{RequestID: "x", KeyID: k, Amount: 1, Pool: ledger.PoolGeneral}
	tests := []struct {
		name string
		edit func(*ledger.ReserveRequest)
		want ledger.Reason
	}{
		{"no request id", func(r *ledger.ReserveRequest) { r.RequestID = "" }, ledger.ReasonInvalidArgument},
		{"negative amount", func(r *ledger.ReserveRequest) { r.Amount = -1 }, ledger.ReasonInvalidArgument},
		{"unknown pool", func(r *ledger.ReserveRequest) { r.Pool = 3 }, ledger.ReasonInvalidArgument},
		{"negative ttl", func(r *ledger.ReserveRequest) { r.TTL = -time.Second }, ledger.ReasonInvalidArgument},
		{"unknown key", func(r *ledger.ReserveRequest) { r.KeyID = uuidOf(9, 9) }, ledger.ReasonInvalidAPIKey},
	}
	for _, tt := range tests {
		r := base
		tt.edit(&r)
		if got := refusal(h.must2(Reserve{ID: h.id(3), Request: r, At: t0})); got.Reason != tt.want {
			t.Errorf("%s: %+v, want %v", tt.name, got, tt.want)
		}
	}
	r := base
	r.TTL = 90*time.Second + 1234*time.Nanosecond
	got := h.must(Reserve{ID: h.id(3), Request: r, At: t0.Add(7 * time.Nanosecond)}).Reservation
	if !got.CreatedAt.Equal(t0) || !got.ExpiresAt.Equal(t0.Add(90*time.Second+time.Microsecond)) {
		t.Errorf("times %v %v: want microseconds of the command's time and ttl", got.CreatedAt, got.ExpiresAt)
	}
}

// TestRequestsPerMinute: admitted reservations count in their UTC minute; the limit is
// the tier's before the first top-up and its other one after; a new minute starts over.
func TestRequestsPerMinute(t *testing.T) {
	h := newHarness(t)
	h.must(PutTier{Tier: ledger.Tier{Name: "r", RPMBeforeTopUp: 2, RPMAfterTopUp: 4, InFlightGeneral: 10, InFlightHighCost: 1}, At: t0})
	a := h.account("r", 0)
	k, _ := h.key(a, nil)
	minuteEnd := time.Date(2026, 3, 14, 12, 1, 0, 0, time.UTC)
	steps := []struct {
		at     time.Time
		topUp  bool
		amount ledger.Micros
		want   ledger.Refusal
	}{
		{at: t0},
		{at: t0.Add(time.Second)},
		{at: t0.Add(2 * time.Second), want: ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, Limit: "rpm", RetryAfter: 28}},
		{at: minuteEnd.Add(-time.Microsecond), want: ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, Limit: "rpm", RetryAfter: 1}},
		{at: minuteEnd.Add(-time.Microsecond), topUp: true},
		{at: minuteEnd.Add(-time.Microsecond)},
		{at: minuteEnd.Add(-time.Microsecond)},
		{at: minuteEnd.Add(-time.Microsecond), want: ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, Limit: "rpm", RetryAfter: 1}},
		{at: minuteEnd},
		{at: minuteEnd.Add(59 * time.Second)},
		{at: minuteEnd.Add(59 * time.Second), amount: 1},
		{at: minuteEnd.Add(59 * time.Second)},
		{at: minuteEnd.Add(59*time.Second + 500*time.Millisecond), want: ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, Limit: "rpm", RetryAfter: 1}},
		// A refusal for an earlier minute than the window's (a clock behind) counts in
		// the window's minute.
		{at: minuteEnd.Add(30 * time.Second), want: ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, Limit: "rpm", RetryAfter: 30}},
		{at: minuteEnd.Add(2 * time.Minute)},
	}
	for i, st := range steps {
		h.now = st.at
		if st.topUp {
			h.must(TopUp{AccountID: a, Amount: 10, At: st.at})
			continue
		}
		_, err := h.reserve(k, st.amount, ledger.PoolGeneral)
		if got := refusal(err); got != st.want {
			t.Errorf("step %d at %v: %+v, want %+v", i, st.at.Format(time.TimeOnly), got, st.want)
		}
	}
}

// TestPools: every hold takes a general slot; a high-cost one also a high-cost slot;
// a settlement frees both.
func TestPools(t *testing.T) {
	h := newHarness(t)
	h.must(PutTier{Tier: ledger.Tier{Name: "p", RPMBeforeTopUp: 100, RPMAfterTopUp: 100, InFlightGeneral: 3, InFlightHighCost: 2}, At: t0})
	a := h.account("p", 100)
	k, _ := h.key(a, nil)
	hc1 := h.mustReserve(k, 1, ledger.PoolHighCost)
	h.mustReserve(k, 1, ledger.PoolHighCost)
	if _, err := h.reserve(k, 1, ledger.PoolHighCost); refusal(err).Limit != "high_cost" {
		t.Fatalf("third high-cost: %v", err)
	}
	g := h.mustReserve(k, 1, ledger.PoolGeneral)
	if acc := h.getAccount(a); acc.InFlight != 3 || acc.InFlightHighCost != 2 {
		t.Fatalf("pools %d/%d, want 3/2", acc.InFlight, acc.InFlightHighCost)
	}
	if _, err := h.reserve(k, 0, ledger.PoolGeneral); refusal(err).Limit != "general" {
		t.Fatalf("fourth request: %v", err)
	}
	h.must(Commit{Request: ledger.CommitRequest{ReservationID: hc1.ID, Actual: 1}, At: t0})
	h.mustReserve(k, 0, ledger.PoolHighCost)
	h.must(Release{ReservationID: g.ID, At: t0})
	if acc := h.getAccount(a); acc.InFlight != 2 || acc.InFlightHighCost != 2 {
		t.Errorf("pools %d/%d, want 2/2", acc.InFlight, acc.InFlightHighCost)
	}
}

// TestKeyLimitBoundaries: a window ends at the UTC day's or month's end; a hold counts
// while held, a charge once committed, in the windows of the reservation's creation.
func TestKeyLimitBoundaries(t *testing.T) {
	h := newHarness(t)
	a := h.account("", 10_000)
	lastMinute := time.Date(2026, 3, 31, 23, 59, 59, 500_000_000, time.UTC)
	k, _ := h.key(a, func(nk *ledger.NewKey) {
		nk.DailyLimit, nk.MonthlyLimit = ptr[ledger.Micros](100), ptr[ledger.Micros](150)
	})
	h.now = time.Date(2026, 3, 30, 10, 0, 0, 0, time.UTC)
	h.mustReserve(k, 60, ledger.PoolGeneral) // held on the 30th, never settled here
	h.now = lastMinute
	r := h.mustReserve(k, 40, ledger.PoolGeneral)
	if _, err := h.reserve(k, 61, ledger.PoolGeneral); refusal(err) != (ledger.Refusal{Reason: ledger.ReasonKeyLimitReached, Limit: "monthly", RetryAfter: 1}) {
		t.Fatalf("over both limits: %v", err)
	}
	if _, err := h.reserve(k, 51, ledger.PoolGeneral); refusal(err) != (ledger.Refusal{Reason: ledger.ReasonKeyLimitReached, Limit: "monthly", RetryAfter: 1}) {
		t.Fatalf("over the month: %v", err)
	}
	got := h.getKey(k)
	if got.HeldToday != 40 || got.HeldMonth != 100 || got.SpentToday != 0 {
		t.Errorf("spend %+v, want 40 held today, 100 this month", got)
	}
	// Committed after midnight: the charge lands in the 31st and March.
	h.now = time.Date(2026, 4, 1, 0, 0, 1, 0, time.UTC)
	h.must(Commit{Request: ledger.CommitRequest{ReservationID: r.ID, Actual: 25}, At: h.now})
	if got := h.getKey(k); got.SpentToday != 0 || got.HeldToday != 0 || got.SpentMonth != 0 || got.HeldMonth != 0 {
		t.Errorf("April's spend %+v, want none", got)
	}
	h.now = lastMinute
	if got := h.getKey(k); got.SpentToday != 25 || got.HeldToday != 0 || got.SpentMonth != 25 || got.HeldMonth != 60 {
		t.Errorf("March 31st's spend %+v, want 25 spent, 60 held in the month", got)
	}
	h.now = time.Date(2026, 4, 1, 0, 0, 1, 0, time.UTC)
	h.mustReserve(k, 100, ledger.PoolGeneral)
	if _, err := h.reserve(k, 1, ledger.PoolGeneral); refusal(err) != (ledger.Refusal{Reason: ledger.ReasonKeyLimitReached, Limit: "daily", RetryAfter: 86399}) {
		t.Errorf("a new day's limit: %v", err)
	}
}

// TestSettlement: commit, release, renew and their replays and refusals.
func TestSettlement(t *testing.T) {
	type step struct {
		cmd     string // commit, release, renew
		actual  ledger.Micros
		want    Answer
		wantErr ledger.Refusal
		detail  string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"commit then replays", []step{
			{cmd: "commit", actual: 70, want: Answer{Commit: ledger.CommitResult{Charged: 70}}},
			{cmd: "commit", actual: 10, want: Answer{Commit: ledger.CommitResult{Charged: 70, Replayed: true}}},
			{cmd: "release", want: Answer{Release: ledger.ReleaseResult{State: ledger.StateCommitted, Charged: 70}}},
			{cmd: "renew", wantErr: ledger.Refusal{Reason: ledger.ReasonReservationSettled}},
		}},
		{"commit capped at the hold", []step{
			{cmd: "commit", actual: 150, want: Answer{Commit: ledger.CommitResult{Charged: 100, Capped: true}}},
			{cmd: "commit", actual: 0, want: Answer{Commit: ledger.CommitResult{Charged: 100, Capped: true, Replayed: true}}},
		}},
		{"release then commit", []step{
			{cmd: "release", want: Answer{Release: ledger.ReleaseResult{State: ledger.StateReleased}}},
			{cmd: "release", want: Answer{Release: ledger.ReleaseResult{State: ledger.StateReleased}}},
			{cmd: "commit", actual: 5, wantErr: ledger.Refusal{Reason: ledger.ReasonReservationSettled},
				detail: "the reservation was released; nothing was charged"},
		}},
		{"negative actual", []step{
			{cmd: "commit", actual: -1, wantErr: ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
			{cmd: "commit", actual: 0, want: Answer{Commit: ledger.CommitResult{Charged: 0}}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			a := h.account("", 1000)
			k, _ := h.key(a, nil)
			r := h.mustReserve(k, 100, ledger.PoolGeneral)
			for i, st := range tt.steps {
				var c Command
				switch st.cmd {
				case "commit":
					c = Commit{Request: ledger.CommitRequest{ReservationID: r.ID, Actual: st.actual}, At: t0}
				case "release":
					c = Release{ReservationID: r.ID, Reason: "client gone", At: t0}
				case "renew":
					c = Renew{ReservationID: r.ID, At: t0}
				}
				got, _ := h.do(c)
				if refusal(got.Err) != st.wantErr {
					t.Fatalf("step %d: error %v, want %+v", i, got.Err, st.wantErr)
				}
				if st.detail != "" && !strings.HasSuffix(got.Err.Error(), st.detail) {
					t.Errorf("step %d: %v, want detail %q", i, got.Err, st.detail)
				}
				got.Err = nil
				if !answersEqual(got, st.want) {
					t.Errorf("step %d: %+v, want %+v", i, got, st.want)
				}
			}
			acc := h.getAccount(a)
			if acc.Reserved != 0 || acc.InFlight != 0 || acc.Balance+h.charged(r.ID) != 1000 {
				t.Errorf("account after settlement: %+v", acc)
			}
		})
	}
	h := newHarness(t)
	missing := uuidOf(3, 999)
	for _, c := range []Command{Commit{Request: ledger.CommitRequest{ReservationID: missing}}, Release{ReservationID: missing},
		Renew{ReservationID: missing}, GetReservation{ReservationID: missing}} {
		if a, _ := h.do(c); !errors.Is(a.Err, ledger.ErrNotFound) {
			t.Errorf("%T of a missing reservation: %v", c, a.Err)
		}
	}
}

func (h *harness) charged(id string) ledger.Micros {
	return h.must(GetReservation{ReservationID: id}).Reservation.Charged
}

func answersEqual(a, b Answer) bool {
	return a.Commit == b.Commit && a.Release == b.Release && a.Expires.Equal(b.Expires) &&
		a.Expired == b.Expired && a.Reservation == b.Reservation
}

// TestInsufficientCreditsSaysAvailable: the refusal of a hold the credits cannot cover
// carries what the account had available (balance less holds), 0 included, so the
// client can be told both amounts.
func TestInsufficientCreditsSaysAvailable(t *testing.T) {
	for _, tt := range []struct {
		balance, held, amount, available ledger.Micros
	}{
		{balance: 1000, held: 0, amount: 8267, available: 1000},
		{balance: 101, held: 2, amount: 100, available: 99},
		{balance: 5, held: 5, amount: 1, available: 0},
	} {
		h := newHarness(t)
		a := h.account("", tt.balance)
		k, _ := h.key(a, nil)
		for range tt.held {
			h.mustReserve(k, 1, ledger.PoolGeneral)
		}
		_, err := h.reserve(k, tt.amount, ledger.PoolGeneral)
		var r *ledger.Refusal
		if !errors.As(err, &r) || r.Reason != ledger.ReasonInsufficientCredits || r.Available == nil || *r.Available != tt.available {
			t.Errorf("balance %d, %d held, reserve %d: %+v, want insufficient credits with %d available", tt.balance, tt.held, tt.amount, r, tt.available)
		}
	}
}
