package tables

import (
	"encoding/json"
	"fmt"

	"github.com/llmgw/gateway/accounting/ledger"
)

// A charge's components are stored with its ledger entry, in the column `components`
// (migrations/0012): a jsonb array of these objects, amounts in micro-credits as priced.
type storedComponent struct {
	Name         string `json:"name"`
	Units        int64  `json:"units"`
	PricePerMTok int64  `json:"price_per_mtok"`
	Amount       int64  `json:"amount"`
}

// componentsOf reads a stored breakdown (nil or empty: none).
func componentsOf(raw []byte) ([]ledger.Component, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var in []storedComponent
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("stored charge components: %w", err)
	}
	var out []ledger.Component
	for _, c := range in {
		out = append(out, ledger.Component{Name: c.Name, Units: c.Units, PricePerMTok: c.PricePerMTok, Amount: c.Amount})
	}
	return out, nil
}
