package machine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// Projects divide an account: a tree of at most ledger.MaxProjectLevels levels, each
// node with optional spend windows (UTC day, UTC month, lifetime), rpm, tpm and a model
// allowlist. A key is in at most one project of its own account; a hold of the key is
// held on the key's project and every ancestor too, so a project's spend counts its
// descendants'.

type project struct {
	id        string
	acct      *account
	parent    *project
	level     int // 1 for a top-level project
	name      string
	daily     *ledger.Micros
	monthly   *ledger.Micros
	limit     *ledger.Micros // lifetime
	models    []string       // nil: every model
	createdAt time.Time
	keys      int // keys in it
	children  int // projects whose parent it is
	holds     int // held reservations on its path
	windows   spendWindows
	life      window // lifetime spend: committed and held
	rates
}

// periodLifetime names a project's lifetime window in refusals and snapshots.
const periodLifetime = "l"

// pathHold is what a reservation holds beyond its account and key's windows: the
// projects on its key's path when it was admitted (nearest first), its token bound, and
// which buckets it took the bound from (bit 0 the key's, bit i+1 path[i]'s).
type pathHold struct {
	path   [ledger.MaxProjectLevels]*project
	tokens int64
	taken  uint8
}

// Commands.
type (
	CreateProject struct {
		ID      string
		Project ledger.NewProject
		At      time.Time
	}
	UpdateProject struct {
		Update ledger.ProjectUpdate
		At     time.Time
	}
	// DeleteProject is refused while the project has keys, child projects or holds in
	// flight.
	DeleteProject struct {
		ProjectID string
		At        time.Time
	}
	// PlaceKey moves a key into a project of its account, or out of any, and sets its
	// rpm and tpm. Holds in flight stay where they were admitted.
	PlaceKey struct {
		Placement ledger.KeyPlacement
		At        time.Time
	}
	GetProject struct {
		ProjectID string
		At        time.Time
	}
	ListProjects struct {
		AccountID string
		At        time.Time
	}
)

// Events.
type (
	ProjectCreated struct {
		ID           string
		AccountID    string
		ParentID     string
		Name         string
		DailyLimit   *ledger.Micros
		MonthlyLimit *ledger.Micros
		Limit        *ledger.Micros
		RPM          *int64
		TPM          *int64
		Models       []string
		At           time.Time
	}
	// ProjectChanged is a project's whole mutable state after a change.
	ProjectChanged struct {
		ProjectID    string
		Name         string
		DailyLimit   *ledger.Micros
		MonthlyLimit *ledger.Micros
		Limit        *ledger.Micros
		RPM          *int64
		TPM          *int64
		Models       []string
		At           time.Time
	}
	ProjectDeleted struct {
		ProjectID string
		At        time.Time
	}
	// KeyPlaced is a key's project ("" for none) and rate limits after a change.
	KeyPlaced struct {
		KeyID     string
		ProjectID string
		RPM       *int64
		TPM       *int64
		At        time.Time
	}
)

func (ProjectCreated) event() {}
func (ProjectChanged) event() {}
func (ProjectDeleted) event() {}
func (KeyPlaced) event()      {}

func (CreateProject) command() {}
func (UpdateProject) command() {}
func (DeleteProject) command() {}
func (PlaceKey) command()      {}
func (GetProject) command()    {}
func (ListProjects) command()  {}

// validProject is the detail of invalid project settings, or "".
func validProject(name string, limits [3]*ledger.Micros, rpm, tpm *int64, models []string) string {
	switch {
	case name == "":
		return "a project needs a name"
	case slices.Contains(models, ""):
		return "allowed models must not contain empty names"
	}
	for _, l := range limits {
		if l != nil && *l < 0 {
			return "a project limit must not be negative"
		}
	}
	return validRates(rpm, tpm)
}

func (s *State) createProject(c *CreateProject) (Answer, []Event) {
	np := c.Project
	if d := validProject(np.Name, [3]*ledger.Micros{np.DailyLimit, np.MonthlyLimit, np.Limit}, np.RPM, np.TPM, np.Models); d != "" {
		return invalid(d), nil
	}
	a := s.accounts[np.AccountID]
	if a == nil {
		return refused(ledger.ErrNotFound), nil
	}
	if s.projects[c.ID] != nil {
		return refused(ledger.Refuse(ledger.ReasonAlreadyExists, "create project: already exists")), nil
	}
	if np.ParentID != "" {
		parent := s.projects[np.ParentID]
		switch {
		case parent == nil || parent.acct != a:
			return invalid("the parent project is not a project of the account"), nil
		case parent.level >= ledger.MaxProjectLevels:
			return invalid("projects nest at most 4 levels deep"), nil
		}
	}
	at := norm(c.At)
	evs := s.record(ProjectCreated{
		ID: c.ID, AccountID: a.id, ParentID: np.ParentID, Name: np.Name, DailyLimit: clonePtr(np.DailyLimit),
		MonthlyLimit: clonePtr(np.MonthlyLimit), Limit: clonePtr(np.Limit), RPM: clonePtr(np.RPM),
		TPM: clonePtr(np.TPM), Models: models(np.Models), At: at,
	})
	return Answer{Project: s.projects[c.ID].viewAt(at)}, evs
}

func (s *State) updateProject(c *UpdateProject) (Answer, []Event) {
	u := c.Update
	p := s.projects[u.ID]
	if p == nil {
		return refused(ledger.ErrNotFound), nil
	}
	e := ProjectChanged{
		ProjectID: p.id, Name: p.name, DailyLimit: p.daily, MonthlyLimit: p.monthly, Limit: p.limit,
		RPM: p.rpm, TPM: p.tpm, Models: p.models, At: norm(c.At),
	}
	setTo(&e.Name, u.Name)
	setTo(&e.DailyLimit, u.DailyLimit)
	setTo(&e.MonthlyLimit, u.MonthlyLimit)
	setTo(&e.Limit, u.Limit)
	setTo(&e.RPM, u.RPM)
	setTo(&e.TPM, u.TPM)
	if u.Models.Set {
		e.Models = models(u.Models.Value)
	}
	if d := validProject(e.Name, [3]*ledger.Micros{e.DailyLimit, e.MonthlyLimit, e.Limit}, e.RPM, e.TPM, e.Models); d != "" {
		return invalid(d), nil
	}
	var evs []Event
	if !(p.name == e.Name && equalPtr(p.daily, e.DailyLimit) && equalPtr(p.monthly, e.MonthlyLimit) &&
		equalPtr(p.limit, e.Limit) && equalPtr(p.rpm, e.RPM) && equalPtr(p.tpm, e.TPM) && slices.Equal(p.models, e.Models) &&
		(p.models == nil) == (e.Models == nil)) {
		e.DailyLimit, e.MonthlyLimit, e.Limit = clonePtr(e.DailyLimit), clonePtr(e.MonthlyLimit), clonePtr(e.Limit)
		e.RPM, e.TPM = clonePtr(e.RPM), clonePtr(e.TPM)
		evs = s.record(e)
	}
	return Answer{Project: p.viewAt(e.At)}, evs
}

// setTo sets *dst to u's value when it is Set.
func setTo[T any](dst *T, u ledger.Set[T]) {
	if u.Set {
		*dst = u.Value
	}
}

func (s *State) deleteProject(c *DeleteProject) (Answer, []Event) {
	p := s.projects[c.ProjectID]
	switch {
	case p == nil:
		return refused(ledger.ErrNotFound), nil
	case p.keys > 0 || p.children > 0:
		return refused(ledger.Refuse(ledger.ReasonInUse, fmt.Sprintf(
			"%s still has %d keys and %d child projects: move or delete them first", p.who(), p.keys, p.children))), nil
	case p.holds > 0:
		return refused(ledger.Refuse(ledger.ReasonInUse, p.who()+" still has requests in flight: retry when they end")), nil
	}
	at := norm(c.At)
	v := p.viewAt(at)
	return Answer{Project: v}, s.record(ProjectDeleted{ProjectID: p.id, At: at})
}

func (s *State) placeKey(c *PlaceKey) (Answer, []Event) {
	k := s.keys[c.Placement.KeyID]
	if k == nil {
		return refused(ledger.ErrNotFound), nil
	}
	at := norm(c.At)
	e, changed, d := s.placement(k, c.Placement, at)
	if d != "" {
		return invalid(d), nil
	}
	var evs []Event
	if changed {
		evs = s.record(e)
	}
	return Answer{Key: k.viewAt(at)}, evs
}

// placement is the KeyPlaced event that pl makes of k at at, and whether it changes
// anything; d is the detail of an invalid placement, or "".
func (s *State) placement(k *key, pl ledger.KeyPlacement, at time.Time) (e KeyPlaced, changed bool, d string) {
	e = KeyPlaced{KeyID: k.id, ProjectID: k.projectID(), RPM: k.rpm, TPM: k.tpm, At: at}
	setTo(&e.ProjectID, pl.ProjectID)
	setTo(&e.RPM, pl.RPM)
	setTo(&e.TPM, pl.TPM)
	if d := s.validPlacement(k.acct, e.ProjectID, e.RPM, e.TPM); d != "" {
		return e, false, d
	}
	if e.ProjectID == k.projectID() && equalPtr(k.rpm, e.RPM) && equalPtr(k.tpm, e.TPM) {
		return e, false, ""
	}
	e.RPM, e.TPM = clonePtr(e.RPM), clonePtr(e.TPM)
	return e, true, ""
}

// validPlacement is the detail of an invalid placement of a key of a in project (""
// for none) with rpm and tpm, or "".
func (s *State) validPlacement(a *account, project string, rpm, tpm *int64) string {
	if d := validRates(rpm, tpm); d != "" {
		return d
	}
	if project != "" {
		if p := s.projects[project]; p == nil || p.acct != a {
			return "the project is not a project of the key's account"
		}
	}
	return ""
}

func (s *State) listProjects(c *ListProjects) Answer {
	a := s.accounts[c.AccountID]
	if a == nil {
		return refused(ledger.ErrNotFound)
	}
	at := norm(c.At)
	out := []ledger.Project{}
	for _, p := range s.projects {
		if p.acct == a {
			out = append(out, p.viewAt(at))
		}
	}
	slices.SortFunc(out, func(a, b ledger.Project) int { return strings.Compare(a.ID, b.ID) })
	return Answer{Projects: out}
}

func (s *State) mustProject(id string) *project {
	p := s.projects[id]
	if p == nil {
		panic("machine: event for unknown project " + id)
	}
	return p
}

func (s *State) applyProjectCreated(e *ProjectCreated) {
	p := &project{
		id: e.ID, acct: s.mustAccount(e.AccountID), level: 1, name: e.Name, daily: e.DailyLimit,
		monthly: e.MonthlyLimit, limit: e.Limit, models: e.Models, createdAt: e.At,
		life: window{period: periodLifetime},
	}
	if e.ParentID != "" {
		p.parent = s.mustProject(e.ParentID)
		p.parent.children++
		p.level = p.parent.level + 1
	}
	p.rates.set(e.RPM, e.TPM, e.At)
	s.projects[p.id] = p
}

func (s *State) applyProjectChanged(e *ProjectChanged) {
	p := s.mustProject(e.ProjectID)
	if !equalPtr(p.daily, e.DailyLimit) {
		rearm(p.windows, periodDay, e.DailyLimit)
	}
	if !equalPtr(p.monthly, e.MonthlyLimit) {
		rearm(p.windows, periodMonth, e.MonthlyLimit)
	}
	if !equalPtr(p.limit, e.Limit) {
		rearm([]*window{&p.life}, periodLifetime, e.Limit)
	}
	p.name, p.daily, p.monthly, p.limit, p.models = e.Name, e.DailyLimit, e.MonthlyLimit, e.Limit, e.Models
	p.rates.set(e.RPM, e.TPM, e.At)
}

func (s *State) applyProjectDeleted(e *ProjectDeleted) {
	p := s.mustProject(e.ProjectID)
	if p.parent != nil {
		p.parent.children--
	}
	delete(s.projects, p.id)
	// Settled reservations still name it (none held: deletion waits for them).
	for _, r := range s.reservations {
		h := &r.hold
		if i := slices.Index(h.path[:], p); i >= 0 {
			copy(h.path[i:], h.path[i+1:])
			h.path[len(h.path)-1] = nil
		}
	}
}

func (s *State) applyKeyPlaced(e *KeyPlaced) {
	k := s.mustKey(e.KeyID)
	if k.project != nil {
		k.project.keys--
		k.project = nil
	}
	if e.ProjectID != "" {
		k.project = s.mustProject(e.ProjectID)
		k.project.keys++
	}
	k.rates.set(e.RPM, e.TPM, e.At)
}

// allows reports whether every project on k's path allows model. The key's own
// allowlist is checked where the key is authenticated (extproc, from its grant), as
// before projects.
func (k *key) allows(model string) bool {
	for p := k.project; p != nil; p = p.parent {
		if p.models != nil && !slices.Contains(p.models, model) {
			return false
		}
	}
	return true
}

// effectiveModels is what k may call once the allowlists of the projects on its path
// apply: its own allowlist (else the nearest restricting project's) less what any
// project on the path does not allow, in that list's order. nil when no project on the
// path restricts models; empty, not nil, when none is left.
func (k *key) effectiveModels() []string {
	var from []string
	restricted := false
	for p := k.project; p != nil; p = p.parent {
		if p.models != nil {
			if !restricted && len(k.allowedModels) == 0 {
				from = p.models
			}
			restricted = true
		}
	}
	if !restricted {
		return nil
	}
	if len(k.allowedModels) > 0 {
		from = k.allowedModels
	}
	out := []string{}
	for _, m := range from {
		if k.allows(m) && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// modelRefused names the project on k's path that does not allow model.
func modelRefused(k *key, model string) Answer {
	p := k.project
	for p.models == nil || slices.Contains(p.models, model) {
		p = p.parent
	}
	return refused(&ledger.Refusal{Reason: ledger.ReasonModelNotAllowed, Limit: "project:" + p.id + ":models",
		Detail: p.who() + " does not allow the model " + model})
}

func (p *project) who() string { return "project " + p.name + " (" + p.id + ")" }

// projectLimits checks the spend windows of p and its ancestors for amount more at now,
// each project's lifetime, monthly then daily limit. A refusal's limit is
// "project:ID:daily" (monthly, lifetime); its retry-after is the window's end, or the
// concurrency retry-after when holds in flight would free enough before.
func projectLimits(p *project, amount ledger.Micros, now time.Time) (Answer, bool) {
	if p == nil {
		return Answer{}, true
	}
	day, month := dayStart(now), monthStart(now)
	for ; p != nil; p = p.parent {
		type check struct {
			limit *ledger.Micros
			w     *window
			name  string
		}
		for _, c := range [3]check{
			{p.limit, &p.life, "lifetime"},
			{p.monthly, p.windows.at(periodMonth, month), "monthly"},
			{p.daily, p.windows.at(periodDay, day), "daily"},
		} {
			var committed, held ledger.Micros
			if c.w != nil {
				committed, held = c.w.committed, c.w.held
				if sumOverflows(held, amount) || sumOverflows(committed+held, amount) {
					return outOfRange("reserve"), false
				}
			}
			if c.limit == nil || committed+held+amount <= *c.limit {
				continue
			}
			retry := 0
			if committed+amount <= *c.limit {
				retry = ledger.ConcurrencyRetryAfter
			}
			if c.name != "lifetime" {
				start, period := day, periodDay
				if c.name == "monthly" {
					start, period = month, periodMonth
				}
				if end := retryAfter(now, windowEnd(period, start)); retry == 0 || end < retry {
					retry = end
				}
			}
			return refused(&ledger.Refusal{
				Reason: ledger.ReasonKeyLimitReached, Limit: "project:" + p.id + ":" + c.name, RetryAfter: retry,
				Detail: p.who() + ": the " + c.name + " spend limit would be crossed",
			}), false
		}
	}
	return Answer{}, true
}

// rateLimits checks the rpm and tpm of k and of every project on its path for one more
// request of tokens at now.
func rateLimits(k *key, tokens int64, now time.Time) (Answer, bool) {
	if r := k.rates.refusal(tokens, now, nil); r != nil {
		return refused(r), false
	}
	for p := k.project; p != nil; p = p.parent {
		if p.rpm == nil && p.tpm == nil {
			continue
		}
		if r := p.rates.refusal(tokens, now, p); r != nil {
			return refused(r), false
		}
	}
	return Answer{}, true
}

// holdOnPath holds r (admitted at at with a token bound of tokens) on its key's rates
// and on every project of its key's path.
func (s *State) holdOnPath(r *reservation, tokens int64, at time.Time) {
	k := r.key
	h := &r.hold
	h.tokens = tokens
	if k.rates.admit(tokens, at) {
		h.taken |= 1
	}
	i := 0
	for p := k.project; p != nil; p = p.parent {
		h.path[i] = p
		p.holds++
		if r.amount > 0 {
			p.windows.open(periodDay, dayStart(at)).held += r.amount
			p.windows.open(periodMonth, monthStart(at)).held += r.amount
			p.life.held += r.amount
		}
		if (p.rpm != nil || p.tpm != nil) && p.rates.admit(tokens, at) {
			h.taken |= 1 << (i + 1)
		}
		i++
	}
}

// settlePath gives back what r holds on its path, charging charged to its projects'
// windows and keeping used of its token bound taken.
func (s *State) settlePath(r *reservation, charged ledger.Micros, used int64, at time.Time) {
	h := &r.hold
	if h.taken&1 != 0 {
		r.key.bucket.giveBack(r.key.tpm, h.tokens, used, at)
	}
	day, month := dayStart(r.createdAt), monthStart(r.createdAt)
	for i, p := range h.path {
		if p == nil {
			break
		}
		p.holds--
		if r.amount > 0 {
			for _, w := range [3]*window{p.windows.at(periodDay, day), p.windows.at(periodMonth, month), &p.life} {
				w.held -= r.amount
				w.committed += charged
			}
		}
		if h.taken&(1<<(i+1)) != 0 {
			p.bucket.giveBack(p.tpm, h.tokens, used, at)
		}
	}
	h.taken = 0
}

// viewAt is p with its spend in the UTC day and month of at.
func (p *project) viewAt(at time.Time) ledger.Project {
	v := ledger.Project{
		ID: p.id, AccountID: p.acct.id, Name: p.name, DailyLimit: p.daily, MonthlyLimit: p.monthly,
		Limit: p.limit, RPM: p.rpm, TPM: p.tpm, Models: p.models, Spent: p.life.committed,
		Reserved: p.life.held, CreatedAt: p.createdAt,
	}
	if p.parent != nil {
		v.ParentID = p.parent.id
	}
	if w := p.windows.at(periodDay, dayStart(at)); w != nil {
		v.SpentToday = w.committed
	}
	if w := p.windows.at(periodMonth, monthStart(at)); w != nil {
		v.SpentMonth = w.committed
	}
	return v
}
