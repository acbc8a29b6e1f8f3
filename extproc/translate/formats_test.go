package translate

import (
	"slices"
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/credential"
)

// TestFormatRowsComplete: every row of the format table is whole: a unique name, a chat
// API with its codec, fields table, stream media type and docs section (or, for one that
// speaks none, the other kinds it serves), a path the API can take, and a credential
// style with what it needs.
func TestFormatRowsComplete(t *testing.T) {
	documented := map[*upstreamTable]bool{}
	for _, d := range upstreamDocs {
		documented[d.table] = true
	}
	seen := map[string]bool{}
	for _, f := range formats {
		name := f.Name
		if name == "" || seen[name] {
			t.Errorf("row %+v: empty or repeated name", f)
		}
		seen[name] = true
		if got, ok := FormatNamed(name); !ok || got.Name != name {
			t.Errorf("%s: not found by name", name)
		}
		if f.API == 0 && (len(f.Other) == 0 || f.ResponsesAPI != 0 || f.Path.Base != "" || f.Path.Model != "") {
			t.Errorf("%s: speaks no chat API, so it serves other kinds and has no path of its own", name)
		}
		for _, api := range []API{f.API, f.ResponsesAPI} {
			if api == 0 {
				continue
			}
			if _, ok := upstreamCodec(api); !ok {
				t.Errorf("%s: %v has no codec", name, api)
			}
			if table := upstreamFields(api); table == nil || !documented[table] {
				t.Errorf("%s: %v has no documented fields table", name, api)
			}
			if StreamMediaType(api) == "" || strings.HasPrefix(api.String(), "API(") {
				t.Errorf("%s: %v has no stream media type or name", name, api)
			}
			// A path that names no model is the API's own: only a client API has one.
			if _, client := codecs[api]; f.Path.Model == "" && !client {
				t.Errorf("%s: %v has no path of its own; the row needs Path.Model", name, api)
			}
		}
		if p := f.Path; p.Model != "" && (p.Call == "" || p.Stream == "" || !strings.HasPrefix(p.Model, "/")) {
			t.Errorf("%s: model path %+v lacks its calls", name, p)
		}
		switch f.Credential {
		case CredentialKey:
			if !slices.Contains(credential.KeyHeaders, f.KeyHeader) {
				t.Errorf("%s: key header %q is not one the credential package sends", name, f.KeyHeader)
			}
		case CredentialAWS:
			if f.KeyHeader != "" {
				t.Errorf("%s: an aws format has no key header", name)
			}
		case CredentialGCP:
			if f.KeyHeader != "" || !strings.Contains(f.Path.Base, "{project}") || !strings.Contains(f.Path.Base, "{location}") {
				t.Errorf("%s: a gcp format has no key header and a base path naming {project} and {location}", name)
			}
		default:
			t.Errorf("%s: no credential style", name)
		}
	}
}

// TestModelPathEscapes: a row's model path escapes the model id its way: Bedrock's as
// the AWS SDKs escape a path label (':' and '/' too), the others' as url.PathEscape.
func TestModelPathEscapes(t *testing.T) {
	for _, c := range []struct{ format, model, want string }{
		{"bedrock", "arn:aws:bedrock:us-east-1:1:inference-profile/us.anthropic.claude-v2:0", "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.anthropic.claude-v2%3A0/converse"},
		{"vertex-anthropic", "claude-sonnet-4@20250514", "/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict"},
		{"gemini", "tuned/x", "/models/tuned%2Fx:generateContent"},
	} {
		f, _ := FormatNamed(c.format)
		if got, ok := f.Path.ModelPath(c.model, false); !ok || got != c.want {
			t.Errorf("%s: %s, want %s", c.format, got, c.want)
		}
	}
}
