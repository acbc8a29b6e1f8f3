package ledger

import (
	"fmt"
	"slices"
)

// KeyFitsProjects reports, in an operator's words, how a new key's own settings go
// beyond what its project and the project's ancestors allow (path: the project first,
// then each ancestor): a daily or monthly limit above a project's, an rpm or tpm above a
// project's, a model outside a project's allowlist. A setting the key leaves unset is
// bounded by the projects at admission and always fits. Nil: it fits.
func KeyFitsProjects(k NewKey, path []Project) error {
	for _, p := range path {
		name := fmt.Sprintf("project %q (%s)", p.Name, p.ID)
		for _, c := range []struct {
			what       string
			key, limit *Micros
		}{{"daily limit", k.DailyLimit, p.DailyLimit}, {"monthly limit", k.MonthlyLimit, p.MonthlyLimit}} {
			if c.key != nil && c.limit != nil && *c.key > *c.limit {
				return fmt.Errorf("the key's %s %s exceeds the %s of %s, %s credits",
					c.what, FormatCredits(*c.key), c.what, name, FormatCredits(*c.limit))
			}
		}
		for _, c := range []struct {
			what       string
			key, limit *int64
		}{{"rpm", k.RPM, p.RPM}, {"tpm", k.TPM, p.TPM}} {
			if c.key != nil && c.limit != nil && *c.key > *c.limit {
				return fmt.Errorf("the key's %s %d exceeds the %s of %s, %d", c.what, *c.key, c.what, name, *c.limit)
			}
		}
		if p.Models == nil {
			continue
		}
		for _, m := range k.AllowedModels {
			if !slices.Contains(p.Models, m) {
				return fmt.Errorf("the key allows model %q, which %s does not allow", m, name)
			}
		}
	}
	return nil
}
