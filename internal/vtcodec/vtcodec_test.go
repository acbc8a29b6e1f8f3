package vtcodec

import (
	"bytes"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// messages are Envoy's ext_proc messages of every kind the gateway exchanges, with
// every field kind filled: headers, bodies, mutations, metadata (a map), attributes,
// an immediate response, a mode override.
func messages(t testing.TB) []proto.Message {
	md, err := structpb.NewStruct(map[string]any{"llm_gateway": map[string]any{
		"key": "k-123", "model": "demo-chat", "cost_micros": 1234.0, "cached": true, "list": []any{"a", 1.0},
	}})
	if err != nil {
		t.Fatal(err)
	}
	headers := &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
		{Key: ":path", RawValue: []byte("/v1/chat/completions")},
		{Key: "authorization", RawValue: []byte("Bearer sk-test")},
		{Key: "content-type", RawValue: []byte("application/json")},
	}}
	body := bytes.Repeat([]byte(`{"model":"demo-chat","messages":[]}`), 200) // above the pooling threshold
	return []proto.Message{
		&extprocsvc.ProcessingRequest{Request: &extprocsvc.ProcessingRequest_RequestHeaders{
			RequestHeaders: &extprocsvc.HttpHeaders{Headers: headers, EndOfStream: false},
		}, Attributes: map[string]*structpb.Struct{"envoy.filters.http.ext_proc": md}},
		&extprocsvc.ProcessingRequest{Request: &extprocsvc.ProcessingRequest_RequestBody{
			RequestBody: &extprocsvc.HttpBody{Body: body, EndOfStream: true},
		}},
		&extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_RequestBody{
			RequestBody: &extprocsvc.BodyResponse{Response: &extprocsvc.CommonResponse{
				Status: extprocsvc.CommonResponse_CONTINUE_AND_REPLACE,
				HeaderMutation: &extprocsvc.HeaderMutation{
					SetHeaders: []*corev3.HeaderValueOption{{
						Header:       &corev3.HeaderValue{Key: "x-gateway-cluster", RawValue: []byte("mock")},
						AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
					}},
					RemoveHeaders: []string{"authorization", "content-length"},
				},
				BodyMutation:    &extprocsvc.BodyMutation{Mutation: &extprocsvc.BodyMutation_Body{Body: body}},
				ClearRouteCache: true,
			}},
		}, DynamicMetadata: md},
		&extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ResponseHeaders{
			ResponseHeaders: &extprocsvc.HeadersResponse{Response: &extprocsvc.CommonResponse{}},
		}, ModeOverride: &extprocv3.ProcessingMode{ResponseBodyMode: extprocv3.ProcessingMode_STREAMED},
			OverrideMessageTimeout: durationpb.New(5e9)},
		&extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ImmediateResponse{
			ImmediateResponse: &extprocsvc.ImmediateResponse{
				Status:  &typev3.HttpStatus{Code: typev3.StatusCode_TooManyRequests},
				Headers: &extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "retry-after", RawValue: []byte("5")}}}},
				Body:    []byte(`{"error":{"code":"rate_limit_exceeded"}}`),
				Details: "rate_limit_exceeded",
			},
		}},
		discovery(t), // extproc serves the catalog's clusters over xDS on the same server
		md,           // no vtprotobuf code of its own here: the runtime's
	}
}

// TestRoundTrip: what the codec writes, the protobuf runtime reads back as the same
// message, and the codec reads what the runtime writes.
func TestRoundTrip(t *testing.T) {
	runtimeCodec := encoding.GetCodecV2(grpcproto.Name)
	for _, m := range messages(t) {
		data, err := Codec{}.Marshal(m)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		back := m.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(data.Materialize(), back); err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !proto.Equal(m, back) {
			t.Errorf("%T: decoded %v, want %v", m, back, m)
		}
		if got, want := data.Len(), proto.Size(m); got != want {
			t.Errorf("%T: %d bytes, the runtime's encoding %d", m, got, want)
		}
		data.Free()

		theirs, err := runtimeCodec.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		back = m.ProtoReflect().New().Interface()
		if err := (Codec{}).Unmarshal(theirs, back); err != nil || !proto.Equal(m, back) {
			t.Errorf("%T: the codec decoded the runtime's encoding as %v (%v)", m, back, err)
		}
	}
}

func BenchmarkMarshal(b *testing.B) {
	msgs := messages(b)[:5] // the ext_proc messages
	c := Codec{}
	b.ReportAllocs()
	for b.Loop() {
		for _, m := range msgs {
			data, err := c.Marshal(m)
			if err != nil {
				b.Fatal(err)
			}
			data.Free()
		}
	}
}

// discovery is an xDS answer with one cluster, as extproc's ADS server sends.
func discovery(t testing.TB) proto.Message {
	c, err := anypb.New(&clusterv3.Cluster{Name: "mock", ConnectTimeout: durationpb.New(1e9),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS}})
	if err != nil {
		t.Fatal(err)
	}
	return &discoveryv3.DiscoveryResponse{VersionInfo: "7", Resources: []*anypb.Any{c}, TypeUrl: c.TypeUrl, Nonce: "n"}
}
