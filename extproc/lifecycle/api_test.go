package lifecycle

import (
	"testing"

	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/pricing"
)

// TestEveryEndpointIsComplete holds each entry of the endpoint table to what its kind of
// endpoint needs, so a new entry cannot leave a step of the lifecycle without an answer.
func TestEveryEndpointIsComplete(t *testing.T) {
	unitPrices := catalog.Prices{PerMillionChars: ptr(1_000_000), PerImage: ptr(1), PerSecond: ptr(1)}
	for i := range endpoints {
		e := Endpoint(i)
		if e == EndpointUnknown {
			continue
		}
		sp := e.spec()
		t.Run(e.Path(), func(t *testing.T) {
			if sp.method == "" {
				t.Error("no method")
			}
			if got, _, ok := byPath(e.Path()); sp.path != "" && (!ok || got != e) {
				t.Errorf("byPath(%q) = %v, %v", e.Path(), got, ok)
			}
			switch sp.method {
			case "GET":
				if sp.parse != nil || sp.headers == nil {
					t.Error("a GET endpoint has no body and is answered or routed by its headers hook")
				}
			case "POST":
				if sp.parse == nil || sp.headers != nil {
					t.Error("a POST endpoint parses its body and is decided in the body phase")
				}
				if len(sp.kinds) == 0 {
					t.Error("a POST endpoint serves some kind of model")
				}
			default:
				t.Errorf("method %q", sp.method)
			}
			if sp.path == "" && sp.headers == nil {
				t.Error("a templated path needs the headers hook to read its id")
			}
			answered := sp.headers != nil && sp.settleJSON == nil || sp.estimate != nil || sp.proxied != nil
			if !answered && sp.format == 0 {
				t.Error("an answer the gateway rewrites needs its response format")
			}
			if sp.estimate != nil && sp.billing != BillNone {
				t.Error("an estimate is never billed")
			}
			switch sp.billing {
			case BillUnits:
				if pricing.Units(unitPrices, sp.unit, 1) <= 0 {
					t.Errorf("unit %q has no price in the pricing package", sp.unit)
				}
				if sp.rules == nil {
					t.Error("a per-unit endpoint sets its units in its rules hook")
				}
			case BillTokens:
				if sp.chat == 0 {
					t.Error("token billing with output is a chat API's")
				}
			}
			if sp.chat != 0 {
				if upstreamPaths[sp.chat] == "" || chatFormats[sp.chat] != sp.format {
					t.Error("a chat API needs its upstream path and its response format")
				}
			}
			if sp.operation == "" && sp.billing != BillNone {
				t.Error("a billed endpoint names its gen_ai operation")
			}
		})
	}
}

func ptr(v int64) *int64 { return &v }
