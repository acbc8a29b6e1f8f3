// Package front is the Envoy test front: an HTTP server that behaves like Envoy for
// exactly the subset of configuration envoy/envoy.yaml uses, reading that same file,
// and refusing to start on any setting it does not emulate. The connection manager's
// request header handling is emulated (x-forwarded-for, internal or external request,
// cleaning of x-envoy-* instructions, x-envoy-external-address); the router's retries
// are emulated for the route retry policy's subset in retrypolicy.go, over the
// priorities, health and weights of a cluster's endpoints (lb.go). Per request it drives one
// ext_proc gRPC stream the way Envoy does (EmulatedEnvoyVersion; docs/design/envoy-extproc.md): the
// message sequence, header and body mutations, mode overrides, pipelined STREAMED
// response bodies, immediate responses, local replies through local_reply_config,
// routing by cluster_header, and the clusters delivered over ADS (CDS: ads.go) — with
// several endpoints under Envoy's priority load balancing (lb.go), the route's retries
// across them (router.go, retrystate.go), a cluster's upstream ext_proc per attempt
// (attemptflow.go, upstreamfilters.go) and transport_socket_matches (socketmatch.go).
//
// It is a test double for Envoy, used by the e2e suite and `make run` where no Envoy
// binary can be installed; it is never a production path. It depends on the Envoy
// config loader (envoy/config) and go-control-plane, not on extproc or accounting.
package front

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/llmgw/gateway/envoy"
	"github.com/llmgw/gateway/internal/vtcodec"
)

// EmulatedEnvoyVersion is the Envoy release whose behaviour the front emulates: the
// release the gateway is pinned to (envoy/VERSION).
var EmulatedEnvoyVersion = envoy.Version

// Front serves HTTP like Envoy configured by a Config. Safe for concurrent use.
type Front struct {
	cfg     *Config
	conn    *grpc.ClientConn
	extproc extprocsvc.ExternalProcessorClient
	// clusters are the static clusters and those CDS delivered.
	clusters *clusterTable
	// cds keeps the dynamic clusters (nil without dynamic_resources); stopCDS ends it.
	cds     *cdsClient
	stopCDS context.CancelFunc
	// node is the local address appended to x-forwarded-for for a loopback peer.
	node netip.Addr
	logf func(format string, args ...any)
	// accessLog receives the access log lines (stdout, as Envoy's stdout logger).
	accessLog *accessLogWriter
	// heldBodyEnded, when set (tests), is called when a response body held during the
	// response-headers exchange has fully arrived.
	heldBodyEnded func()
	// heap is the overload manager's fixed heap monitor and its actions.
	heap *heapWatch
	// random draws the retry back-off jitter.
	random func() uint64
	// onBackoff, when set (tests), is told every retry back-off before it is waited.
	onBackoff func(time.Duration)
	// grpcConns are the connections to upstream ext_proc clusters other than the
	// connection manager's ext_proc cluster (attemptstream.go).
	grpcMu    sync.Mutex
	grpcConns map[string]*grpc.ClientConn
}

// Listen wraps the downstream listener with the overload manager's connection limit.
func (f *Front) Listen(ln net.Listener) net.Listener {
	return limitConnections(ln, f.cfg.Overload.MaxConnections)
}

// New returns a Front for cfg. It dials the ext_proc cluster lazily.
func New(cfg *Config, logger *log.Logger) (*Front, error) {
	ep := cfg.Clusters[cfg.ExtProc.Cluster]
	opts := grpcDialOptions()
	if ep.KeepaliveInterval > 0 {
		// HTTP/2 connection_keepalive: PINGs every interval, also with no stream open.
		opts = append(opts, grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time: ep.KeepaliveInterval, Timeout: ep.KeepaliveTimeout, PermitWithoutStream: true,
		}))
	}
	conn, err := grpc.NewClient("passthrough:///"+ep.Addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("ext_proc cluster %s: %w", ep.Name, err)
	}
	f := &Front{
		cfg: cfg, conn: conn, extproc: extprocsvc.NewExternalProcessorClient(conn),
		clusters: newClusterTable(cfg.Clusters),
		node:     nodeAddress(),
		logf:     func(string, ...any) {},
		random:   mathrand.Uint64,
	}
	if logger != nil {
		f.logf = logger.Printf
	}
	if cfg.AccessLog != nil {
		f.accessLog = &accessLogWriter{w: os.Stdout}
	}
	f.heap = startHeapWatch(cfg.Overload)
	if cfg.ADS != nil {
		var adsConn grpc.ClientConnInterface = conn
		if cfg.ADS.Cluster != cfg.ExtProc.Cluster {
			ac, err := grpc.NewClient("passthrough:///"+cfg.Clusters[cfg.ADS.Cluster].Addr, grpcDialOptions()...)
			if err != nil {
				return nil, fmt.Errorf("ads cluster %s: %w", cfg.ADS.Cluster, err)
			}
			adsConn = ac
		}
		f.cds = &cdsClient{ads: cfg.ADS, conn: adsConn, table: f.clusters, logf: f.logf, ready: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		f.stopCDS = cancel
		go f.cds.run(ctx)
	}
	return f, nil
}

// envoyHTTP2Window is Envoy's default HTTP/2 flow-control window, for streams and for
// the connection alike (Http2ProtocolOptions initial_stream_window_size and
// initial_connection_window_size, 256 MiB: OptionsLimits in
// source/common/http/utility.h).
const envoyHTTP2Window = 256 << 20

// grpcDialOptions are the options of the gRPC connections the front opens to a
// cluster: plaintext, Envoy's static windows (grpc-go's default instead starts at
// 64 KiB and measures the bandwidth-delay product with a PING after every round of
// data received, which Envoy never sends), and generated marshalling for Envoy's
// messages (internal/vtcodec: the front's own cost, nothing on the wire changes).
func grpcDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		vtcodec.DialOption(),
		grpc.WithInitialWindowSize(envoyHTTP2Window),
		grpc.WithInitialConnWindowSize(envoyHTTP2Window),
		// Envoy's gRPC client takes a message of any size unless
		// max_receive_message_length is set (api/envoy/config/core/v3/grpc_service.proto,
		// GrpcService.EnvoyGrpc: 0 means unlimited; the front refuses the setting), so a
		// body mutation as large as the buffer limit arrives; grpc-go's default is 4 MiB.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)),
	}
}

func newTransport(c *Cluster, tc *tls.Config) *http.Transport {
	t := &http.Transport{
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		// Envoy's router forwards the request headers as extproc left them, the client's
		// accept-encoding included, and hands the upstream's body on as it came:
		// decoding happens only in a configured decompressor filter (router.cc
		// Filter::decodeHeaders; source/extensions/filters/http/decompressor/
		// decompressor_filter.cc). So the front neither adds its own accept-encoding nor
		// decodes.
		DisableCompression:  true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     60 * time.Second,
		TLSClientConfig:     tc,
	}
	if c.HTTP2 {
		t.Protocols = new(http.Protocols)
		if tc != nil {
			t.Protocols.SetHTTP2(true)
		} else {
			t.Protocols.SetUnencryptedHTTP2(true)
		}
	}
	return t
}

// Close releases the ext_proc connection and idle upstream connections.
func (f *Front) Close() error {
	f.heap.close()
	if f.stopCDS != nil {
		f.stopCDS()
	}
	f.clusters.closeIdle()
	f.grpcMu.Lock()
	for _, c := range f.grpcConns {
		_ = c.Close()
	}
	f.grpcMu.Unlock()
	return f.conn.Close()
}

// WaitClusters returns once the first CDS response was applied, or the initial fetch
// timeout passed (at once without dynamic_resources): Envoy's listeners start serving
// only after the cluster manager's initialization, which waits for CDS within
// initial_fetch_timeout (source/common/upstream/cluster_manager_impl.cc,
// ClusterManagerInitHelper; source/server/server.cc, InstanceImpl::initialize).
func (f *Front) WaitClusters() {
	if f.cds == nil {
		return
	}
	var timeout <-chan time.Time
	if d := f.cfg.ADS.InitialFetchTimeout; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-f.cds.ready:
	case <-timeout:
		f.logf("cds: no clusters within the initial fetch timeout; serving without them")
	}
}

// Handler returns the HTTP handler (HTTP/1.1 and, with the server's protocols, h2c).
func (f *Front) Handler() http.Handler { return f }

// ServeHTTP handles one downstream request.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	x := &exchange{f: f, w: w, r: r, ctx: ctx, mode: f.cfg.ExtProc.Mode, start: time.Now()}
	if f.heap.stopRequests.Load() {
		// stop_accepting_requests: a 503 before any filter runs, ext_proc included.
		x.reqH = f.requestHeaders(r)
		x.directLocalReply(http.StatusServiceUnavailable, "envoy overloaded", detailsOverload, nil)
		x.logAccess()
		return
	}
	x.run()
	x.closeStream()
	x.releaseSlots()
	cancel()
	// The request is done (Envoy logs when the stream completes, reset or not).
	x.logAccess()
	if x.abort {
		// Reset the downstream stream, as Envoy does after response headers went out:
		// net/http's documented way (HTTP/1 closes the connection, HTTP/2 sends
		// RST_STREAM) and the server does not log it.
		panic(http.ErrAbortHandler)
	}
}

// Details strings of Envoy's own local replies.
const (
	detailsRoutNotFound      = "route_not_found"
	detailsClusterNotFound   = "cluster_not_found"
	detailsPayloadTooLarge   = "request_payload_too_large"
	detailsResponseTooLarge  = "response_payload_too_large"
	detailsMismatchCL        = "mismatch_between_content_length_and_the_length_of_the_mutated_body"
	detailsMessageTimeout    = "ext_proc_error_per-message_timeout_exceeded"
	detailsSpurious          = "spurious_message"
	detailsConnectFailure    = "upstream_reset_before_response_started{remote_connection_failure}"
	detailsUpstreamReset     = "upstream_reset_before_response_started{remote_reset}"
	detailsStreamIdleTimeout = "stream_idle_timeout"
	detailsRequestTimeout    = "request_overall_timeout"
	detailsOverflow          = "upstream_reset_before_response_started{overflow}"
	detailsNoHealthyUpstream = "no_healthy_upstream"
	// detailsUnsupported marks what the front cannot emulate (a test double's refusal).
	detailsUnsupported = "envoyfront_unsupported_mode_override"
	// detailsUnsupportedRetry refuses a retry header the front does not emulate.
	detailsUnsupportedRetry = "envoyfront_unsupported_retry_header"
)

func grpcErrorDetails(code int) string { return fmt.Sprintf("ext_proc_error_gRPC_error_%d", code) }

// newRequestID returns a random UUID v4, as Envoy generates x-request-id.
func newRequestID() string {
	var b [16]byte
	uuidRandom.read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	hex.Encode(s[9:13], b[4:6])
	hex.Encode(s[14:18], b[6:8])
	hex.Encode(s[19:23], b[8:10])
	hex.Encode(s[24:36], b[10:])
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
	return string(s[:])
}

// uuidRandom is the randomness of request ids: 2048 bytes from crypto/rand at a time,
// as Envoy's RandomGeneratorImpl::uuid prefetches RAND_bytes
// (source/common/common/random_generator.cc).
var uuidRandom = &randomBuffer{off: randomBufferSize}

const randomBufferSize = 2048

type randomBuffer struct {
	mu  sync.Mutex
	buf [randomBufferSize]byte
	off int
}

// read fills p (at most randomBufferSize bytes) with bytes no other read returns.
func (r *randomBuffer) read(p []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.off+len(p) > len(r.buf) {
		_, _ = rand.Read(r.buf[:])
		r.off = 0
	}
	r.off += copy(p, r.buf[r.off:])
}

// requestHeaders builds the header map Envoy's connection manager hands to filters.
func (f *Front) requestHeaders(r *http.Request) headerList {
	// Room for the connection manager's own headers (sanitize), and extproc's.
	h := make(headerList, 4, 4+len(r.Header)+8)
	h[0], h[1], h[2], h[3] = header{":authority", r.Host}, header{":path", ""}, header{":method", r.Method}, header{":scheme", "http"}
	if r.RequestURI != "" && !strings.HasPrefix(r.RequestURI, "http") {
		h[1].Value = r.RequestURI
	} else {
		h[1].Value = r.URL.RequestURI()
	}
	h = appendHTTP(h, r.Header)
	h.del("host")
	if r.ContentLength > 0 {
		if _, ok := h.get("content-length"); !ok {
			h.add("content-length", strconv.FormatInt(r.ContentLength, 10))
		}
	}
	f.sanitize(&h, peerAddr(r))
	return h
}

func (f *Front) matchRoute(h headerList) *Route {
	path, _ := h.get(":path")
	for i := range f.cfg.Routes {
		if strings.HasPrefix(path, f.cfg.Routes[i].Prefix) {
			return &f.cfg.Routes[i]
		}
	}
	return nil
}

// routeChoice is the cached result of route matching, as Envoy caches the route and
// its cluster_header cluster until a clear_route_cache.
type routeChoice struct {
	route   *Route
	cluster string
}

func (f *Front) chooseRoute(h headerList) routeChoice {
	rt := f.matchRoute(h)
	if rt == nil {
		return routeChoice{}
	}
	if rt.ClusterHeader != "" {
		v, _ := h.get(rt.ClusterHeader)
		return routeChoice{route: rt, cluster: v}
	}
	return routeChoice{route: rt, cluster: rt.Cluster}
}

func isConnectError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// readLimited reads all of r, failing with errTooLarge past limit bytes.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errTooLarge
	}
	return b, nil
}

var errTooLarge = errors.New("body over the buffer limit")

// validMode reports whether the front emulates an effective processing mode.
func validMode(m Mode) bool {
	return requestBodyModeOK(m.RequestBody) && responseBodyModeOK(m.ResponseBody)
}

func modeFromOverride(pm *extprocv3.ProcessingMode) (Mode, bool) {
	m := Mode{
		RequestHeader: pm.GetRequestHeaderMode(), RequestBody: pm.GetRequestBodyMode(),
		ResponseHeader: pm.GetResponseHeaderMode(), ResponseBody: pm.GetResponseBodyMode(),
	}
	if m.ResponseHeader == extprocv3.ProcessingMode_DEFAULT {
		m.ResponseHeader = extprocv3.ProcessingMode_SEND
	}
	trailersOK := func(t extprocv3.ProcessingMode_HeaderSendMode) bool {
		return t == extprocv3.ProcessingMode_DEFAULT || t == extprocv3.ProcessingMode_SKIP
	}
	return m, validMode(m) && trailersOK(pm.GetRequestTrailerMode()) && trailersOK(pm.GetResponseTrailerMode())
}
