package envoy

import (
	"github.com/llmgw/gateway/extproc/lifecycle"
	"google.golang.org/protobuf/types/known/structpb"
)

// MetadataNamespace is the dynamic metadata namespace of the request's facts. Envoy's
// ext_proc filter applies a reply's dynamic_metadata only for the namespaces listed in
// its metadata_options.receiving_namespaces.untyped (ext_proc.cc, Filter::setDynamicMetadata),
// for every reply kind, immediate responses included (Filter::onReceiveMessage), and
// merges each namespace's struct into the stream's (StreamInfoImpl::setDynamicMetadata:
// a key set again is replaced). envoy.yaml lists this namespace and its access log reads
// the keys below with %DYNAMIC_METADATA(llmgw:<key>)%.
const MetadataNamespace = "llmgw"

// The keys of MetadataNamespace (lifecycle.Facts). A key is absent until its fact is
// known.
const (
	KeyEndpoint     = "endpoint"
	KeyModel        = "model"
	KeyChannel      = "channel"
	KeyHoldMicros   = "hold_micros"
	KeyOutcome      = "outcome"
	KeyChargeMicros = "charge_micros"
	KeyInputTokens  = "input_tokens"
	KeyOutputTokens = "output_tokens"
	KeyError        = "error"
)

// MetadataKeys lists every key the Server may set.
var MetadataKeys = []string{KeyEndpoint, KeyModel, KeyChannel, KeyHoldMicros, KeyOutcome,
	KeyChargeMicros, KeyInputTokens, KeyOutputTokens, KeyError}

// dynamicMetadata expresses f as a reply's dynamic_metadata, nil when f is nil: only
// the keys whose value differs from what sent (the facts the previous replies carried)
// said, since Envoy merges each reply's namespace into the stream's and keeps the rest.
// A fact is never unset once known, so the merged keys are always f's. Counts and
// amounts are numbers (a Struct holds doubles: exact below 2^53 micro-credits).
func dynamicMetadata(sent lifecycle.Facts, f *lifecycle.Facts) *structpb.Struct {
	if f == nil {
		return nil
	}
	m := make(map[string]*structpb.Value, 4)
	str := func(k, v, was string) {
		if v != "" && v != was {
			m[k] = structpb.NewStringValue(v)
		}
	}
	num := func(k string, v int64, known, wasKnown bool, was int64) {
		if known && (!wasKnown || v != was) {
			m[k] = structpb.NewNumberValue(float64(v))
		}
	}
	charged := func(x *lifecycle.Facts) bool {
		return x.Outcome == lifecycle.OutcomeCommit || x.Outcome == lifecycle.OutcomeRelease
	}
	str(KeyEndpoint, f.Endpoint, sent.Endpoint)
	str(KeyModel, f.Model, sent.Model)
	str(KeyChannel, f.Channel, sent.Channel)
	str(KeyOutcome, f.Outcome, sent.Outcome)
	str(KeyError, string(f.Error), string(sent.Error))
	num(KeyHoldMicros, f.HoldMicros, f.Held, sent.Held, sent.HoldMicros)
	num(KeyChargeMicros, f.ChargeMicros, charged(f), charged(&sent), sent.ChargeMicros)
	num(KeyInputTokens, f.InputTokens, f.Usage, sent.Usage, sent.InputTokens)
	num(KeyOutputTokens, f.OutputTokens, f.Usage, sent.Usage, sent.OutputTokens)
	if len(m) == 0 {
		return nil
	}
	ns := &structpb.Struct{Fields: m}
	return &structpb.Struct{Fields: map[string]*structpb.Value{MetadataNamespace: structpb.NewStructValue(ns)}}
}
