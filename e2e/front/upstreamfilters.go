package front

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	codecv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/upstream_codec/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// A cluster's upstream HTTP filters (HttpProtocolOptions.http_filters): Envoy builds
// them afresh for every attempt of the router (source/common/router/upstream_request.cc,
// the UpstreamRequest constructor: the cluster's chain, else the router's
// upstream_http_filters, else the codec alone). The front emulates exactly one chain,
// [ext_proc, upstream_codec], with the ext_proc settings below (attempt.go runs it).

// AttemptExtProc is the emulated configuration of an upstream ext_proc filter.
type AttemptExtProc struct {
	// Cluster is grpc_service.envoy_grpc.cluster_name: a static cluster.
	Cluster string
	// InitialMetadata is grpc_service.initial_metadata, sent as the gRPC stream's
	// metadata.
	InitialMetadata   []header
	AllowModeOverride bool
	MessageTimeout    time.Duration
	// Attributes are request_attributes, each of the form
	// xds.upstream_host_metadata.filter_metadata['NS']['KEY'].
	Attributes []hostMetadataAttr
}

// hostMetadataAttr is one request attribute: the picked endpoint's
// filter_metadata[NS][KEY], under its expression's text.
type hostMetadataAttr struct{ expr, ns, key string }

// hostMetadataExpr is the only CEL expression form the front evaluates.
var hostMetadataExpr = regexp.MustCompile(`^xds\.upstream_host_metadata\.filter_metadata\['([^'\\]+)'\]\['([^'\\]+)'\]$`)

// upstreamExtProcFields are the ExternalProcessor fields an upstream ext_proc may set
// (stat_prefix has no observable effect).
var upstreamExtProcFields = []protoreflect.Name{
	"grpc_service", "failure_mode_allow", "processing_mode", "allow_mode_override",
	"message_timeout", "request_attributes", "stat_prefix",
}

// attemptFiltersFrom reads a cluster's http_filters: none, or exactly
// [ext_proc, upstream_codec]. Envoy itself refuses a chain whose last filter is not the
// codec (the codec is the only terminal upstream filter).
func attemptFiltersFrom(filters []*hcmv3.HttpFilter) (*AttemptExtProc, error) {
	if len(filters) == 0 {
		return nil, nil
	}
	if n := len(filters); !filters[n-1].GetTypedConfig().MessageIs(&codecv3.UpstreamCodec{}) {
		return nil, errors.New("http_filters: the last upstream filter must be envoy.filters.http.upstream_codec")
	}
	if len(filters) != 2 {
		return nil, fmt.Errorf("http_filters: exactly [ext_proc, upstream_codec] is emulated, found %d filters", len(filters))
	}
	ep := &extprocv3.ExternalProcessor{}
	if err := filters[0].GetTypedConfig().UnmarshalTo(ep); err != nil {
		return nil, fmt.Errorf("http_filters[0]: only ext_proc is emulated before the codec: %v", err)
	}
	return upstreamExtProcFrom(ep)
}

func upstreamExtProcFrom(ep *extprocv3.ExternalProcessor) (*AttemptExtProc, error) {
	var errs []string
	ep.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if !containsName(upstreamExtProcFields, fd.Name()) {
			errs = append(errs, "upstream ext_proc: "+string(fd.Name())+" not emulated")
		}
		return true
	})
	a := &AttemptExtProc{
		Cluster:           ep.GetGrpcService().GetEnvoyGrpc().GetClusterName(),
		AllowModeOverride: ep.GetAllowModeOverride(),
		MessageTimeout:    durationOr(ep.GetMessageTimeout(), 200*time.Millisecond),
	}
	if a.Cluster == "" {
		errs = append(errs, "upstream ext_proc: grpc_service.envoy_grpc.cluster_name is required")
	}
	if ep.GetFailureModeAllow() {
		errs = append(errs, "upstream ext_proc: failure_mode_allow: true not emulated")
	}
	for _, hv := range ep.GetGrpcService().GetInitialMetadata() {
		a.InitialMetadata = append(a.InitialMetadata, header{strings.ToLower(hv.GetKey()), hv.GetValue()})
	}
	// The one processing mode emulated: headers both ways, no bodies (a response body
	// only by mode_override), no trailers. DEFAULT means SEND for headers, NONE for
	// bodies and SKIP for trailers (processing_mode.proto).
	pm := ep.GetProcessingMode()
	send := func(m extprocv3.ProcessingMode_HeaderSendMode) bool {
		return m == extprocv3.ProcessingMode_SEND || m == extprocv3.ProcessingMode_DEFAULT
	}
	skip := func(m extprocv3.ProcessingMode_HeaderSendMode) bool {
		return m == extprocv3.ProcessingMode_SKIP || m == extprocv3.ProcessingMode_DEFAULT
	}
	if !send(pm.GetRequestHeaderMode()) || !send(pm.GetResponseHeaderMode()) ||
		pm.GetRequestBodyMode() != extprocv3.ProcessingMode_NONE || pm.GetResponseBodyMode() != extprocv3.ProcessingMode_NONE ||
		!skip(pm.GetRequestTrailerMode()) || !skip(pm.GetResponseTrailerMode()) {
		errs = append(errs, "upstream ext_proc: only processing_mode headers SEND, bodies NONE, trailers SKIP is emulated")
	}
	for _, expr := range ep.GetRequestAttributes() {
		m := hostMetadataExpr.FindStringSubmatch(expr)
		if m == nil {
			errs = append(errs, fmt.Sprintf("upstream ext_proc: request_attributes %q not emulated (only xds.upstream_host_metadata.filter_metadata['NS']['KEY'])", expr))
			continue
		}
		a.Attributes = append(a.Attributes, hostMetadataAttr{expr: expr, ns: m[1], key: m[2]})
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	return a, nil
}

// checkAttributeValues refuses endpoints whose metadata at an attribute's path is not
// a string: Envoy would send a number or a bool as such and anything else as CEL's
// printed text (matching_utils.cc, ExpressionManager::evaluateAttributes), which the
// front does not reproduce. An absent value is fine: its expression fails and Envoy
// leaves it out.
func (a *AttemptExtProc) checkAttributeValues(hosts []*Host) error {
	for _, at := range a.Attributes {
		for _, h := range hosts {
			v, ok := h.Metadata[at.ns].GetFields()[at.key]
			if _, isString := v.GetKind().(*structpb.Value_StringValue); ok && !isString {
				return fmt.Errorf("endpoint %s: metadata %s/%s is not a string (not emulated as an attribute)", h.Addr, at.ns, at.key)
			}
		}
	}
	return nil
}

// attributes evaluates the request attributes for host: the Struct Envoy sends in
// ProcessingRequest.attributes["envoy.filters.http.ext_proc"] (ext_proc.cc
// Filter::addAttributes), the expression's text as the field name.
func (a *AttemptExtProc) attributes(host *Host) map[string]*structpb.Struct {
	if len(a.Attributes) == 0 {
		return nil
	}
	s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for _, at := range a.Attributes {
		if v, ok := host.Metadata[at.ns].GetFields()[at.key]; ok {
			s.Fields[at.expr] = structpb.NewStringValue(v.GetStringValue())
		}
	}
	return map[string]*structpb.Struct{extProcFilterName: s}
}

// extProcFilterName is the ext_proc filter's name, the key of its attributes.
const extProcFilterName = "envoy.filters.http.ext_proc"

// checkAttemptCluster checks that an upstream ext_proc's gRPC cluster is a static
// cluster with one endpoint.
func checkAttemptCluster(a *AttemptExtProc, static map[string]*Cluster) error {
	if a == nil {
		return nil
	}
	c := static[a.Cluster]
	if c == nil {
		return fmt.Errorf("upstream ext_proc: grpc_service cluster %q is not a static cluster", a.Cluster)
	}
	if len(c.Endpoints) != 1 {
		return fmt.Errorf("upstream ext_proc: grpc_service cluster %q: exactly one endpoint is emulated, found %d", a.Cluster, len(c.Endpoints))
	}
	return nil
}
