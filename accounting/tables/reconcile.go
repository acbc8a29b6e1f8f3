package tables

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/accounting/ledger"
)

// Reconcile sums every account's charges of the UTC days q.From..q.To per day, channel
// and upstream model: requests and charged from the entries, units and amounts from
// their stored components. It reads the ledger itself (an operator's occasional report,
// not the hot path: no rollup across accounts, whose rows every charge would contend
// for), narrowed to the range's pages by the BRIN index of migrations/0013.
func (s *Store) Reconcile(ctx context.Context, q ledger.ReconcileQuery) ([]ledger.ReconcileRow, error) {
	from, to := q.From.UTC(), q.To.UTC()
	switch {
	case to.Before(from):
		return nil, ledger.Refuse(ledger.ReasonInvalidArgument, "the reconciliation range ends before it starts")
	case to.Sub(from).Hours()/24 >= ledger.MaxReconcileDays:
		return nil, ledger.Refuse(ledger.ReasonInvalidArgument,
			fmt.Sprintf("a reconciliation covers at most %d days", ledger.MaxReconcileDays))
	}
	// One row per group with its requests and charge (name ''), then one per component
	// of the group with its units and amount.
	rows, err := s.pool.Query(ctx, `
		WITH e AS (
			SELECT to_char((created_at AT TIME ZONE 'UTC')::date, 'YYYY-MM-DD') AS day, coalesce(channel, '') AS channel,
				coalesce(upstream_model, '') AS upstream, -amount AS charged, components
			FROM ledger_entries
			WHERE kind = 'charge' AND created_at >= $1::date::timestamp AT TIME ZONE 'UTC'
				AND created_at < ($2::date + 1)::timestamp AT TIME ZONE 'UTC')
		SELECT day, channel, upstream, '' AS name, count(*), 0::bigint, sum(charged)::bigint
			FROM e GROUP BY 1, 2, 3
		UNION ALL
		SELECT day, channel, upstream, c ->> 'name', sum((c ->> 'units')::bigint)::bigint,
				sum((c ->> 'amount')::bigint)::bigint, 0::bigint
			FROM e CROSS JOIN LATERAL jsonb_array_elements(e.components) c
			WHERE e.components IS NOT NULL GROUP BY 1, 2, 3, 4
		ORDER BY 1, 2, 3, 4`, day(from), day(to))
	if err != nil {
		return nil, dbError("reconcile", err)
	}
	var out []ledger.ReconcileRow
	var dayS, channel, upstream, name string
	var a, b, c int64
	_, err = pgx.ForEachRow(rows, []any{&dayS, &channel, &upstream, &name, &a, &b, &c}, func() error {
		if name == "" {
			out = append(out, ledger.ReconcileRow{Day: dayS, Channel: channel, UpstreamModel: upstream, Requests: a, Charged: c})
			return nil
		}
		// A group's row comes before its components (ORDER BY: '' first).
		r := &out[len(out)-1]
		r.Components = append(r.Components, ledger.ComponentTotal{Name: name, Units: a, Amount: b})
		return nil
	})
	if err != nil {
		return nil, dbError("reconcile", err)
	}
	for _, r := range out {
		slices.SortFunc(r.Components, func(x, y ledger.ComponentTotal) int {
			return componentOrder(x.Name) - componentOrder(y.Name)
		})
	}
	return out, nil
}

// componentOrder is a component's place in ledger.ComponentNames (unknown names last).
func componentOrder(name string) int {
	if i := slices.Index(ledger.ComponentNames, name); i >= 0 {
		return i
	}
	return len(ledger.ComponentNames)
}
