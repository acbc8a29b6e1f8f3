// Package config loads envoy/envoy.yaml into go-control-plane's v3 Bootstrap message,
// exactly as strictly as Envoy reads it: unknown fields are errors, every typed_config
// must name an extension type linked into this package, and the result must pass the
// protoc-gen-validate rules of Envoy's API.
//
// It is shared by the configuration test in envoy/ and by the Envoy test front
// (e2e/front). It depends only on go-control-plane, protobuf and sigs.k8s.io/yaml.
package config

import (
	"fmt"
	"os"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"

	// Every extension type that envoy.yaml names in a typed_config. Adding a filter or
	// extension to envoy.yaml means adding its package here, or Load fails to resolve it.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/filters/cel/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

// Load reads the Envoy bootstrap YAML at path, parses it and validates it.
func Load(path string) (*bootstrapv3.Bootstrap, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("envoy config: %w", err)
	}
	bs, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("envoy config %s: %w", path, err)
	}
	return bs, nil
}

// Parse parses Envoy bootstrap YAML (or JSON) and validates the result.
func Parse(data []byte) (*bootstrapv3.Bootstrap, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("yaml: %w", err)
	}
	bs := &bootstrapv3.Bootstrap{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(js, bs); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	if err := bs.ValidateAll(); err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	// The generated validators stop at google.protobuf.Any; validate every typed_config
	// too, as Envoy does when it instantiates the extension.
	if err := validateAnys(bs.ProtoReflect(), ""); err != nil {
		return nil, err
	}
	return bs, nil
}

// validateAnys unpacks every Any under m and runs its validator.
func validateAnys(m protoreflect.Message, path string) error {
	if any, ok := m.Interface().(*anypb.Any); ok {
		inner, err := any.UnmarshalNew()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if v, ok := inner.(interface{ ValidateAll() error }); ok {
			if err := v.ValidateAll(); err != nil {
				return fmt.Errorf("validate %s (%s): %w", path, any.GetTypeUrl(), err)
			}
		}
		return validateAnys(inner.ProtoReflect(), path)
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := path + "." + string(fd.Name())
		switch {
		case fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind:
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = validateAnys(l.Get(i).Message(), fmt.Sprintf("%s[%d]", name, i))
			}
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
					err = validateAnys(mv.Message(), name+"["+k.String()+"]")
					return err == nil
				})
			}
		default:
			err = validateAnys(v.Message(), name)
		}
		return err == nil
	})
	return err
}
