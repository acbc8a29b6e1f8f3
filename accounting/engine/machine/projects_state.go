package machine

import (
	"fmt"
	"slices"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// Projects and rates in snapshots, and their invariants.

// ProjectState is a project as stored, with its lifetime spend (its day and month
// spend live in ProjectWindows).
type ProjectState struct {
	ID           string
	AccountID    string
	ParentID     string `json:",omitempty"`
	Name         string
	DailyLimit   *ledger.Micros `json:",omitempty"`
	MonthlyLimit *ledger.Micros `json:",omitempty"`
	Limit        *ledger.Micros `json:",omitempty"`
	RPM          *int64         `json:",omitempty"`
	TPM          *int64         `json:",omitempty"`
	Models       []string       `json:",omitempty"`
	CreatedAt    time.Time
	Spent        ledger.Micros // lifetime committed
	Held         ledger.Micros // lifetime held
	Rates        RateState     `json:",omitzero"`
	LifeFired    uint8         `json:",omitempty"` // lifetime budget thresholds alerted
}

// ProjectWindow is one project's spend in one UTC day ("d") or month ("m"), its
// descendants' included.
type ProjectWindow struct {
	ProjectID string
	Period    string
	Start     time.Time
	Committed ledger.Micros
	Held      ledger.Micros
	Fired     uint8 `json:",omitempty"` // budget thresholds alerted
}

// RateState is what a key's or project's rpm and tpm count: the admissions of the last
// minute (while an rpm is set), the token bucket's level (tokens × 60,000,000, as of
// TokensAt; while a tpm is set), and the tokens held by holds in flight.
type RateState struct {
	Admitted   []time.Time `json:",omitempty"`
	Level      int64       `json:",omitempty"`
	TokensAt   time.Time   `json:",omitzero"`
	TokensHeld int64       `json:",omitempty"`
}

func (r *rates) state() RateState {
	st := RateState{Level: r.bucket.level, TokensAt: r.bucket.at, TokensHeld: r.bucket.held}
	if len(r.admitted) > 0 {
		st.Admitted = slices.Clone(r.admitted)
	}
	return st
}

func (r *rates) restore(rpm, tpm *int64, st *RateState) {
	r.rpm, r.tpm = clonePtr(rpm), clonePtr(tpm)
	r.admitted = slices.Clone(st.Admitted)
	r.bucket = bucket{level: st.Level, at: st.TokensAt, held: st.TokensHeld}
}

func (k *key) projectID() string {
	if k.project == nil {
		return ""
	}
	return k.project.id
}

func (h *pathHold) projectIDs() []string {
	var ids []string
	for _, p := range h.path {
		if p == nil {
			break
		}
		ids = append(ids, p.id)
	}
	return ids
}

func (s *State) snapshotProjects(sn *Snapshot) {
	for _, p := range s.projects {
		ps := ProjectState{
			ID: p.id, AccountID: p.acct.id, Name: p.name, DailyLimit: clonePtr(p.daily),
			MonthlyLimit: clonePtr(p.monthly), Limit: clonePtr(p.limit), RPM: clonePtr(p.rpm), TPM: clonePtr(p.tpm),
			Models: slices.Clone(p.models), CreatedAt: p.createdAt, Spent: p.life.committed, Held: p.life.held,
			Rates: p.rates.state(), LifeFired: p.life.fired,
		}
		if p.parent != nil {
			ps.ParentID = p.parent.id
		}
		sn.Projects = append(sn.Projects, ps)
		for _, w := range p.windows {
			sn.ProjectWindows = append(sn.ProjectWindows, ProjectWindow{ProjectID: p.id, Period: w.period,
				Start: w.start, Committed: w.committed, Held: w.held, Fired: w.fired})
		}
	}
}

// restoreProjects restores the projects of sn into s, whose accounts are restored.
func restoreProjects(s *State, sn *Snapshot) {
	for _, ps := range sn.Projects {
		p := &project{
			id: ps.ID, acct: s.mustAccount(ps.AccountID), name: ps.Name, daily: clonePtr(ps.DailyLimit),
			monthly: clonePtr(ps.MonthlyLimit), limit: clonePtr(ps.Limit), models: models(ps.Models),
			createdAt: ps.CreatedAt, life: window{period: periodLifetime, committed: ps.Spent, held: ps.Held, fired: ps.LifeFired},
		}
		p.rates.restore(ps.RPM, ps.TPM, &ps.Rates)
		s.projects[p.id] = p
	}
	for _, ps := range sn.Projects {
		if ps.ParentID != "" {
			p := s.projects[ps.ID]
			p.parent = s.mustProject(ps.ParentID)
			p.parent.children++
		}
	}
	for _, p := range s.projects {
		for q := p.parent; q != nil; q = q.parent {
			p.level++
		}
		p.level++
	}
	for _, ws := range sn.ProjectWindows {
		w := s.mustProject(ws.ProjectID).windows.open(ws.Period, ws.Start)
		w.committed, w.held, w.fired = ws.Committed, ws.Held, ws.Fired
	}
}

func (s *State) restoreKeyPlace(k *key, ks *KeyState) {
	if ks.ProjectID != "" {
		k.project = s.mustProject(ks.ProjectID)
		k.project.keys++
	}
	k.rates.restore(ks.RPM, ks.TPM, &ks.Rates)
}

func (s *State) restoreHold(r *reservation, rs *ReservationState) {
	r.hold.tokens, r.hold.taken = rs.Tokens, rs.TokensTaken
	for i, id := range rs.Projects {
		p := s.mustProject(id)
		r.hold.path[i] = p
		if r.state == stateHeld {
			p.holds++
		}
	}
}

// checkProjects returns an error naming the first project or rate invariant s breaks:
// a project's windows, lifetime held and hold count equal to its held reservations',
// each bucket's held tokens equal to the bounds its held reservations took, no bucket
// below zero or above full, the tree at most ledger.MaxProjectLevels deep in one
// account, and key counts equal to the keys in each project.
func (s *State) checkProjects() error {
	type sums struct {
		day, month map[*window]ledger.Micros
		life       ledger.Micros
		holds      int
	}
	per := map[*project]*sums{}
	tokens := map[*bucket]int64{}
	for _, r := range s.reservations {
		if r.state != stateHeld {
			if r.hold.taken != 0 {
				return fmt.Errorf("reservation %s is %s and still holds tokens", r.id, stateName(r.state))
			}
			continue
		}
		h := &r.hold
		if h.taken&1 != 0 {
			tokens[&r.key.bucket] += h.tokens
		}
		for i, p := range h.path {
			if p == nil {
				break
			}
			sm := per[p]
			if sm == nil {
				sm = &sums{day: map[*window]ledger.Micros{}, month: map[*window]ledger.Micros{}}
				per[p] = sm
			}
			sm.holds++
			if r.amount > 0 {
				sm.day[p.windows.at(periodDay, dayStart(r.createdAt))] += r.amount
				sm.month[p.windows.at(periodMonth, monthStart(r.createdAt))] += r.amount
				sm.life += r.amount
			}
			if h.taken&(1<<(i+1)) != 0 {
				tokens[&p.bucket] += h.tokens
			}
		}
	}
	keys := map[*project]int{}
	for id, k := range s.keys {
		if err := checkRates(&k.rates, tokens, "key "+id); err != nil {
			return err
		}
		if k.project != nil {
			if k.project.acct != k.acct {
				return fmt.Errorf("key %s is in project %s of another account", id, k.project.id)
			}
			keys[k.project]++
		}
	}
	children := map[*project]int{}
	for id, p := range s.projects {
		if p.parent != nil {
			children[p.parent]++
			if p.parent.acct != p.acct || p.level != p.parent.level+1 {
				return fmt.Errorf("project %s: parent %s of another account or level", id, p.parent.id)
			}
		}
		if p.level < 1 || p.level > ledger.MaxProjectLevels {
			return fmt.Errorf("project %s at level %d", id, p.level)
		}
	}
	for id, p := range s.projects {
		var sm sums
		if x := per[p]; x != nil {
			sm = *x
		}
		if p.keys != keys[p] || p.children != children[p] || p.holds != sm.holds {
			return fmt.Errorf("project %s counts %d keys, %d children, %d holds; there are %d, %d, %d",
				id, p.keys, p.children, p.holds, keys[p], children[p], sm.holds)
		}
		if p.life.held != sm.life || p.life.committed < 0 {
			return fmt.Errorf("project %s: lifetime held %d, committed %d; its holds %d", id, p.life.held, p.life.committed, sm.life)
		}
		for _, w := range p.windows {
			want := sm.day[w]
			if w.period == periodMonth {
				want = sm.month[w]
			}
			if w.held != want || w.committed < 0 {
				return fmt.Errorf("project %s window %s %s: held %d, committed %d; its holds %d",
					id, w.period, w.start.Format(time.DateOnly), w.held, w.committed, want)
			}
		}
		if err := checkRates(&p.rates, tokens, "project "+id); err != nil {
			return err
		}
	}
	return nil
}

func checkRates(r *rates, tokens map[*bucket]int64, who string) error {
	b := &r.bucket
	switch {
	case b.held != tokens[b]:
		return fmt.Errorf("%s: bucket holds %d tokens, its holds %d", who, b.held, tokens[b])
	case b.level < 0:
		return fmt.Errorf("%s: bucket below zero: %d", who, b.level)
	case r.tpm != nil && b.level > *r.tpm*tokenScale:
		return fmt.Errorf("%s: bucket above full: %d of %d", who, b.level, *r.tpm*tokenScale)
	case r.rpm == nil && len(r.admitted) > 0:
		return fmt.Errorf("%s: admissions kept without an rpm", who)
	}
	return nil
}

// checkProjectsCommitted returns an error unless each project window's committed spend
// is the sum of the charges of the reservations created in it on the project's path.
func (s *State) checkProjectsCommitted() error {
	type at struct {
		p      *project
		period string
		start  time.Time
	}
	charged := map[at]ledger.Micros{}
	for _, r := range s.reservations {
		if r.charged == 0 {
			continue
		}
		for _, p := range r.hold.path {
			if p == nil {
				break
			}
			charged[at{p, periodDay, dayStart(r.createdAt)}] += r.charged
			charged[at{p, periodMonth, monthStart(r.createdAt)}] += r.charged
			charged[at{p, periodLifetime, time.Time{}}] += r.charged
		}
	}
	for id, p := range s.projects {
		for _, w := range append(slices.Clone([]*window(p.windows)), &p.life) {
			if c := charged[at{p, w.period, w.start}]; c != w.committed {
				return fmt.Errorf("project %s window %s %s: committed %d, its charges %d",
					id, w.period, w.start.Format(time.DateOnly), w.committed, c)
			}
			delete(charged, at{p, w.period, w.start})
		}
	}
	for w, c := range charged {
		if s.projects[w.p.id] == w.p {
			return fmt.Errorf("project %s: charges of %d in no %s window of %s", w.p.id, c, w.period, w.start.Format(time.DateOnly))
		}
	}
	return nil
}
