package catalog

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Cluster is an upstream the channels route to: one Envoy cluster with one endpoint,
// served to Envoy over xDS (extproc/xds) from the same catalog, so a new provider host
// is routable without restarting Envoy.
type Cluster struct {
	Name string `json:"name"`
	// Address is host:port. An IP address is dialled as is (an Envoy STATIC cluster); a
	// DNS name is resolved by Envoy (LOGICAL_DNS, IPv4 preferred).
	Address string `json:"address"`
	// TLS makes the connection TLS with SNI and a certificate check for the host name
	// (TLSServerName, default the address's host) against CAFile (default the system
	// CA bundle, DefaultCAFile).
	TLS           bool   `json:"tls,omitempty"`
	TLSServerName string `json:"tls_server_name,omitempty"`
	CAFile        string `json:"ca_file,omitempty"`
	// ConnectTimeout bounds the TCP (and TLS) connect, a Go duration ("1s"; default 5s).
	ConnectTimeout string `json:"connect_timeout,omitempty"`
	// MaxRequests is the cluster's concurrent request limit (Envoy's circuit breakers;
	// default DefaultMaxRequests): a long generation holds one for minutes.
	MaxRequests int `json:"max_requests,omitempty"`

	host           string
	port           int
	connectTimeout time.Duration
}

// DefaultCAFile is the system CA bundle of the Debian-based images.
const DefaultCAFile = "/etc/ssl/certs/ca-certificates.crt"

// DefaultMaxRequests is the default concurrent request limit of a cluster: Envoy's own
// default (1024) would answer request 1025 of a cluster 503 overflow.
const DefaultMaxRequests = 10000

const defaultConnectTimeout = 5 * time.Second

// Host is the address's host (an IP address or a DNS name).
func (c *Cluster) Host() string { return c.host }

// Port is the address's port.
func (c *Cluster) Port() int { return c.port }

// IsDNS reports whether the host is a name Envoy resolves.
func (c *Cluster) IsDNS() bool {
	_, err := netip.ParseAddr(c.host)
	return err != nil
}

// ServerName is the TLS SNI and the name the certificate must carry.
func (c *Cluster) ServerName() string {
	if c.TLSServerName != "" {
		return c.TLSServerName
	}
	return c.host
}

// CABundle is the CA file the upstream certificate is checked against.
func (c *Cluster) CABundle() string {
	if c.CAFile != "" {
		return c.CAFile
	}
	return DefaultCAFile
}

// Timeout is the connect timeout.
func (c *Cluster) Timeout() time.Duration { return c.connectTimeout }

// RequestLimit is MaxRequests, DefaultMaxRequests when unset.
func (c *Cluster) RequestLimit() int {
	if c.MaxRequests == 0 {
		return DefaultMaxRequests
	}
	return c.MaxRequests
}

// validate checks c and fills its parsed fields.
func (c *Cluster) validate(where string, bad func(string, ...any)) {
	if c.Name == "" {
		bad("%s: name is required", where)
	}
	if strings.HasPrefix(c.Name, FailoverClusterPrefix) {
		bad("%s: names starting %q are the gateway's own", where, FailoverClusterPrefix)
	}
	host, port, err := net.SplitHostPort(c.Address)
	p, perr := strconv.Atoi(port)
	switch {
	case err != nil:
		bad("%s: address %q is not host:port", where, c.Address)
	case host == "":
		bad("%s: address %q has no host", where, c.Address)
	case perr != nil || p < 1 || p > 65535:
		bad("%s: address %q: port must be 1 to 65535", where, c.Address)
	default:
		c.host, c.port = host, p
	}
	c.connectTimeout = defaultConnectTimeout
	if c.ConnectTimeout != "" {
		d, err := time.ParseDuration(c.ConnectTimeout)
		if err != nil || d <= 0 {
			bad("%s: connect_timeout %q is not a positive duration", where, c.ConnectTimeout)
		} else {
			c.connectTimeout = d
		}
	}
	if c.MaxRequests < 0 {
		bad("%s: max_requests must be >= 1", where)
	}
	if !c.TLS && (c.TLSServerName != "" || c.CAFile != "") {
		bad("%s: tls_server_name and ca_file need tls: true", where)
	}
}

// String describes the cluster.
func (c *Cluster) String() string { return fmt.Sprintf("cluster %s (%s)", c.Name, c.Address) }
