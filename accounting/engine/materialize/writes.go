package materialize

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
)

// writes is what one call's events change, gathered per table: rows to insert in
// journal order, and per account and per spend window the sum of the changes, so that
// each table takes one statement however many events the call has.
type writes struct {
	tiers      map[string]ledger.Tier // the last put of each
	accounts   []machine.AccountCreated
	money      map[string]*money
	flags      map[string]*flags
	labels     map[string]string // the last label of each account
	keys       []machine.KeyCreated
	keyChanges map[string]machine.KeyChanged // the last change of each
	entries    []entry
	spend      map[window]*spend
	videos     []ledger.VideoTask
	usage      map[usageRow]*usageSum
	projects
	alertWrites
	auditWrites
}

// money is an account's balance, hold and pool changes.
type money struct {
	balance, reserved          ledger.Micros
	inFlight, inFlightHighCost int
}

// flags are an account's flag changes: topped up (set by every top-up), suspended (nil:
// unchanged).
type flags struct {
	toppedUp  bool
	suspended *bool
}

type window struct {
	keyID, period string
	start         time.Time
}

type spend struct{ committed, held ledger.Micros }

// entry is a ledger entry: a top-up (reservation nil) or a charge.
type entry struct {
	accountID      string
	kind           string
	amount         ledger.Micros
	reservationID  *string
	idempotencyKey *string
	keyID, model   *string
	upstream       *string
	channel        *string
	project        *string
	input, output  *int64
	units          *string
	components     *string
	serviceTier    *string
	at             time.Time
}

// add gathers e when write is set (its seq is past the stored one), and folds it into
// f either way.
func (w *writes) add(e machine.Event, f *folding, write bool) error {
	holds := &f.holds
	switch e := e.(type) {
	case machine.Reserved:
		holds.put(e.ID, e)
		if p, ok := f.keyProject.get(e.KeyID); ok {
			f.heldProject.put(e.ID, p)
		}
		if write {
			w.hold(e, 1)
		}
	case machine.Committed:
		r, ok := holds.get(e.ReservationID)
		if !ok {
			return fmt.Errorf("commit of reservation %s, which is not held", e.ReservationID)
		}
		holds.drop(e.ReservationID)
		project, _ := f.heldProject.get(e.ReservationID)
		f.heldProject.drop(e.ReservationID)
		if write {
			w.hold(r, -1)
			w.charge(r, e, project)
		}
	case machine.Released:
		r, ok := holds.get(e.ReservationID)
		if !ok {
			return fmt.Errorf("release of reservation %s, which is not held", e.ReservationID)
		}
		holds.drop(e.ReservationID)
		f.heldProject.drop(e.ReservationID)
		if write {
			w.hold(r, -1)
		}
	case machine.Renewed:
		// A renewal changes no table: a hold's expiry is the owner's alone.
	case machine.KeyPlaced:
		if e.ProjectID == "" {
			f.keyProject.drop(e.KeyID)
		} else {
			f.keyProject.put(e.KeyID, e.ProjectID)
		}
		if write {
			w.placements = put(w.placements, e.KeyID, e)
		}
	case machine.Forgotten:
		// Only settled reservations and ended windows are forgotten: the windows' rows
		// stay, and a settled reservation has no row of its own.
	default:
		if write {
			return w.addRecord(e)
		}
	}
	return nil
}

// addRecord gathers the events that only write: accounts, tiers, keys, top-ups, tasks.
func (w *writes) addRecord(e machine.Event) error {
	switch e := e.(type) {
	case machine.TierPut:
		w.tiers = put(w.tiers, e.Tier.Name, e.Tier)
	case machine.AccountCreated:
		w.accounts = append(w.accounts, e)
	case machine.ToppedUp:
		w.moneyOf(e.AccountID).balance += e.Amount
		w.flagsOf(e.AccountID).toppedUp = true
		w.entries = append(w.entries, entry{accountID: e.AccountID, kind: "top_up", amount: e.Amount,
			idempotencyKey: nonEmpty(e.IdempotencyKey), at: e.At})
	case machine.AccountSuspended:
		w.flagsOf(e.AccountID).suspended = &e.Suspended
	case machine.AccountLabeled:
		w.labels = put(w.labels, e.AccountID, e.Label)
	case machine.Alerted, machine.LowBalanceSet:
		w.addAlert(e)
	case machine.Audited:
		w.addAudit(e)
	case machine.KeyCreated:
		w.keys = append(w.keys, e)
	case machine.KeyChanged:
		w.keyChanges = put(w.keyChanges, e.KeyID, e)
	case machine.VideoTaskRecorded:
		w.videos = append(w.videos, e.Task)
	case machine.ProjectCreated, machine.ProjectChanged, machine.ProjectDeleted:
		w.addProject(e)
	default:
		return fmt.Errorf("unknown event %T", e)
	}
	return nil
}

// hold adds (sign 1) or removes (-1) a held reservation's amount and pool slots.
func (w *writes) hold(r machine.Reserved, sign int) {
	m := w.moneyOf(r.AccountID)
	m.reserved += ledger.Micros(sign) * r.Amount
	m.inFlight += sign
	if r.Pool == ledger.PoolHighCost {
		m.inFlightHighCost += sign
	}
	if r.Amount > 0 { // a free request is in no spend window, as in the store
		for _, win := range windowsOf(r) {
			w.spendOf(win).held += ledger.Micros(sign) * r.Amount
		}
	}
}

// charge records r's commit: its statement entry and usage, the balance, the windows.
func (w *writes) charge(r machine.Reserved, c machine.Committed, project string) {
	w.moneyOf(r.AccountID).balance -= c.Charged
	if r.Amount > 0 {
		for _, win := range windowsOf(r) {
			w.spendOf(win).committed += c.Charged
		}
	}
	in, out := c.Usage.InputTokens, c.Usage.OutputTokens
	e := entry{accountID: r.AccountID, kind: "charge", amount: -c.Charged,
		reservationID: &r.ID, keyID: &r.KeyID, project: nonEmpty(project), model: &r.Model, upstream: nonEmpty(c.UpstreamModel),
		channel: nonEmpty(c.Channel), input: &in, output: &out, units: unitsJSON(c.Usage.Units),
		components: componentsJSON(c.Usage.Components), serviceTier: nonEmpty(c.Usage.ServiceTier), at: c.At}
	w.entries = append(w.entries, e)
	w.use(e, c.Usage)
}

// windowsOf is the UTC day and month of r's creation: the key spend windows it counts in.
func windowsOf(r machine.Reserved) [2]window {
	t := r.At.UTC()
	return [2]window{
		{r.KeyID, "d", time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)},
		{r.KeyID, "m", time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)},
	}
}

func (w *writes) moneyOf(id string) *money  { return at(&w.money, id) }
func (w *writes) flagsOf(id string) *flags  { return at(&w.flags, id) }
func (w *writes) spendOf(win window) *spend { return at(&w.spend, win) }

// at returns m's value of k, made (and m too) when missing.
func at[K comparable, V any](m *map[K]*V, k K) *V {
	if *m == nil {
		*m = make(map[K]*V)
	}
	v, ok := (*m)[k]
	if !ok {
		v = new(V)
		(*m)[k] = v
	}
	return v
}

// put sets m[k] = v, making m when nil.
func put[K comparable, V any](m map[K]V, k K, v V) map[K]V {
	if m == nil {
		m = make(map[K]V)
	}
	m[k] = v
	return m
}

// sortedKeys returns m's keys in order: rows are written in one order whatever the
// map's, so that two runs over the same events write the same tables.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// storedComponent is a charge component as the store keeps it in ledger_entries'
// components column (migrations/0012).
type storedComponent struct {
	Name         string `json:"name"`
	Units        int64  `json:"units"`
	PricePerMTok int64  `json:"price_per_mtok"`
	Amount       int64  `json:"amount"`
}

// componentsJSON is a charge's components as jsonb text, nil (NULL) when there are none.
func componentsJSON(cs []ledger.Component) *string {
	if len(cs) == 0 {
		return nil
	}
	out := make([]storedComponent, len(cs))
	for i, c := range cs {
		out[i] = storedComponent{Name: c.Name, Units: c.Units, PricePerMTok: c.PricePerMTok, Amount: c.Amount}
	}
	return jsonText(out)
}

// unitsJSON is a charge's units as jsonb text, nil (NULL) when there are none.
func unitsJSON(u map[string]int64) *string {
	if len(u) == 0 {
		return nil
	}
	return jsonText(u)
}

// jsonText marshals plain values, which cannot fail.
func jsonText(v any) *string {
	j, _ := json.Marshal(v)
	s := string(j)
	return &s
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
