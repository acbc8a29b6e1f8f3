package webhook

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/llmgw/gateway/extproc/apierr"
)

// fakeResolver answers from a fixed table; unknown names fail like NXDOMAIN. It records
// every lookup.
type fakeResolver struct {
	table   map[string][]string
	lookups []string
}

var _ Resolver = (*fakeResolver)(nil)

func (f *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	f.lookups = append(f.lookups, host)
	ips, ok := f.table[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	out := make([]netip.Addr, len(ips))
	for i, s := range ips {
		out[i] = netip.MustParseAddr(s)
	}
	return out, nil
}

func newResolver() *fakeResolver {
	return &fakeResolver{table: map[string][]string{
		"hooks.example.com":        {"93.184.215.14"},
		"api.customer.io":          {"104.18.2.3", "2606:4700::6812:203"},
		"cb.partner.net":           {"151.101.1.1"},
		"rebind.attacker.com":      {"127.0.0.1"},
		"ten.attacker.com":         {"10.1.2.3"},
		"corp.attacker.com":        {"172.20.0.5"},
		"home.attacker.com":        {"192.168.1.1"},
		"meta.attacker.com":        {"169.254.169.254"},
		"cgnat.attacker.com":       {"100.100.100.200"},
		"zero.attacker.com":        {"0.0.0.0"},
		"mcast.attacker.com":       {"239.1.1.1"},
		"bcast.attacker.com":       {"255.255.255.255"},
		"v6loop.attacker.com":      {"::1"},
		"v6ula.attacker.com":       {"fd00:ec2::254"},
		"v6ll.attacker.com":        {"fe80::1"},
		"mapped.attacker.com":      {"::ffff:10.0.0.1"},
		"nat64.attacker.com":       {"64:ff9b::7f00:1"},
		"sixto4.attacker.com":      {"2002:7f00:1::1"},
		"mixed.attacker.com":       {"93.184.215.14", "10.0.0.7"},
		"bench.attacker.com":       {"198.18.0.1"},
		"doc.attacker.com":         {"192.0.2.10"},
		"gw.llmgw.dev":             {"93.184.215.20"},
		"api.llmgw.dev":            {"93.184.215.21"},
		"empty.attacker.com":       {},
		"metadata.google.internal": {"169.254.169.254"},
		"x.localhost":              {"127.0.0.1"},
		"public.but.on.port.com":   {"93.184.215.14"},
		"user.example.org":         {"93.184.215.14"},
		"fragment.example.org":     {"93.184.215.14"},
	}}
}

func TestWebhookRefusesInternalDestinations(t *testing.T) {
	corpus := []string{
		// scheme and port
		"http://hooks.example.com/cb",
		"ftp://hooks.example.com/cb",
		"hooks.example.com/cb",
		"//hooks.example.com/cb",
		"https:hooks.example.com/cb",
		"https://public.but.on.port.com:8443/cb",
		"https://public.but.on.port.com:80/cb",
		"https://public.but.on.port.com:0443/cb",
		"https://public.but.on.port.com:/cb",
		// credentials and fragments
		"https://user:pass@user.example.org/cb",
		"https://user@user.example.org/cb",
		"https://fragment.example.org/cb#x",
		"https://fragment.example.org/cb#",
		// IP literals in every notation
		"https://127.0.0.1/cb",
		"https://127.0.0.1:443/cb",
		"https://2130706433/cb",
		"https://0177.0.0.1/cb",
		"https://0x7f.0.0.1/cb",
		"https://0x7f.1/cb",
		"https://0x7f000001/cb",
		"https://127.1/cb",
		"https://10.0.0.1/cb",
		"https://169.254.169.254/latest/meta-data/",
		"https://[::1]/cb",
		"https://[::ffff:127.0.0.1]/cb",
		"https://[::ffff:7f00:1]/cb",
		"https://[0:0:0:0:0:ffff:169.254.169.254]/cb",
		"https://[fe80::1%25eth0]/cb",
		"https://127%2E0%2E0%2E1/cb",
		"https://0/cb",
		"https://1.1.1.1/cb",
		// local and internal names
		"https://localhost/cb",
		"https://LOCALHOST./cb",
		"https://api.localhost/cb",
		"https://x.localhost/cb",
		"https://intranet/cb",
		"https://metadata/computeMetadata/v1/",
		"https://metadata.google.internal/computeMetadata/v1/",
		"https://service.internal/cb",
		"https://printer.local/cb",
		"https://nas.lan/cb",
		"https://router.home.arpa/cb",
		"https://1.0.0.127.in-addr.arpa/cb",
		"https://metadata.goog/cb",
		"https://instance-data.ec2.internal/latest/",
		// names that resolve inward (or not at all)
		"https://rebind.attacker.com/cb",
		"https://ten.attacker.com/cb",
		"https://corp.attacker.com/cb",
		"https://home.attacker.com/cb",
		"https://meta.attacker.com/cb",
		"https://cgnat.attacker.com/cb",
		"https://zero.attacker.com/cb",
		"https://mcast.attacker.com/cb",
		"https://bcast.attacker.com/cb",
		"https://v6loop.attacker.com/cb",
		"https://v6ula.attacker.com/cb",
		"https://v6ll.attacker.com/cb",
		"https://mapped.attacker.com/cb",
		"https://nat64.attacker.com/cb",
		"https://sixto4.attacker.com/cb",
		"https://mixed.attacker.com/cb",
		"https://bench.attacker.com/cb",
		"https://doc.attacker.com/cb",
		"https://empty.attacker.com/cb",
		"https://nxdomain.attacker.com/cb",
		// the service's own domain
		"https://gw.llmgw.dev/cb",
		"https://llmgw.dev/cb",
		"https://api.llmgw.dev./cb",
		// malformed
		"https://",
		"https:///cb",
		"https://hooks example.com/cb",
		"https://hooks.example.com\\@evil.com/cb",
		"https://-bad-.example.com/cb",
		"https://hooks..example.com/cb",
		"https://hoöks.example.com/cb",
		"",
	}
	if len(corpus) < 40 {
		t.Fatalf("corpus has %d URLs", len(corpus))
	}
	v := &Validator{Resolver: newResolver(), OwnHosts: ParseOwnHosts("llmgw.dev, gateway.llmgw.dev:443")}
	for _, raw := range corpus {
		t.Run(raw, func(t *testing.T) {
			e := v.Check(context.Background(), raw)
			if e == nil {
				t.Fatal("accepted")
			}
			if e.Code != apierr.InvalidWebhookURL || e.Param != "webhook_url" {
				t.Fatalf("error %+v", e)
			}
		})
	}
}

func TestWebhookAcceptsPublicURLs(t *testing.T) {
	tests := []struct {
		name, raw, host string
	}{
		{name: "plain", raw: "https://hooks.example.com/cb", host: "hooks.example.com"},
		{name: "explicit 443", raw: "https://hooks.example.com:443/video/done?id=1", host: "hooks.example.com"},
		{name: "upper-case scheme and host", raw: "HTTPS://Hooks.Example.COM/cb", host: "hooks.example.com"},
		{name: "trailing dot", raw: "https://cb.partner.net./x", host: "cb.partner.net"},
		{name: "dual stack", raw: "https://api.customer.io/webhooks/video", host: "api.customer.io"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newResolver()
			v := &Validator{Resolver: r, OwnHosts: []string{"llmgw.dev"}}
			if e := v.Check(context.Background(), tt.raw); e != nil {
				t.Fatalf("refused: %v", e.Message)
			}
			if len(r.lookups) != 1 || r.lookups[0] != tt.host {
				t.Fatalf("lookups %v", r.lookups)
			}
		})
	}
}

func TestSyntaxRefusalsNeverResolve(t *testing.T) {
	r := newResolver()
	v := &Validator{Resolver: r}
	for _, raw := range []string{"https://127.1/", "https://localhost/", "http://hooks.example.com/", "https://a@hooks.example.com/"} {
		if v.Check(context.Background(), raw) == nil {
			t.Errorf("%s accepted", raw)
		}
	}
	if len(r.lookups) != 0 {
		t.Fatalf("resolved %v", r.lookups)
	}
}

func TestPublicAddr(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"8.8.8.8", true}, {"2606:4700::1", true}, {"100.63.255.255", true}, {"100.128.0.0", true},
		{"100.64.0.1", false}, {"172.31.255.255", false}, {"::ffff:8.8.8.8", true},
		{"2002:0808:0808::1", true}, {"2002:c0a8:0101::1", false}, {"64:ff9b::a9fe:a9fe", false},
		{"ff02::1", false}, {"::", false},
	}
	for _, tt := range tests {
		if got := PublicAddr(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("PublicAddr(%s) = %v", tt.addr, got)
		}
	}
}
