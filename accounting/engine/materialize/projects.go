package materialize

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/accounting/engine/machine"
)

// projects is what one call's events change of projects and key placements.
type projects struct {
	created    []machine.ProjectCreated          // in journal order: a parent before its child
	changed    map[string]machine.ProjectChanged // the last change of each
	deleted    map[string]time.Time              // when
	placements map[string]machine.KeyPlaced      // the last placement of each key
}

func (w *writes) addProject(e machine.Event) {
	switch e := e.(type) {
	case machine.ProjectCreated:
		w.created = append(w.created, e)
	case machine.ProjectChanged:
		w.changed = put(w.changed, e.ProjectID, e)
	case machine.ProjectDeleted:
		w.deleted = put(w.deleted, e.ProjectID, e.At)
	}
}

// queueProjects inserts the new projects, then applies the last change of each and
// marks the deleted ones: a project made, changed and deleted in one call ends as the
// events left it.
func (w *writes) queueProjects(b *pgx.Batch) {
	if len(w.created) > 0 {
		var ids, accounts, parents, names, models []string
		var daily, monthly, total, rpm, tpm []*int64
		var ats []time.Time
		for _, p := range w.created {
			ids, accounts, parents, names = append(ids, p.ID), append(accounts, p.AccountID), append(parents, p.ParentID), append(names, p.Name)
			daily, monthly, total = append(daily, p.DailyLimit), append(monthly, p.MonthlyLimit), append(total, p.Limit)
			rpm, tpm, models, ats = append(rpm, p.RPM), append(tpm, p.TPM), append(models, projectModels(p.Models)), append(ats, p.At)
		}
		b.Queue(`
			INSERT INTO projects (id, account_id, parent_id, name, daily_limit, monthly_limit, total_limit, rpm, tpm,
				models, created_at)
			SELECT id::uuid, account::uuid, nullif(parent, '')::uuid, name, daily, monthly, total, rpm, tpm,
				`+projectModelsArray+`, at
			FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::bigint[],
				$8::bigint[], $9::bigint[], $10::text[], $11::timestamptz[])
				WITH ORDINALITY AS u(id, account, parent, name, daily, monthly, total, rpm, tpm, models, at, n)
			ORDER BY n`,
			ids, accounts, parents, names, daily, monthly, total, rpm, tpm, models, ats)
	}
	if len(w.changed) > 0 {
		var ids, names, models []string
		var daily, monthly, total, rpm, tpm []*int64
		for _, id := range sortedKeys(w.changed) {
			p := w.changed[id]
			ids, names, models = append(ids, id), append(names, p.Name), append(models, projectModels(p.Models))
			daily, monthly, total = append(daily, p.DailyLimit), append(monthly, p.MonthlyLimit), append(total, p.Limit)
			rpm, tpm = append(rpm, p.RPM), append(tpm, p.TPM)
		}
		// The change announces each account whose projects changed, in the same
		// transaction (so when it is visible): the grants cached for its keys carry
		// their projects' allowlists. One notice per account, not per key of the
		// changed subtrees, which may be many.
		b.Queue(`
			WITH changed AS (
				UPDATE projects p SET name = u.name, daily_limit = u.daily, monthly_limit = u.monthly,
					total_limit = u.total, rpm = u.rpm, tpm = u.tpm, models = `+projectModelsArray+`
				FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[],
					$7::bigint[], $8::text[]) AS u(id, name, daily, monthly, total, rpm, tpm, models)
				WHERE p.id = u.id::uuid
				RETURNING p.account_id)
			SELECT pg_notify(`+changesChannel+`, 'a:' || account_id::text)
			FROM (SELECT DISTINCT account_id FROM changed ORDER BY account_id) a`,
			ids, names, daily, monthly, total, rpm, tpm, models)
	}
	if len(w.deleted) > 0 {
		var ids []string
		var ats []time.Time
		for _, id := range sortedKeys(w.deleted) {
			ids, ats = append(ids, id), append(ats, w.deleted[id])
		}
		b.Queue(`
			UPDATE projects p SET deleted_at = u.at
			FROM unnest($1::text[], $2::timestamptz[]) AS u(id, at)
			WHERE p.id = u.id::uuid`,
			ids, ats)
	}
}

// queuePlacements writes each placed key's project and rates (after the keys and the
// projects are written: both are referenced).
func (w *writes) queuePlacements(b *pgx.Batch) {
	if len(w.placements) == 0 {
		return
	}
	var ids, projects []string
	var rpm, tpm []*int64
	for _, id := range sortedKeys(w.placements) {
		k := w.placements[id]
		ids, projects, rpm, tpm = append(ids, id), append(projects, k.ProjectID), append(rpm, k.RPM), append(tpm, k.TPM)
	}
	b.Queue(`
		UPDATE api_keys k SET project_id = nullif(u.project, '')::uuid, rpm = u.rpm, tpm = u.tpm
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) AS u(id, project, rpm, tpm)
		WHERE k.id = u.id::uuid`,
		ids, projects, rpm, tpm)
}

// changesChannel is the store's change feed (store.ChangesChannel), as an SQL literal;
// its payloads are "a:<account id>" and "k:<key id>". The triggers of api_keys and
// accounts announce their rows' changes; a project's change is announced here.
const changesChannel = `'ledger_changes'`

// projectModelsArray turns the JSON u.models into text[]: NULL (every model) for JSON
// null.
const projectModelsArray = `CASE WHEN u.models = 'null' THEN NULL ELSE ` + modelsArray + ` END`

// projectModels is an allowlist as JSON: null for every model.
func projectModels(models []string) string { return *jsonText(models) }
