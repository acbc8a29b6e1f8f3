package front

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	celv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/filters/cel/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// Mapper is one local_reply_config mapper: a CEL filter and its rewrites.
type Mapper struct {
	filter     expr
	status     int // 0: keep
	headers    []mapperHeader
	body       *string
	jsonFormat *structpb.Struct
}

type mapperHeader struct {
	key, value string
	overwrite  bool
}

const celFilterName = "envoy.access_loggers.extension_filters.cel"

func mapperFrom(m *hcmv3.ResponseMapper) (Mapper, error) {
	var out Mapper
	ef := m.GetFilter().GetExtensionFilter()
	if ef == nil || ef.GetName() != celFilterName {
		return out, errors.New("only the CEL extension_filter is emulated")
	}
	cel := &celv3.ExpressionFilter{}
	if err := ef.GetTypedConfig().UnmarshalTo(cel); err != nil {
		return out, fmt.Errorf("extension_filter: %v", err)
	}
	e, err := parseCEL(cel.GetExpression())
	if err != nil {
		return out, err
	}
	out.filter = e
	if s := m.GetStatusCode(); s != nil {
		out.status = int(s.GetValue())
	}
	for _, h := range m.GetHeadersToAdd() {
		var ow bool
		switch h.GetAppendAction() {
		case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
			ow = true
		default:
			return out, fmt.Errorf("headers_to_add append_action %v not emulated", h.GetAppendAction())
		}
		out.headers = append(out.headers, mapperHeader{strings.ToLower(h.GetHeader().GetKey()), h.GetHeader().GetValue(), ow})
	}
	if b := m.GetBody(); b != nil {
		if b.GetFilename() != "" {
			return out, errors.New("body.filename not emulated")
		}
		s := b.GetInlineString()
		out.body = &s
	}
	if f := m.GetBodyFormatOverride(); f != nil {
		out.jsonFormat = f.GetJsonFormat()
		if err := checkOperators(out.jsonFormat.AsMap()); err != nil {
			return out, err
		}
	}
	return out, nil
}

var operatorRE = regexp.MustCompile(`%[A-Z_]+(\([^)]*\))?%`)

// supportedOperators are the command operators the front substitutes.
var supportedOperators = map[string]bool{
	"%LOCAL_REPLY_BODY%": true, "%RESPONSE_CODE%": true, "%RESPONSE_CODE_DETAILS%": true,
}

func checkOperators(v any) error {
	switch x := v.(type) {
	case string:
		for _, op := range operatorRE.FindAllString(x, -1) {
			if !supportedOperators[op] {
				return fmt.Errorf("command operator %s not emulated", op)
			}
		}
	case map[string]any:
		for _, e := range x {
			if err := checkOperators(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := checkOperators(e); err != nil {
				return err
			}
		}
	}
	return nil
}

func substitute(s string, a attrs, body string) string {
	return operatorRE.ReplaceAllStringFunc(s, func(op string) string {
		switch op {
		case "%LOCAL_REPLY_BODY%":
			return body
		case "%RESPONSE_CODE%":
			return strconv.Itoa(a.Code)
		case "%RESPONSE_CODE_DETAILS%":
			return a.Details
		}
		return op
	})
}

func substituteJSON(v any, a attrs, body string) any {
	switch x := v.(type) {
	case string:
		return substitute(x, a, body)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = substituteJSON(e, a, body)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = substituteJSON(e, a, body)
		}
		return out
	}
	return v
}

// localReply is a response Envoy generates itself.
type localReply struct {
	status  int
	headers headerList
	body    []byte
	details string
}

// buildLocalReply follows Envoy's sendLocalReply: the caller's header modifications,
// then local_reply_config (the first matching mapper's status, headers and body
// format; without a match the body is kept), then content-length and content-type
// (text/plain unless a header set one and the body was not rewritten).
func buildLocalReply(mappers []Mapper, path string, status int, body string, details string, modify func(*headerList)) localReply {
	var h headerList
	if modify != nil {
		modify(&h)
	}
	origCT, _ := h.get("content-type")
	a := attrs{Path: path, Code: status, Details: details}
	newBody, ctype := body, "text/plain"
	for _, m := range mappers {
		v, err := m.filter.eval(a)
		if err != nil || !v.b {
			continue
		}
		if m.status != 0 {
			status = m.status
		}
		for _, mh := range m.headers {
			if mh.overwrite {
				h.set(mh.key, mh.value)
			} else {
				h.add(mh.key, mh.value)
			}
		}
		if m.body != nil {
			newBody = *m.body
		}
		// Formatters see the status after the rewrite, as Envoy's do.
		fa := attrs{Path: path, Code: status, Details: details}
		if m.jsonFormat != nil {
			js, _ := json.Marshal(substituteJSON(m.jsonFormat.AsMap(), fa, newBody))
			newBody, ctype = string(js)+"\n", "application/json"
		}
		break
	}
	ct, hasCT := h.get("content-type")
	custom := hasCT && ct != origCT
	if newBody != "" {
		h.set("content-length", strconv.Itoa(len(newBody)))
		if !hasCT || (newBody != body && !custom) {
			h.set("content-type", ctype)
		}
	}
	return localReply{status: status, headers: h, body: []byte(newBody), details: details}
}
