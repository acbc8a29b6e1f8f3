// Package webhook decides whether a client-supplied webhook URL (video submissions'
// webhook_url) may be handed to an upstream provider, which will later POST to it. The
// rule (spec section 7, invalid_webhook_url) is an https URL on port 443 whose host is a
// public DNS name: anything that could make a provider, or this service, call an
// internal destination is refused.
//
// Two stages:
//
//   - Syntax (CheckSyntax) needs nothing but the string: scheme https, port 443 (explicit
//     or implied), no userinfo, no fragment, a DNS hostname of at least two labels, and
//     not an IP literal in any notation a URL parser or inet_aton accepts (dotted,
//     plain decimal 2130706433, octal 0177.0.0.1, hex 0x7f.1, short forms 127.1,
//     bracketed IPv6 including IPv4-mapped forms), not localhost or *.localhost, not a
//     non-public suffix (.internal, .local, .lan, .home.arpa, …) and not a known cloud
//     metadata name.
//   - Destination (Validator.Check) adds the service's own hostnames and resolves the
//     host through an injectable Resolver: every address must be public unicast. A name
//     that does not resolve, or resolves to any private, loopback, link-local, CGNAT,
//     unspecified, multicast, reserved or metadata address, is refused.
//
// What it cannot prevent: a name that resolves publicly now and to an internal address
// when the provider calls it later (DNS rebinding), or a public destination that answers
// the provider's call with a redirect to an internal address. The provider's own egress
// rules (and not following redirects) are the defence there; this check keeps the
// obvious and the resolvable cases out. Accounting's alert webhooks (accounting/alerts)
// apply the same rules at subscription and refuse non-public addresses when they dial.
//
// It depends on the standard library and apierr only.
package webhook

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/llmgw/gateway/extproc/apierr"
)

// MaxURLLen bounds a webhook URL.
const MaxURLLen = 2048

// Resolver resolves a host name to its addresses; *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

// Validator checks webhook URLs against the service's own hosts and a resolver. Safe for
// concurrent use.
type Validator struct {
	// Resolver resolves hosts; net.DefaultResolver when nil.
	Resolver Resolver
	// OwnHosts are the service's own domains (for example from GATEWAY_PUBLIC_HOSTS):
	// each one and every name under it is refused.
	OwnHosts []string
	// Timeout bounds one resolution; 2 s when zero.
	Timeout time.Duration
}

// ParseOwnHosts splits a comma- or space-separated host list (GATEWAY_PUBLIC_HOSTS),
// lowercased, without ports or trailing dots.
func ParseOwnHosts(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		h := strings.ToLower(strings.TrimSuffix(f, "."))
		if hp, _, err := net.SplitHostPort(h); err == nil {
			h = hp
		}
		if h != "" {
			out = append(out, h)
		}
	}
	return out
}

func refuse(msg string) *apierr.Error {
	return apierr.Param(apierr.InvalidWebhookURL, "webhook_url", msg)
}

// CheckSyntax applies every rule that needs no configuration and no resolution, and
// returns the URL's normalised host (lowercase, no trailing dot).
func CheckSyntax(raw string) (string, *apierr.Error) {
	const rule = "The 'webhook_url' must be an https URL on port 443 with a public DNS hostname."
	if raw == "" || len(raw) > MaxURLLen {
		return "", refuse(rule)
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= 0x20 || c == 0x7f || c == '\\' || c >= 0x80 {
			return "", refuse(rule + " It must not contain spaces, control characters, backslashes or non-ASCII characters.")
		}
	}
	if strings.Contains(raw, "#") {
		return "", refuse("The 'webhook_url' must not contain a fragment.")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || !strings.EqualFold(u.Scheme, "https") {
		return "", refuse(rule)
	}
	if u.User != nil || strings.Contains(u.Host, "@") {
		return "", refuse("The 'webhook_url' must not carry credentials.")
	}
	if strings.ContainsAny(u.Host, "%[]") || strings.HasPrefix(u.Host, "[") {
		return "", refuse("The 'webhook_url' host must be a public DNS hostname, not an IP address.")
	}
	host, port := u.Host, ""
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host, port = host[:i], host[i+1:]
		if port != "443" {
			return "", refuse("The 'webhook_url' must use port 443.")
		}
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if msg := hostProblem(host); msg != "" {
		return "", refuse(msg)
	}
	return host, nil
}

// nonPublicSuffixes are names under which no public host lives.
var nonPublicSuffixes = []string{
	"localhost", "internal", "local", "lan", "home", "arpa", "localdomain", "intranet",
	"corp", "private", "test", "invalid", "example", "onion", "alt",
}

// metadataNames are cloud metadata endpoints reachable by name.
var metadataNames = map[string]bool{
	"metadata":                     true,
	"metadata.google.internal":     true,
	"metadata.goog":                true,
	"instance-data":                true,
	"instance-data.ec2.internal":   true,
	"metadata.azure.com":           true,
	"metadata.tencentyun.com":      true,
	"metadata.platformequinix.com": true,
	"kubernetes.default.svc":       true,
}

// hostProblem returns why host is not a public DNS hostname, or "".
func hostProblem(host string) string {
	const ipMsg = "The 'webhook_url' host must be a public DNS hostname, not an IP address."
	if host == "" || len(host) > 253 {
		return "The 'webhook_url' must name a host."
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return ipMsg
	}
	labels := strings.Split(host, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "The 'webhook_url' host is not a valid DNS hostname."
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "The 'webhook_url' host is not a valid DNS hostname."
			}
		}
	}
	// A URL parser (WHATWG) or inet_aton reads a host whose last label is numeric
	// (decimal, octal with a leading 0, or hex 0x…) as an IPv4 address: 2130706433,
	// 0177.0.0.1, 0x7f.1 and 127.1 all reach 127.0.0.1. No real top-level domain is
	// numeric, so any such host is refused.
	if numericLabel(labels[len(labels)-1]) {
		return ipMsg
	}
	if len(labels) < 2 {
		return "The 'webhook_url' host must be a fully qualified public DNS name."
	}
	if metadataNames[host] {
		return "The 'webhook_url' must not point at a cloud metadata service."
	}
	for _, s := range nonPublicSuffixes {
		if host == s || strings.HasSuffix(host, "."+s) {
			return "The 'webhook_url' host must be a public DNS hostname, not a local or internal name."
		}
	}
	return ""
}

func numericLabel(l string) bool {
	if strings.HasPrefix(l, "0x") {
		for i := 2; i < len(l); i++ {
			if c := l[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return l != ""
}

// Check applies CheckSyntax, refuses the service's own hosts, and resolves the host:
// every address must be public.
func (v *Validator) Check(ctx context.Context, raw string) *apierr.Error {
	host, e := CheckSyntax(raw)
	if e != nil {
		return e
	}
	for _, own := range v.OwnHosts {
		if host == own || strings.HasSuffix(host, "."+own) {
			return refuse("The 'webhook_url' must not point at this service.")
		}
	}
	r := v.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	timeout := v.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return refuse("The 'webhook_url' host does not resolve.")
	}
	for _, a := range addrs {
		if !PublicAddr(a) {
			return refuse("The 'webhook_url' host resolves to a private, loopback, link-local or otherwise non-public address.")
		}
	}
	return nil
}

// nonPublic are the address ranges a webhook must never reach.
var nonPublic = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // this network
		"10.0.0.0/8",      // private
		"100.64.0.0/10",   // CGNAT (also Alibaba's metadata 100.100.100.200)
		"127.0.0.0/8",     // loopback
		"169.254.0.0/16",  // link-local, cloud metadata 169.254.169.254
		"172.16.0.0/12",   // private
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // documentation
		"192.88.99.0/24",  // 6to4 relay anycast
		"192.168.0.0/16",  // private
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // documentation
		"203.0.113.0/24",  // documentation
		"224.0.0.0/4",     // multicast
		"240.0.0.0/4",     // reserved, broadcast
		"::/128",          // unspecified
		"::1/128",         // loopback
		"::/96",           // IPv4-compatible (deprecated)
		"100::/64",        // discard
		"2001::/32",       // Teredo
		"2001:db8::/32",   // documentation
		"2001:10::/28",    // ORCHID
		"fc00::/7",        // unique local (AWS metadata fd00:ec2::254)
		"fe80::/10",       // link-local
		"fec0::/10",       // site-local (deprecated)
		"ff00::/8",        // multicast
		"64:ff9b:1::/48",  // local-use NAT64
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// PublicAddr reports whether a is a public unicast address. IPv4-mapped, NAT64
// (64:ff9b::/96) and 6to4 (2002::/16) addresses are judged by the IPv4 address they
// carry.
func PublicAddr(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.Unmap()
	if a.Is6() {
		b := a.As16()
		switch {
		case netip.MustParsePrefix("64:ff9b::/96").Contains(a):
			return PublicAddr(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		case b[0] == 0x20 && b[1] == 0x02:
			return PublicAddr(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
		}
	}
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}
