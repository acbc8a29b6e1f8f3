package front

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/google/go-cmp/cmp"
)

func TestApplyHeaderMutation(t *testing.T) {
	base := func() headerList {
		return headerList{{":authority", "gw"}, {":path", "/v1/a"}, {":method", "POST"}, {"x-a", "1"}, {"x-a", "2"}, {"authorization", "Bearer gw-x"}}
	}
	tests := []struct {
		name  string
		rules mutationRules
		m     *extprocsvc.HeaderMutation
		want  headerList
	}{
		{name: "set replaces every value", m: &extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("x-a", "9")}},
			want: headerList{{":authority", "gw"}, {":path", "/v1/a"}, {":method", "POST"}, {"authorization", "Bearer gw-x"}, {"x-a", "9"}}},
		{name: "append adds", m: &extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{appendHeader("x-a", "3")}},
			want: append(base(), header{"x-a", "3"})},
		{name: "removes before sets", m: &extprocsvc.HeaderMutation{
			RemoveHeaders: []string{"authorization"}, SetHeaders: []*corev3.HeaderValueOption{setHeader("authorization", "Bearer sk")}},
			want: headerList{{":authority", "gw"}, {":path", "/v1/a"}, {":method", "POST"}, {"x-a", "1"}, {"x-a", "2"}, {"authorization", "Bearer sk"}}},
		{name: "value field is not read", m: &extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-b", Value: "v"}}}},
			want: append(base(), header{"x-b", ""})},
		{name: "routing and envoy headers ignored", m: &extprocsvc.HeaderMutation{
			SetHeaders:    []*corev3.HeaderValueOption{setHeader(":authority", "evil"), setHeader(":method", "GET"), setHeader("host", "evil"), setHeader("x-envoy-x", "1")},
			RemoveHeaders: []string{":path", "x-envoy-y"}},
			want: base()},
		{name: "path may be set", m: &extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader(":path", "/v1/b")}},
			want: headerList{{":authority", "gw"}, {":method", "POST"}, {"x-a", "1"}, {"x-a", "2"}, {"authorization", "Bearer gw-x"}, {":path", "/v1/b"}}},
		{name: "permissive allows routing headers", rules: permissiveRules, m: &extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("x-envoy-x", "1")}},
			want: append(base(), header{"x-envoy-x", "1"})},
		{name: "keys lowercased", m: &extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("X-Up", "ok")}},
			want: append(base(), header{"x-up", "ok"})},
		{name: "content-length ignored when not allowed", m: &extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("content-length", "5")}},
			want: base()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := base()
			if failed := applyHeaderMutation(&h, tt.m, tt.rules); failed != "" {
				t.Fatalf("failed: %s", failed)
			}
			if d := cmp.Diff(tt.want, h); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

// TestMalformedHeaderMutationFails: Envoy fails the request (500) on a set header whose
// value or name has a forbidden character, on both value and raw_value set, and on a
// remove of an invalid name; it never skips them silently.
func TestMalformedHeaderMutationFails(t *testing.T) {
	for name, c := range map[string]struct {
		m    *extprocsvc.HeaderMutation
		want string
	}{
		"newline in value":   {&extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("x-bad", "a\r\nb")}}, detailsBadHeaderChar},
		"nul in value":       {&extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("x-bad", "a\x00b")}}, detailsBadHeaderChar},
		"control in value":   {&extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("x-bad", "a\x01b")}}, detailsBadHeaderChar},
		"space in name":      {&extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("x bad", "v")}}, detailsBadHeaderChar},
		"value and raw":      {&extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-b", Value: "v", RawValue: []byte("v")}}}}, detailsValueAndRawValue},
		"bad name removed":   {&extprocsvc.HeaderMutation{RemoveHeaders: []string{"x\nbad"}}, detailsBadRemoveChar},
		"disallowed skipped": {&extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("x-envoy-x", "1"), setHeader("x-tab", "a\tb")}}, ""},
	} {
		h := headerList{{"x-a", "1"}}
		if got := applyHeaderMutation(&h, c.m, mutationRules{}); got != c.want {
			t.Errorf("%s: failed %q, want %q", name, got, c.want)
		}
	}
}

func TestCEL(t *testing.T) {
	a := attrs{Path: "/v1/messages", Code: 503, Details: "cluster_not_found"}
	tests := []struct {
		name, expr string
		want       bool
		wantErr    string
	}{
		{name: "equality", expr: "response.code_details == 'cluster_not_found'", want: true},
		{name: "startsWith and", expr: "request.path.startsWith('/v1/messages') && response.code >= 500", want: true},
		{name: "not", expr: "!response.code_details.startsWith('extproc_')", want: true},
		{name: "or parens", expr: "(response.code == 404 || response.code == 503) && response.code != 1", want: true},
		{name: "double quotes", expr: `response.code_details == "x"`, want: false},
		{name: "unknown attribute", expr: "response.flags == 1", wantErr: "unsupported"},
		{name: "unknown method", expr: "request.path.endsWith('x')", wantErr: "unsupported"},
		{name: "not boolean", expr: "response.code", wantErr: "boolean"},
		{name: "type mismatch", expr: "response.code == 'x'", wantErr: "boolean"},
		{name: "trailing garbage", expr: "response.code == 1 )", wantErr: "unexpected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := parseCEL(tt.expr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			v, err := e.eval(a)
			if err != nil || v.b != tt.want {
				t.Errorf("= %v (%v), want %v", v.b, err, tt.want)
			}
		})
	}
}

func TestBufferedMutation(t *testing.T) {
	set := func(b string) *extprocsvc.BodyMutation {
		return &extprocsvc.BodyMutation{Mutation: &extprocsvc.BodyMutation_Body{Body: []byte(b)}}
	}
	clearBody := &extprocsvc.BodyMutation{Mutation: &extprocsvc.BodyMutation_ClearBody{ClearBody: true}}
	withCL := func(n string) headerList { return headerList{{"content-length", n}} }
	tests := []struct {
		name   string
		h      headerList
		bm     *extprocsvc.BodyMutation
		want   string
		wantOK bool
	}{
		{name: "no mutation keeps the body", h: withCL("99"), bm: nil, want: "orig", wantOK: true},
		{name: "set body matching content-length", h: withCL("3"), bm: set("new"), want: "new", wantOK: true},
		{name: "set body without content-length", h: nil, bm: set("longer body"), want: "longer body", wantOK: true},
		{name: "set body against a stale content-length", h: withCL("4"), bm: set("longer body"), want: "longer body", wantOK: false},
		{name: "clear body against a non-zero content-length", h: withCL("4"), bm: clearBody, want: "", wantOK: false},
		{name: "clear body with content-length 0", h: withCL("0"), bm: clearBody, want: "", wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := bufferedMutation(tt.h, tt.bm, []byte("orig"))
			if string(got) != tt.want || ok != tt.wantOK {
				t.Errorf("bufferedMutation() = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
