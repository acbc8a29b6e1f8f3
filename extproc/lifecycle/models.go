package lifecycle

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/llmgw/gateway/extproc/catalog"
)

// listModels answers GET /v1/models: without a key the public catalog; with a valid
// key only the models it can call now (allowlist, top-up, a channel open to its tier,
// a complete price); with an invalid key 401.
func (r *Request) listModels(ctx context.Context) Action {
	eligible := func(*catalog.Model) bool { return true }
	if r.hasKey {
		if e := r.authenticate(ctx); e != nil {
			return r.fail(e)
		}
		g := r.grant
		if g.AccountSuspended {
			return r.fail(apiAccountSuspended())
		}
		eligible = func(m *catalog.Model) bool { return modelRefusal(&g, m, m.HasCandidate(g.Tier)) == nil }
	}
	b := make([]byte, 0, 1024)
	b = append(b, `{"object":"list","data":[`...)
	n := 0
	for _, m := range r.cat.Models() {
		if !eligible(m) {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"id":`...)
		b = appendJSONString(b, m.ID)
		b = append(b, `,"object":"model","created":`...)
		b = strconv.AppendInt(b, m.Created, 10)
		b = append(b, `,"owned_by":`...)
		b = appendJSONString(b, m.OwnedBy)
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	return Action{Immediate: &Immediate{
		Status:  200,
		Headers: []Header{{"content-type", "application/json"}},
		Body:    b,
		Details: "extproc_models",
	}}
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}
