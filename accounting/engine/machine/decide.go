package machine

import (
	"crypto/sha256"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

func (s *State) decide(c Command) (Answer, []Event) {
	switch c := c.(type) {
	case Reserve:
		return s.reserve(&c)
	case Commit:
		return s.commit(&c)
	case Release:
		return s.release(&c)
	case Renew:
		return s.renew(&c)
	case ExpireDue:
		return s.expireDue(&c)
	case Authenticate:
		return s.authenticate(&c), nil
	case GetKey:
		k := s.keys[c.KeyID]
		if k == nil {
			return refused(ledger.ErrNotFound), nil
		}
		return Answer{Key: k.viewAt(norm(c.At))}, nil
	case GetAccount:
		a := s.accounts[c.AccountID]
		if a == nil {
			return refused(ledger.ErrNotFound), nil
		}
		return Answer{Account: a.view()}, nil
	case GetReservation:
		r := s.reservations[c.ReservationID]
		if r == nil {
			return refused(ledger.ErrNotFound), nil
		}
		return Answer{Reservation: r.view()}, nil
	case GetVideoTask:
		t := s.videoTasks[c.TaskID]
		if t == nil {
			return refused(ledger.ErrNotFound), nil
		}
		return Answer{VideoTask: *t}, nil
	case CreateAccount:
		return s.createAccount(&c)
	case TopUp:
		return s.topUp(&c)
	case SetAccountSuspended:
		a := s.accounts[c.AccountID]
		if a == nil {
			return refused(ledger.ErrNotFound), nil
		}
		if a.suspended == c.Suspended {
			return Answer{Account: a.view()}, nil
		}
		at := norm(c.At)
		evs := s.record(AccountSuspended{AccountID: a.id, Suspended: c.Suspended, At: at})
		typ := AlertAccountUnsuspended
		if c.Suspended {
			typ = AlertAccountSuspended
		}
		evs = append(evs, s.alert(Alerted{Type: typ, AccountID: a.id, At: at}))
		return Answer{Account: a.view()}, evs
	case UpdateAccount:
		return s.updateAccount(&c)
	case PutTier:
		if err := c.Tier.Validate(); err != nil {
			return refused(err), nil
		}
		if cur := s.tiers[c.Tier.Name]; cur != nil && *cur == c.Tier {
			return Answer{Tier: c.Tier}, nil
		}
		return Answer{Tier: c.Tier}, s.record(TierPut{Tier: c.Tier, At: norm(c.At)})
	case CreateKey:
		return s.createKey(&c)
	case SetKeyDisabled:
		return s.changeKey(c.KeyID, c.At, false, func(e *KeyChanged) { e.Disabled = c.Disabled })
	case RevokeKey:
		ans, evs := s.changeKey(c.KeyID, c.At, false, func(e *KeyChanged) {
			if e.RevokedAt == nil {
				at := norm(c.At)
				e.RevokedAt = &at
			}
		})
		if len(evs) > 0 {
			k := s.keys[c.KeyID]
			evs = append(evs, s.alert(Alerted{Type: AlertKeyRevoked, AccountID: k.acct.id, KeyID: k.id, At: *k.revokedAt}))
		}
		return ans, evs
	case UpdateKey:
		return s.updateKey(&c)
	case RecordVideoTask:
		return s.recordVideoTask(&c)
	case GraceLapsed:
		return s.graceLapsed(&c)
	case ListTiers:
		return Answer{Tiers: s.tierList()}, nil
	case CreateProject:
		return s.createProject(&c)
	case UpdateProject:
		return s.updateProject(&c)
	case DeleteProject:
		return s.deleteProject(&c)
	case PlaceKey:
		return s.placeKey(&c)
	case GetProject:
		p := s.projects[c.ProjectID]
		if p == nil {
			return refused(ledger.ErrNotFound), nil
		}
		return Answer{Project: p.viewAt(norm(c.At))}, nil
	case ListProjects:
		return s.listProjects(&c), nil
	case Forget:
		before := norm(c.Before)
		if !s.forgets(before) {
			return Answer{}, nil
		}
		return Answer{}, s.record(Forgotten{Before: before, At: norm(c.At)})
	}
	panic(fmt.Sprintf("machine: unknown command %T", c))
}

// record applies one event and returns it as Decide's events.
func (s *State) record(e Event) []Event {
	s.apply(e)
	return []Event{e}
}

func refused(err error) Answer { return Answer{Err: err} }

func invalid(detail string) Answer {
	return refused(ledger.Refuse(ledger.ReasonInvalidArgument, detail))
}

// outOfRange is the store's answer to an amount that overflows a bigint column.
func outOfRange(op string) Answer { return invalid(op + ": value out of range") }

// sumOverflows reports whether a + b overflows (both ≥ 0).
func sumOverflows(a, b ledger.Micros) bool { return a > math.MaxInt64-b }

func (s *State) createAccount(c *CreateAccount) (Answer, []Event) {
	tier := c.Tier
	if tier == "" {
		tier = ledger.DefaultTier
	}
	if s.tiers[tier] == nil {
		return invalid("unknown tier " + tier), nil
	}
	if s.accounts[c.ID] != nil {
		return refused(ledger.Refuse(ledger.ReasonAlreadyExists, "create account: already exists")), nil
	}
	evs := s.record(AccountCreated{ID: c.ID, Tier: tier, Label: c.Label, At: norm(c.At)})
	return Answer{Account: s.accounts[c.ID].view()}, evs
}

// updateAccount records the settings c sets that change; none: no event.
func (s *State) updateAccount(c *UpdateAccount) (Answer, []Event) {
	u := c.Update
	a := s.accounts[u.ID]
	if a == nil {
		return refused(ledger.ErrNotFound), nil
	}
	if u.LowBalance.Set && u.LowBalance.Value != nil && *u.LowBalance.Value < 0 {
		return invalid("a low-balance threshold must not be negative"), nil
	}
	at := norm(c.At)
	var evs []Event
	if u.Label.Set && u.Label.Value != a.label {
		evs = append(evs, s.record(AccountLabeled{AccountID: a.id, Label: u.Label.Value, At: at})...)
	}
	if u.LowBalance.Set && !equalPtr(u.LowBalance.Value, a.lowBalance) {
		evs = append(evs, s.record(LowBalanceSet{AccountID: a.id, Threshold: clonePtr(u.LowBalance.Value), At: at})...)
		// A threshold set above what is available alerts at once: the account is below it.
		evs = append(evs, s.lowBalanceAlert(a, at)...)
	}
	return Answer{Account: a.view()}, evs
}

func (s *State) topUp(c *TopUp) (Answer, []Event) {
	if c.Amount <= 0 {
		return invalid("a top-up amount must be positive"), nil
	}
	a := s.accounts[c.AccountID]
	if a == nil {
		return refused(ledger.ErrNotFound), nil
	}
	if _, used := a.topUpKeys[c.IdempotencyKey]; used && c.IdempotencyKey != "" {
		return Answer{Account: a.view()}, nil
	}
	if sumOverflows(a.balance, c.Amount) {
		return outOfRange("top up"), nil
	}
	evs := s.record(ToppedUp{AccountID: a.id, Amount: c.Amount, IdempotencyKey: c.IdempotencyKey, At: norm(c.At)})
	return Answer{Account: a.view()}, evs
}

func (s *State) createKey(c *CreateKey) (Answer, []Event) {
	nk := c.Key
	switch {
	case len(nk.Hash) != sha256.Size:
		return invalid("the key hash must be a SHA-256"), nil
	case nk.DailyLimit != nil && *nk.DailyLimit < 0:
		return invalid("the daily limit must not be negative"), nil
	case nk.MonthlyLimit != nil && *nk.MonthlyLimit < 0:
		return invalid("the monthly limit must not be negative"), nil
	}
	a := s.accounts[nk.AccountID]
	if a == nil {
		return refused(ledger.ErrNotFound), nil
	}
	if s.byHash[string(nk.Hash)] != nil || s.keys[c.ID] != nil {
		return refused(ledger.Refuse(ledger.ReasonAlreadyExists, "create key: already exists")), nil
	}
	if d := s.validPlacement(a, nk.ProjectID, nk.RPM, nk.TPM); d != "" {
		return invalid(d), nil
	}
	at := norm(c.At)
	evs := s.record(KeyCreated{
		ID: c.ID, AccountID: nk.AccountID, Name: nk.Name, Prefix: nk.Prefix, Hash: slices.Clone(nk.Hash),
		AllowedModels: models(nk.AllowedModels), DailyLimit: clonePtr(nk.DailyLimit),
		MonthlyLimit: clonePtr(nk.MonthlyLimit), ExpiresAt: normPtr(nk.ExpiresAt),
		AdminCreated: nk.AdminCreated, At: at,
	})
	// A placement is its own event, decided with the creation: both or neither.
	if nk.ProjectID != "" || nk.RPM != nil || nk.TPM != nil {
		evs = append(evs, s.record(KeyPlaced{KeyID: c.ID, ProjectID: nk.ProjectID, RPM: clonePtr(nk.RPM),
			TPM: clonePtr(nk.TPM), At: at})...)
	}
	return Answer{Key: s.keys[c.ID].view()}, evs
}

// models is an allowlist as the state keeps it: a copy, nil for every model.
func models(m []string) []string {
	if len(m) == 0 {
		return nil
	}
	return slices.Clone(m)
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// changeKey records the change edit makes to the key's mutable state, if any; the
// answer is the key with its spend at the command's time when withSpend (UpdateKey),
// else without (SetKeyDisabled, RevokeKey), as the store answers.
func (s *State) changeKey(id string, at time.Time, withSpend bool, edit func(*KeyChanged)) (Answer, []Event) {
	k := s.keys[id]
	if k == nil {
		return refused(ledger.ErrNotFound), nil
	}
	at = norm(at)
	e := KeyChanged{
		KeyID: k.id, Name: k.name, AllowedModels: k.allowedModels, DailyLimit: k.daily,
		MonthlyLimit: k.monthly, ExpiresAt: k.expiresAt, Disabled: k.disabled, RevokedAt: k.revokedAt, At: at,
	}
	edit(&e)
	var evs []Event
	if !sameKeyState(k, &e) {
		evs = s.record(e)
	}
	if withSpend {
		return Answer{Key: k.viewAt(at)}, evs
	}
	return Answer{Key: k.view()}, evs
}

func sameKeyState(k *key, e *KeyChanged) bool {
	return k.name == e.Name && slices.Equal(k.allowedModels, e.AllowedModels) &&
		equalPtr(k.daily, e.DailyLimit) && equalPtr(k.monthly, e.MonthlyLimit) &&
		equalTime(k.expiresAt, e.ExpiresAt) && k.disabled == e.Disabled && equalTime(k.revokedAt, e.RevokedAt)
}

func equalPtr[T comparable](a, b *T) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

func equalTime(a, b *time.Time) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Equal(*b)
}

func (s *State) updateKey(c *UpdateKey) (Answer, []Event) {
	u := c.Update
	for _, lim := range []ledger.Set[*ledger.Micros]{u.DailyLimit, u.MonthlyLimit} {
		if lim.Set && lim.Value != nil && *lim.Value < 0 {
			return invalid("a key limit must not be negative"), nil
		}
	}
	if slices.Contains(u.AllowedModels.Value, "") {
		return invalid("allowed models must not contain empty names"), nil
	}
	k := s.keys[u.ID]
	if k == nil {
		return refused(ledger.ErrNotFound), nil
	}
	// The placement is checked before anything is recorded, and recorded with the
	// change: both or neither.
	placed, moved, d := s.placement(k, ledger.KeyPlacement{KeyID: k.id, ProjectID: u.ProjectID, RPM: u.RPM, TPM: u.TPM}, norm(c.At))
	if d != "" {
		return invalid(d), nil
	}
	ans, evs := s.changeKey(u.ID, c.At, true, func(e *KeyChanged) {
		if u.Name.Set {
			e.Name = u.Name.Value
		}
		if u.AllowedModels.Set {
			e.AllowedModels = models(u.AllowedModels.Value)
		}
		if u.DailyLimit.Set {
			e.DailyLimit = clonePtr(u.DailyLimit.Value)
		}
		if u.MonthlyLimit.Set {
			e.MonthlyLimit = clonePtr(u.MonthlyLimit.Value)
		}
		if u.ExpiresAt.Set {
			e.ExpiresAt = normPtr(u.ExpiresAt.Value)
		}
	})
	if moved {
		evs = append(evs, s.record(placed)...)
		ans.Key = k.viewAt(placed.At)
	}
	return ans, evs
}

func (s *State) authenticate(c *Authenticate) Answer {
	k := s.byHash[string(c.Hash)]
	if k == nil || !k.usable(norm(c.At)) {
		return refused(ledger.Refuse(ledger.ReasonInvalidAPIKey, "unknown, disabled, revoked or expired key"))
	}
	a := k.acct
	return Answer{Grant: ledger.Grant{
		KeyID: k.id, AccountID: a.id, AllowedModels: k.allowedModels, DailyLimit: k.daily,
		MonthlyLimit: k.monthly, ExpiresAt: k.expiresAt, AdminCreated: k.adminCreated,
		Tier: a.tier.Name, AccountSuspended: a.suspended, AccountToppedUp: a.toppedUp,
		EffectiveModels: k.effectiveModels(),
	}}
}

func (s *State) recordVideoTask(c *RecordVideoTask) (Answer, []Event) {
	if c.TaskID == "" {
		return invalid("a video task needs an id"), nil
	}
	k := s.keys[c.KeyID]
	if k == nil {
		return refused(ledger.ErrNotFound), nil
	}
	if s.videoTasks[c.TaskID] != nil {
		return refused(ledger.Refuse(ledger.ReasonAlreadyExists, "the video task is already recorded")), nil
	}
	t := ledger.VideoTask{
		TaskID: c.TaskID, AccountID: k.acct.id, KeyID: k.id, AdminCreatedKey: k.adminCreated,
		Model: c.Model, CreatedAt: norm(c.At), Origin: c.Origin,
	}
	if t.Origin.UpstreamTaskID == "" {
		t.Origin.UpstreamTaskID = t.TaskID
	}
	return Answer{VideoTask: t}, s.record(VideoTaskRecorded{Task: t})
}
