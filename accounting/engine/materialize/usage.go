package materialize

import (
	"cmp"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/accounting/ledger"
)

// usageRow is a usage_daily row's key: a charge's account, UTC day, key, model,
// channel, upstream model and project (” for none).
type usageRow struct {
	account, day, key, model, channel, upstream, project string
}

// usageSum is what one call's charges add to a usage_daily row.
type usageSum struct {
	requests, input, output, cacheRead, cacheWrite, charged int64
}

// cacheRead and cacheWrite name the components whose units the rollup counts as cache
// reads and cache writes.
var (
	cacheRead  = []string{"cache_read"}
	cacheWrite = []string{"cache_write", "cache_write_1h"}
)

// use adds a charge to its usage_daily row of the call.
func (w *writes) use(e entry, usage ledger.Usage) {
	k := usageRow{account: e.accountID, day: e.at.UTC().Format(time.DateOnly), key: deref(e.keyID),
		model: deref(e.model), channel: deref(e.channel), upstream: deref(e.upstream), project: deref(e.project)}
	s := at(&w.usage, k)
	s.requests++
	s.input += usage.InputTokens
	s.output += usage.OutputTokens
	for _, c := range usage.Components {
		switch {
		case slices.Contains(cacheRead, c.Name):
			s.cacheRead += c.Units
		case slices.Contains(cacheWrite, c.Name):
			s.cacheWrite += c.Units
		}
	}
	s.charged -= int64(e.amount)
}

// queueUsage adds the call's charges to the daily rollup, one row per account, day, key,
// model, channel, upstream model and project however many charges it has: the
// materializer keeps usage_daily (migration 0023 dropped the trigger on ledger_entries
// that did).
func (w *writes) queueUsage(b *pgx.Batch) {
	if len(w.usage) == 0 {
		return
	}
	rows := make([]usageRow, 0, len(w.usage))
	for k := range w.usage {
		rows = append(rows, k)
	}
	slices.SortFunc(rows, func(a, b usageRow) int {
		return cmp.Or(cmp.Compare(a.account, b.account), cmp.Compare(a.day, b.day), cmp.Compare(a.key, b.key),
			cmp.Compare(a.model, b.model), cmp.Compare(a.channel, b.channel), cmp.Compare(a.upstream, b.upstream),
			cmp.Compare(a.project, b.project))
	})
	n := len(rows)
	accounts, days, keys, models, channels, upstream, projects := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	requests, input, output, cr, cw, charged := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n),
		make([]int64, n), make([]int64, n)
	for i, k := range rows {
		s := w.usage[k]
		accounts[i], days[i], keys[i], models[i], channels[i], upstream[i], projects[i] = k.account, k.day, k.key, k.model,
			k.channel, k.upstream, k.project
		requests[i], input[i], output[i], cr[i], cw[i], charged[i] = s.requests, s.input, s.output, s.cacheRead,
			s.cacheWrite, s.charged
	}
	b.Queue(`
		INSERT INTO usage_daily AS u (account_id, day, key_id, model, channel, upstream_model, project_id, requests,
			input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, charged)
		SELECT account::uuid, day::date, key::uuid, model, channel, upstream, project, requests, tin, tout, cr, cw, charged
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[],
			$9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[])
			AS d(account, day, key, model, channel, upstream, project, requests, tin, tout, cr, cw, charged)
		ON CONFLICT (account_id, day, key_id, model, channel, upstream_model, project_id) DO UPDATE SET
			requests = u.requests + EXCLUDED.requests,
			input_tokens = u.input_tokens + EXCLUDED.input_tokens,
			output_tokens = u.output_tokens + EXCLUDED.output_tokens,
			cache_read_tokens = u.cache_read_tokens + EXCLUDED.cache_read_tokens,
			cache_write_tokens = u.cache_write_tokens + EXCLUDED.cache_write_tokens,
			charged = u.charged + EXCLUDED.charged`,
		accounts, days, keys, models, channels, upstream, projects, requests, input, output, cr, cw, charged)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
