package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// accountGate bounds how many statements of one account may hold or wait for a database
// connection at once. Every Reserve, Commit and Release of an account serializes on that
// account's row lock, so more than a few concurrent statements per account buy nothing;
// without the bound, calls queued behind one locked account row take every connection
// of the pool and calls for other accounts fail. Calls over the bound wait here, in the
// process, holding no connection. They wait as long as the account makes progress (a
// call of it finished without timing out within the last wait); when none has for wait,
// they give up with ledger.ErrBusy, as they do before their caller's deadline would pass
// (deadline.go). So a burst on a healthy account queues, and a locked account fails fast.
type accountGate struct {
	limit int
	wait  time.Duration

	mu    sync.Mutex
	slots map[string]*gateSlots
}

type gateSlots struct {
	sem      chan struct{}
	users    int    // callers holding or waiting for a slot; the entry is dropped at zero
	progress uint64 // calls that finished without ledger.ErrBusy
}

func newAccountGate(limit int, wait time.Duration) *accountGate {
	return &accountGate{limit: limit, wait: wait, slots: make(map[string]*gateSlots)}
}

// gatePass is a slot taken by enter; done gives it back.
type gatePass struct {
	g       *accountGate
	account string
	e       *gateSlots
}

// done gives the slot back; err is the call's outcome (a ledger.ErrBusy outcome is not
// progress, so it must be the store's error, before Reserve turns it into a refusal).
// Call it exactly once; a nil pass is a no-op.
func (p *gatePass) done(err error) {
	if p == nil {
		return
	}
	<-p.e.sem
	p.g.mu.Lock()
	if !errors.Is(err, ledger.ErrBusy) {
		p.e.progress++
	}
	p.g.leave(p.account, p.e)
	p.g.mu.Unlock()
}

// leave drops one user of e; g.mu is held.
func (g *accountGate) leave(account string, e *gateSlots) {
	if e.users--; e.users == 0 {
		delete(g.slots, account)
	}
}

func (g *accountGate) progress(e *gateSlots) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return e.progress
}

// enter takes one of account's slots, waiting while the account makes progress, and
// never past what ctx's deadline leaves (deadline.go).
func (g *accountGate) enter(ctx context.Context, account string) (*gatePass, error) {
	left, bounded := waitLeft(ctx)
	if bounded && left <= 0 {
		return nil, errNoTimeLeft("a slot of the account")
	}
	g.mu.Lock()
	e := g.slots[account]
	if e == nil {
		e = &gateSlots{sem: make(chan struct{}, g.limit)}
		g.slots[account] = e
	}
	e.users++
	seen := e.progress
	g.mu.Unlock()
	pass := &gatePass{g: g, account: account, e: e}
	select {
	case e.sem <- struct{}{}:
		return pass, nil
	default:
	}
	giveBack := func(err error) (*gatePass, error) {
		g.mu.Lock()
		g.leave(account, e)
		g.mu.Unlock()
		return nil, err
	}
	var giveUp <-chan time.Time
	if bounded {
		gt := time.NewTimer(left)
		defer gt.Stop()
		giveUp = gt.C
	}
	t := time.NewTimer(g.wait)
	defer t.Stop()
	for {
		select {
		case e.sem <- struct{}{}:
			return pass, nil
		case <-ctx.Done():
			return giveBack(&Error{Op: "account gate", Err: ctx.Err()})
		case <-giveUp:
			return giveBack(errNoTimeLeft("a slot of the account"))
		case <-t.C:
			if now := g.progress(e); now != seen {
				seen = now
				t.Reset(g.wait)
				continue
			}
			return giveBack(fmt.Errorf("ledger store: %w: no call of the account finished in %s", ledger.ErrBusy, g.wait))
		}
	}
}

// owners maps keys and reservations to their account, so the gate can be entered before
// the statement that locks the account row. A key's account never changes; a reservation
// is remembered from its Reserve until it is settled in this process. Misses read the
// row (a plain read that no row lock blocks). Bounded: it is emptied when full.
type owners struct {
	mu sync.Mutex
	m  map[string]string
}

const ownersMax = 1 << 16

func (o *owners) get(id string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	a, ok := o.m[id]
	return a, ok
}

func (o *owners) put(id, account string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil || len(o.m) >= ownersMax {
		o.m = make(map[string]string)
	}
	o.m[id] = account
}

func (o *owners) forget(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, id)
}

// keyAccount is the account of key id ("" when the key does not exist: the statement
// that follows refuses it).
func (s *Store) keyAccount(ctx context.Context, keyID string) (string, error) {
	return s.owner(ctx, &s.keyOwners, true, "key account", `SELECT account_id::text FROM api_keys WHERE id = $1`, keyID)
}

// reservationAccount is the account of reservation id ("" when it does not exist).
func (s *Store) reservationAccount(ctx context.Context, id string) (string, error) {
	return s.owner(ctx, &s.resOwners, false, "reservation account", `SELECT account_id::text FROM reservations WHERE id = $1`, id)
}

// owner reads id's account from cache, else with query (remembering it when keep).
func (s *Store) owner(ctx context.Context, cache *owners, keep bool, op, query, id string) (string, error) {
	if a, ok := cache.get(id); ok {
		return a, nil
	}
	var a string
	if err := s.pool.QueryRow(ctx, query, id).Scan(&a); err != nil {
		if err = dbError(op, err); errors.Is(err, ledger.ErrNotFound) {
			return "", nil
		}
		return "", err
	}
	if keep {
		cache.put(id, a)
	}
	return a, nil
}

// enterAccount passes the gate of account (nothing to pass for "", an unknown owner:
// the nil pass it returns is a no-op).
func (s *Store) enterAccount(ctx context.Context, account string) (*gatePass, error) {
	if account == "" {
		return nil, nil
	}
	return s.gate.enter(ctx, account)
}
