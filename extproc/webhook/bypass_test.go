package webhook

import (
	"context"
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/apierr"
)

// TestParserDifferentialsRefused covers the spellings on which URL parsers disagree
// about the host (userinfo tricks, backslashes, control characters), over-long names,
// and accepts the harmless look-alikes ('@' in the path or query, punycode labels)
// with the host a provider's parser would see.
func TestParserDifferentialsRefused(t *testing.T) {
	long63 := strings.Repeat("a", 63)
	cases := []struct {
		name, raw, host string // host "" means refused
	}{
		{name: "at sign in the path", raw: "https://hooks.example.com/@127.0.0.1/cb", host: "hooks.example.com"},
		{name: "at sign in the query", raw: "https://hooks.example.com/cb?next=@10.0.0.1", host: "hooks.example.com"},
		{name: "punycode label", raw: "https://xn--bcher-kva.example.com/cb", host: "xn--bcher-kva.example.com"},
		{name: "port then userinfo", raw: "https://hooks.example.com:443@127.0.0.1/cb"},
		{name: "backslash before at", raw: "https://hooks.example.com\\@127.0.0.1/cb"},
		{name: "backslash as a slash", raw: "https://127.0.0.1\\.hooks.example.com/cb"},
		{name: "tab in the host", raw: "https://hooks.exam\tple.com/cb"},
		{name: "newline at the end", raw: "https://hooks.example.com/cb\n"},
		{name: "encoded dot", raw: "https://hooks%2eexample.com/cb"},
		{name: "zone id", raw: "https://[fe80::1%25lo]/cb"},
		{name: "unbracketed ipv6", raw: "https://::1/cb"},
		{name: "two trailing dots", raw: "https://hooks.example.com../cb"},
		{name: "label of 64", raw: "https://" + long63 + "a.example.com/cb"},
		{name: "host of 254", raw: "https://" + strings.Repeat(long63+".", 3) + strings.Repeat("a", 61) + ".x/cb"},
		{name: "url past the limit", raw: "https://hooks.example.com/" + strings.Repeat("a", MaxURLLen)},
		{name: "fullwidth dot", raw: "https://127\uff0e0\uff0e0\uff0e1/cb"},
		{name: "mixed-case scheme, upper host", raw: "hTTpS://HOOKS.EXAMPLE.COM/cb", host: "hooks.example.com"},
		{name: "scheme-relative", raw: "//hooks.example.com/cb"},
		{name: "javascript scheme", raw: "javascript:alert(1)//hooks.example.com"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			host, e := CheckSyntax(tc.raw)
			switch {
			case tc.host == "" && e == nil:
				t.Fatalf("accepted with host %q", host)
			case tc.host == "" && e.Code != apierr.InvalidWebhookURL:
				t.Fatalf("code %s", e.Code)
			case tc.host != "" && e != nil:
				t.Fatalf("refused: %s", e.Message)
			case host != tc.host:
				t.Fatalf("host %q, want %q", host, tc.host)
			}
		})
	}
}

// TestResolvedHostIsTheCheckedHost: the name resolved is exactly the normalised host,
// so a look-alike path cannot make the check resolve one name while the provider calls
// another.
func TestResolvedHostIsTheCheckedHost(t *testing.T) {
	r := newResolver()
	v := &Validator{Resolver: r}
	if e := v.Check(context.Background(), "https://HOOKS.example.com./@rebind.attacker.com/cb"); e != nil {
		t.Fatalf("refused: %s", e.Message)
	}
	if len(r.lookups) != 1 || r.lookups[0] != "hooks.example.com" {
		t.Fatalf("lookups %q", r.lookups)
	}
}
