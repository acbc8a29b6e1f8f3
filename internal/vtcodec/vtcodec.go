// Package vtcodec is a gRPC codec for protobuf messages that marshals a message with its
// generated vtprotobuf code when it has some, and with the protobuf runtime otherwise;
// unmarshalling is always the runtime's. go-control-plane ships vtprotobuf marshalling
// for Envoy's messages (external_processor_vtproto.pb.go): written out per field, it
// skips the runtime's reflection-driven size and marshal passes, which grpc-go's own
// codec runs twice over a message's size (proto.Size, then Marshal sizes again), maps —
// a reply's dynamic metadata — included. The bytes are a valid encoding of the same
// message (fields in number order); a test holds every message kind to the runtime's
// decoding of them.
//
// It imports nothing of the gateway.
package vtcodec

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// vtMarshaler is what vtprotobuf generates for a message (the "marshal_strict" feature).
type vtMarshaler interface {
	SizeVT() int
	MarshalToSizedBufferVTStrict(dAtA []byte) (int, error)
}

// Codec is the codec; its name is "proto", so peers see no difference.
type Codec struct{}

var _ encoding.CodecV2 = Codec{}

// runtime is grpc-go's protobuf codec, for what vtprotobuf does not cover.
var runtime = encoding.GetCodecV2(proto.Name)

// Marshal encodes v.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(vtMarshaler)
	if !ok {
		return runtime.Marshal(v)
	}
	size := m.SizeVT()
	if mem.IsBelowBufferPoolingThreshold(size) {
		buf := make([]byte, size)
		if _, err := m.MarshalToSizedBufferVTStrict(buf); err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(buf)}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	if _, err := m.MarshalToSizedBufferVTStrict((*buf)[:size]); err != nil {
		pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// Unmarshal decodes data into v with the protobuf runtime.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error { return runtime.Unmarshal(data, v) }

// Name is "proto".
func (Codec) Name() string { return proto.Name }

// ServerOption makes a server use the codec.
func ServerOption() grpc.ServerOption { return grpc.ForceServerCodecV2(Codec{}) }

// DialOption makes a client connection's calls use the codec.
func DialOption() grpc.DialOption {
	return grpc.WithDefaultCallOptions(grpc.ForceCodecV2(Codec{}))
}
