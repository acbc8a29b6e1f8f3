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

// dynamicMetadata expresses f as a reply's dynamic_metadata, nil when f is nil. Counts
// and amounts are numbers (a Struct holds doubles: exact below 2^53 micro-credits).
func dynamicMetadata(f *lifecycle.Facts) *structpb.Struct {
	if f == nil {
		return nil
	}
	m := map[string]*structpb.Value{KeyEndpoint: structpb.NewStringValue(f.Endpoint)}
	str := func(k, v string) {
		if v != "" {
			m[k] = structpb.NewStringValue(v)
		}
	}
	num := func(k string, v int64) { m[k] = structpb.NewNumberValue(float64(v)) }
	str(KeyModel, f.Model)
	str(KeyChannel, f.Channel)
	str(KeyOutcome, f.Outcome)
	str(KeyError, string(f.Error))
	if f.Held {
		num(KeyHoldMicros, f.HoldMicros)
	}
	if f.Outcome == lifecycle.OutcomeCommit || f.Outcome == lifecycle.OutcomeRelease {
		num(KeyChargeMicros, f.ChargeMicros)
	}
	if f.Usage {
		num(KeyInputTokens, f.InputTokens)
		num(KeyOutputTokens, f.OutputTokens)
	}
	ns := &structpb.Struct{Fields: m}
	return &structpb.Struct{Fields: map[string]*structpb.Value{MetadataNamespace: structpb.NewStructValue(ns)}}
}
