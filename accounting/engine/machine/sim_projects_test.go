package machine

import (
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// The simulation's projects: random trees, limits, placements and token bounds, and a
// reference model of what each project and bucket holds.

type projModel struct {
	ids       []string
	parent    map[string]string
	account   map[string]string
	keyProj   map[string]string // key → project ("" none)
	tpm       map[string]bool   // key or project id → a tpm is set
	held      map[string]ledger.Micros
	tokens    map[string]int64             // key or project id → tokens held by holds in flight
	res       map[string]*projRes          // reservation → what it holds
	allowance map[projWindow]ledger.Micros // a window's bound since its limit last changed
	admitted  int                          // reserves admitted on a key in a project
}

type projRes struct {
	path   []string
	amount ledger.Micros
	tokens int64
	taken  []string // the ids whose buckets it took from
}

type projWindow struct {
	id     string
	period string
	start  time.Time
}

func newProjModel() *projModel {
	return &projModel{parent: map[string]string{}, account: map[string]string{}, keyProj: map[string]string{},
		tpm: map[string]bool{}, held: map[string]ledger.Micros{}, tokens: map[string]int64{},
		res: map[string]*projRes{}, allowance: map[projWindow]ledger.Micros{}}
}

func (m *sim) optMicros(n int) *ledger.Micros {
	if m.rng.IntN(2) == 0 {
		return nil
	}
	return ptr(ledger.Micros(m.rng.IntN(n)))
}

func (m *sim) optCount(n int) *int64 {
	if m.rng.IntN(2) == 0 {
		return nil
	}
	return ptr(int64(1 + m.rng.IntN(n)))
}

func (m *sim) optModels() []string {
	switch m.rng.IntN(4) {
	case 0:
		return []string{"m"}
	case 1:
		return []string{"n"}
	}
	return nil
}

// projectCommand is a project command about one step in eight, else nil.
func (m *sim) projectCommand() Command {
	if m.rng.IntN(8) != 0 || len(m.accounts) == 0 {
		return nil
	}
	pm := m.pm
	pid, _ := pick(m, pm.ids)
	switch r := m.rng.IntN(10); {
	case r < 2 || pid == "":
		acct, _ := pick(m, m.accounts)
		parent := ""
		if p, ok := pick(m, pm.ids); ok && m.rng.IntN(3) > 0 {
			parent, acct = p, pm.account[p]
		}
		return CreateProject{ID: m.newID(5), Project: ledger.NewProject{AccountID: acct, ParentID: parent, Name: "p",
			DailyLimit: m.optMicros(4000), MonthlyLimit: m.optMicros(8000), Limit: m.optMicros(12000),
			RPM: m.optCount(20), TPM: m.optCount(3000), Models: m.optModels()}, At: m.now}
	case r < 5:
		u := ledger.ProjectUpdate{ID: pid}
		switch m.rng.IntN(6) {
		case 0:
			u.DailyLimit = ledger.To(m.optMicros(4000))
		case 1:
			u.MonthlyLimit = ledger.To(m.optMicros(8000))
		case 2:
			u.Limit = ledger.To(m.optMicros(12000))
		case 3:
			u.RPM = ledger.To(m.optCount(20))
		case 4:
			u.TPM = ledger.To(m.optCount(3000))
		default:
			u.Models = ledger.To(m.optModels())
		}
		return UpdateProject{Update: u, At: m.now}
	case r < 6:
		return DeleteProject{ProjectID: pid, At: m.now}
	}
	keyID, _ := pick(m, m.keys)
	if k := m.s.keys[keyID]; k != nil && m.rng.IntN(4) > 0 { // mostly a project of the key's account
		var own []string
		for _, id := range pm.ids {
			if pm.account[id] == k.acct.id {
				own = append(own, id)
			}
		}
		if p, ok := pick(m, own); ok {
			pid = p
		}
	}
	pl := ledger.KeyPlacement{KeyID: keyID}
	switch m.rng.IntN(4) {
	case 0:
		pl.ProjectID = ledger.To("")
	case 1:
		pl.RPM, pl.TPM = ledger.To(m.optCount(20)), ledger.To(m.optCount(3000))
	default:
		pl.ProjectID = ledger.To(pid) // of another account, sometimes: refused
	}
	return PlaceKey{Placement: pl, At: m.now}
}

// path is the projects of a key in the model, nearest first.
func (pm *projModel) path(keyID string) []string {
	var out []string
	for p := pm.keyProj[keyID]; p != ""; p = pm.parent[p] {
		out = append(out, p)
	}
	return out
}

// foldProjects updates the project model from one event (already applied to m.s).
func (m *sim) foldProjects(e Event) {
	pm := m.pm
	switch e := e.(type) {
	case ProjectCreated:
		pm.ids = append(pm.ids, e.ID)
		pm.parent[e.ID], pm.account[e.ID], pm.tpm[e.ID] = e.ParentID, e.AccountID, e.TPM != nil
		if n := len(pm.path2(e.ID)); n > ledger.MaxProjectLevels {
			m.fatalf("project %s at level %d", e.ID, n)
		}
	case ProjectChanged:
		pm.tpm[e.ProjectID] = e.TPM != nil
		p := m.s.projects[e.ProjectID]
		for _, w := range append([]*window{&p.life}, p.windows...) {
			if lim := windowLimit(p, w.period); lim != nil {
				pm.allowance[projWindow{p.id, w.period, w.start}] = max(*lim, w.committed+w.held)
			}
		}
	case ProjectDeleted:
		for i, id := range pm.ids {
			if id == e.ProjectID {
				pm.ids = append(pm.ids[:i], pm.ids[i+1:]...)
				break
			}
		}
		if pm.held[e.ProjectID] != 0 || pm.tokens[e.ProjectID] != 0 {
			m.fatalf("project %s deleted holding %d, %d tokens", e.ProjectID, pm.held[e.ProjectID], pm.tokens[e.ProjectID])
		}
	case KeyPlaced:
		if e.ProjectID != "" && pm.account[e.ProjectID] != m.s.keys[e.KeyID].acct.id {
			m.fatalf("key %s placed in project %s of another account", e.KeyID, e.ProjectID)
		}
		pm.keyProj[e.KeyID], pm.tpm[e.KeyID] = e.ProjectID, e.TPM != nil
	case Reserved:
		pr := &projRes{path: pm.path(e.KeyID), amount: e.Amount, tokens: e.Tokens}
		for _, id := range append([]string{e.KeyID}, pr.path...) {
			if pm.tpm[id] {
				pr.taken = append(pr.taken, id)
				pm.tokens[id] += e.Tokens
			}
		}
		for _, p := range pr.path {
			pm.held[p] += e.Amount
		}
		if len(pr.path) > 0 {
			pm.admitted++
		}
		pm.res[e.ID] = pr
	case Committed:
		m.projSettled(e.ReservationID)
	case Released:
		m.projSettled(e.ReservationID)
	}
}

// path2 is a project's own path, itself first.
func (pm *projModel) path2(id string) []string {
	var out []string
	for p := id; p != ""; p = pm.parent[p] {
		out = append(out, p)
	}
	return out
}

// projSettled gives back what a reservation held, which it must hold.
func (m *sim) projSettled(id string) {
	pm := m.pm
	pr := pm.res[id]
	if pr == nil {
		m.fatalf("reservation %s settled twice on its projects", id)
	}
	for _, p := range pr.path {
		pm.held[p] -= pr.amount
	}
	for _, b := range pr.taken {
		pm.tokens[b] -= pr.tokens
	}
	delete(pm.res, id)
}

func windowLimit(p *project, period string) *ledger.Micros {
	switch period {
	case periodDay:
		return p.daily
	case periodMonth:
		return p.monthly
	}
	return p.limit
}

// checkProjects: for every project and window, committed + held ≤ the limit (or, after
// a limit was lowered below it, never more than it was then); no bucket below zero;
// what the model says each project and bucket holds.
func (m *sim) checkProjects() {
	pm := m.pm
	if len(pm.ids) != len(m.s.projects) {
		m.fatalf("%d projects, the model %d", len(m.s.projects), len(pm.ids))
	}
	for id, p := range m.s.projects {
		for _, w := range append([]*window{&p.life}, p.windows...) {
			lim := windowLimit(p, w.period)
			if lim == nil {
				continue
			}
			bound := *lim
			if a, ok := pm.allowance[projWindow{id, w.period, w.start}]; ok {
				bound = a
			}
			if w.committed+w.held > bound {
				m.fatalf("project %s window %s %v: committed %d + held %d > %d", id, w.period, w.start, w.committed, w.held, bound)
			}
		}
		if p.life.held != pm.held[id] {
			m.fatalf("project %s holds %d, the model %d", id, p.life.held, pm.held[id])
		}
		if p.bucket.level < 0 || p.bucket.held != pm.tokens[id] {
			m.fatalf("project %s bucket level %d, held %d; the model %d", id, p.bucket.level, p.bucket.held, pm.tokens[id])
		}
	}
	for id, k := range m.s.keys {
		if k.bucket.level < 0 || k.bucket.held != pm.tokens[id] {
			m.fatalf("key %s bucket level %d, held %d; the model %d", id, k.bucket.level, k.bucket.held, pm.tokens[id])
		}
	}
}
