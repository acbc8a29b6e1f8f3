package envoy_test

import (
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/llmgw/gateway/extproc/envoy"
	"github.com/llmgw/gateway/extproc/internal/replay"
)

// facts is the dynamic metadata of a reply carrying the request's facts.
func facts(t *testing.T, kv map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(map[string]any{envoy.MetadataNamespace: kv})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// merged is what Envoy holds in the gateway's namespace after replies, in order: it
// merges each reply's namespace into what it has, a key set again replaced
// (StreamInfoImpl::setDynamicMetadata, a protobuf MergeFrom). It also checks that each
// reply carries only what changes: no key with the value Envoy already has.
func merged(t *testing.T, replies ...*extprocv3.ProcessingResponse) *structpb.Struct {
	t.Helper()
	m := map[string]*structpb.Value{}
	for i, r := range replies {
		for k, v := range r.GetDynamicMetadata().GetFields()[envoy.MetadataNamespace].GetStructValue().GetFields() {
			if was, ok := m[k]; ok && proto.Equal(was, v) {
				t.Errorf("reply %d sends %s = %v again", i, k, v)
			}
			m[k] = v
		}
	}
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		envoy.MetadataNamespace: structpb.NewStructValue(&structpb.Struct{Fields: m})}}
}

// TestRepliesCarryFacts: the replies carry the request's facts for Envoy's access log as
// dynamic metadata in the gateway's namespace — the endpoint at once, model, channel and
// hold once admitted, the decided settlement with its usage and charge on the reply
// that decided it, the error code on an error — and only what changed (a reply that
// changes nothing carries none; Envoy keeps the rest). Never a key or any prompt text.
func TestRepliesCarryFacts(t *testing.T) {
	const chat = "/v1/chat/completions"
	body := []byte(`{"model":"demo-chat","max_tokens":100,"messages":[{"role":"user","content":"secret prompt"}]}`)
	admitted := map[string]any{"endpoint": chat, "model": "demo-chat", "channel": "mock-demo-chat"}

	t.Run("buffered success", func(t *testing.T) {
		f := newFake()
		h := replay.Start(t, replay.Service(t, f))
		x, hdr, bdy := h.Post(t, chat, body, bearer(keyPaid)...)
		hold := float64(f.Reserves[0].Amount)
		rh := x.Send(replay.ResponseHeaders(200, "content-type", "application/json"))
		rb := x.Send(replay.ResponseBody([]byte(`{"id":"c","model":"mock-gpt","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34}}`), true))
		x.Close()
		withHold := map[string]any{"hold_micros": hold}
		for k, v := range admitted {
			withHold[k] = v
		}
		settled := map[string]any{"outcome": "commit", "charge_micros": float64(12 + 2*34), "input_tokens": float64(12), "output_tokens": float64(34)}
		for k, v := range withHold {
			settled[k] = v
		}
		tests := []struct {
			name    string
			replies []*extprocv3.ProcessingResponse
			want    *structpb.Struct
		}{
			{"request headers", []*extprocv3.ProcessingResponse{hdr}, facts(t, map[string]any{"endpoint": chat})},
			{"request body", []*extprocv3.ProcessingResponse{hdr, bdy}, facts(t, withHold)},
			{"response headers", []*extprocv3.ProcessingResponse{hdr, bdy, rh}, facts(t, withHold)},
			{"response body: settled", []*extprocv3.ProcessingResponse{hdr, bdy, rh, rb}, facts(t, settled)},
		}
		for _, tt := range tests {
			if d := cmp.Diff(tt.want, merged(t, tt.replies...), protocmp.Transform()); d != "" {
				t.Errorf("after the %s reply: Envoy's dynamic metadata (-want +got):\n%s", tt.name, d)
			}
		}
		if rh.GetDynamicMetadata() != nil {
			t.Errorf("the response headers reply, which changes nothing, carries %v", rh.GetDynamicMetadata())
		}
	})

	t.Run("refused", func(t *testing.T) {
		h := replay.Start(t, replay.Service(t, newFake()))
		_, hdr, bdy := h.Post(t, chat, body, bearer("gw-unknown000000000000000000000000000000000000")...)
		want := facts(t, map[string]any{"endpoint": chat, "outcome": "error", "error": "invalid_api_key"})
		if bdy.GetImmediateResponse() == nil {
			t.Fatalf("reply %v, want an immediate response", bdy)
		}
		if d := cmp.Diff(want, merged(t, hdr, bdy), protocmp.Transform()); d != "" {
			t.Errorf("dynamic_metadata (-want +got):\n%s", d)
		}
	})

	t.Run("upstream error releases", func(t *testing.T) {
		f := newFake()
		h := replay.Start(t, replay.Service(t, f))
		x, hdr, bdy := h.Post(t, chat, body, bearer(keyPaid)...)
		hold := float64(f.Reserves[0].Amount)
		rh := x.Send(replay.ResponseHeaders(500, "content-type", "application/json"))
		rb := x.Send(replay.ResponseBody([]byte(`{"error":{"message":"boom"}}`), true))
		x.Close()
		want := map[string]any{"hold_micros": hold, "outcome": "release", "charge_micros": float64(0), "error": "upstream_error"}
		for k, v := range admitted {
			want[k] = v
		}
		if d := cmp.Diff(facts(t, want), merged(t, hdr, bdy, rh, rb), protocmp.Transform()); d != "" {
			t.Errorf("dynamic_metadata (-want +got):\n%s", d)
		}
	})

	t.Run("charge capped at the hold", func(t *testing.T) {
		f := newFake()
		h := replay.Start(t, replay.Service(t, f))
		x, _, _ := h.Post(t, chat, body, bearer(keyPaid)...)
		hold := float64(f.Reserves[0].Amount)
		x.Send(replay.ResponseHeaders(200, "content-type", "application/json"))
		rb := x.Send(replay.ResponseBody([]byte(`{"id":"c","model":"mock-gpt","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":1000000}}`), true))
		x.Close()
		ns := rb.GetDynamicMetadata().GetFields()[envoy.MetadataNamespace].GetStructValue().AsMap()
		if ns["charge_micros"] != hold || ns["output_tokens"] != float64(1000000) {
			t.Errorf("facts %v, want the charge capped at the hold %v", ns, hold)
		}
	})

	t.Run("stream: only the chunk that settles", func(t *testing.T) {
		f := newFake()
		h := replay.Start(t, replay.Service(t, f))
		x := admitOn(t, h, chat, `{"model":"demo-chat","stream":true,"messages":[{"role":"user","content":"x"}]}`)
		x.Send(replay.ResponseHeaders(200, "content-type", "text/event-stream"))
		c1 := x.Send(replay.ResponseBody([]byte("data: {\"id\":\"c\",\"model\":\"mock-gpt\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n"), false))
		c2 := x.Send(replay.ResponseBody([]byte("data: {\"id\":\"c\",\"model\":\"mock-gpt\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7}}\n\ndata: [DONE]\n\n"), false))
		end := x.Send(replay.ResponseBody(nil, true))
		x.Close()
		if c1.GetDynamicMetadata() != nil || c2.GetDynamicMetadata() != nil {
			t.Errorf("chunks before the end carry %v, %v; want none", c1.GetDynamicMetadata(), c2.GetDynamicMetadata())
		}
		ns := end.GetDynamicMetadata().GetFields()[envoy.MetadataNamespace].GetStructValue().AsMap()
		if ns["outcome"] != "commit" || ns["input_tokens"] != float64(5) || ns["output_tokens"] != float64(7) || ns["charge_micros"] != float64(5+2*7) {
			t.Errorf("last chunk's facts %v", ns)
		}
	})
}
