// Package metrics is extproc's Prometheus instrumentation, on a registry of its own
// (served on the health/metrics listener at /metrics). It observes; it never decides:
//
//   - the Envoy adapter reports how long each phase took through envoy.Observer
//     (gateway_phase_duration_seconds);
//   - the lifecycle hands it each hold when it is made and each request's Record once,
//     when the request is over, through lifecycle.Observer (gateway_requests_total,
//     gateway_upstream_errors_total, gateway_credits_micros_total,
//     gateway_spend_micros_total, gateway_tokens_total,
//     gateway_reservations_in_flight);
//   - the lifecycle's settlement counts are read at each scrape (WatchSettlements:
//     gateway_settlement_retries_total, gateway_settlements_retrying,
//     gateway_settlements_given_up_total);
//   - a gRPC client interceptor times every accounting call
//     (gateway_accounting_call_duration_seconds);
//   - the lifecycle reports how each failed key was answered
//     (gateway_auth_failures_total);
//   - each request routed to a provider is recorded, from the same Record, on the
//     OpenTelemetry GenAI metrics (genai.go: gen_ai.client.token.usage,
//     gen_ai.server.request.duration, gen_ai.server.time_to_first_token,
//     gen_ai.server.time_per_output_token). These are OpenTelemetry instruments, the one
//     source of truth for both their exports: a Prometheus exporter on this registry
//     (gen_ai_client_token_usage, gen_ai_server_request_duration_seconds, ...) and,
//     when the standard OTEL_* environment asks for it, an OTLP reader
//     (internal/telemetry). The gateway_* series are plain Prometheus collectors and
//     are not exported over OTLP.
//
// Label values come only from fixed sets: models and channels from the catalog (any
// other value is "unknown"), endpoints from the lifecycle's route templates, codes from
// the API's error table, account tiers from the ledger's (an operator's list, and at
// most MaxTierLabels of them: spend per tier is the bounded view of spend per
// account). A client can therefore never create a series. The names and
// meanings are documented for operators in docs/observability.md, "Metrics".
package metrics

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/envoy"
	"github.com/llmgw/gateway/extproc/health"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
)

// Label values used when the real value is absent or outside the bounded set.
const (
	Unknown  = "unknown"
	NoneLbl  = "none"
	CodeOK   = "ok"
	Canceled = "canceled"
)

// Upstream error kinds (gateway_upstream_errors_total{kind}).
const (
	KindAccountUnavailable = "account_unavailable" // the provider account is out of funds, revoked or rate limited
	KindUnavailable        = "unavailable"         // the provider is down or overloaded, or no upstream is healthy
	KindTimeout            = "timeout"             // Envoy timed the upstream out (504/408)
	KindRejected           = "rejected_request"    // the provider refused the request as invalid
	KindUnusable           = "unusable_response"   // a 2xx that is not what was asked for
	KindServerError        = "server_error"        // another 5xx
	KindClientError        = "client_error"        // another 4xx
	KindDisconnect         = "disconnect"          // a streamed answer ended before its last chunk
)

// Metrics holds extproc's collectors. Safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	requests       *prometheus.CounterVec
	phases         *prometheus.HistogramVec
	accounting     *prometheus.HistogramVec
	tokens         *prometheus.CounterVec
	credits        *prometheus.CounterVec
	spend          *prometheus.CounterVec
	tiers          tierLabels
	inFlight       prometheus.Gauge
	upstreamErrors *prometheus.CounterVec
	attempts       *prometheus.CounterVec
	authFailures   *prometheus.CounterVec

	// labels are the catalog's model and channel ids (swapped on a reload).
	labels  atomic.Pointer[catalogLabels]
	codes   map[apierr.Code]bool
	catalog *prometheus.GaugeVec
	reloads *prometheus.CounterVec

	genai *genAI
}

var (
	_ envoy.Observer     = (*Metrics)(nil)
	_ lifecycle.Observer = (*Metrics)(nil)
)

// New returns the collectors, registered on a new registry together with the Go
// runtime and process collectors and the GenAI instruments' Prometheus exporter (see
// opts for their other readers). Model and channel labels are limited to cat's.
func New(cat *catalog.Catalog, opts ...Option) *Metrics {
	m := &Metrics{
		reg:   prometheus.NewRegistry(),
		codes: map[apierr.Code]bool{},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_requests_total",
			Help: "Requests finished, by API endpoint, public model, channel and the API code answered (ok or the error code).",
		}, []string{"endpoint", "model", "channel", "code"}),
		phases: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gateway_phase_duration_seconds",
			Help:    "Time extproc spends handling each phase of a request (including the accounting calls made in it).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"phase"}),
		accounting: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gateway_accounting_call_duration_seconds",
			Help:    "Latency of each accounting call made by extproc, as extproc sees it; each operation an Apply carried counts as a call of its own method, taking the Apply's time.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"method"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_tokens_total",
			Help: "Tokens billed (committed), by direction: input or output.",
		}, []string{"direction"}),
		credits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_credits_micros_total",
			Help: "Micro-credits held by reservations, committed (charged) and released (given back: a release, or the part of a hold a commit did not charge).",
		}, []string{"kind"}),
		spend: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_spend_micros_total",
			Help: "Micro-credits charged (committed), by public model (catalog ids only; anything else is \"other\") and the account's tier (at most 16 tiers; \"other\" beyond).",
		}, []string{"model", "tier"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gateway_reservations_in_flight",
			Help: "Reservations held right now: requests admitted and not settled.",
		}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_upstream_errors_total",
			Help: "Upstream failures by kind (account_unavailable, unavailable, timeout, rejected_request, unusable_response, server_error, client_error, disconnect).",
		}, []string{"kind"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_channel_attempts_total",
			Help: "Upstream attempts by channel and outcome (ok, transport, server_error, rate_limited, account).",
		}, []string{"channel", "outcome"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_auth_failures_total",
			Help: "Requests whose API key failed (missing, malformed, unknown, disabled, expired or revoked), by the code answered: invalid_api_key (401), or rate_limit_exceeded (429) once the client address used up its failures.",
		}, []string{"code"}),
	}
	m.catalog = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gateway_catalog_info",
		Help: "The catalog version this extproc serves (1 for the live one).",
	}, []string{"version"})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gateway_catalog_reloads_total",
		Help: "Catalog file changes seen, by result: applied, or refused (invalid: the previous catalog keeps serving).",
	}, []string{"result"})
	m.reg.MustRegister(m.catalog, m.reloads)
	m.reloads.WithLabelValues("applied")
	m.reloads.WithLabelValues("refused")
	m.labels.Store(labelsOf(cat))
	for _, c := range apierr.Codes() {
		m.codes[c] = true
	}
	m.reg.MustRegister(m.requests, m.phases, m.accounting, m.tokens, m.credits, m.spend, m.inFlight, m.upstreamErrors, m.attempts, m.authFailures,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Series operators alert on exist from the start, at zero.
	for _, d := range []string{"input", "output"} {
		m.tokens.WithLabelValues(d)
	}
	for _, k := range []string{"held", "committed", "released"} {
		m.credits.WithLabelValues(k)
	}
	for _, c := range authFailureCodes {
		m.authFailures.WithLabelValues(string(c))
	}
	var o options
	for _, f := range opts {
		f(&o)
	}
	g, err := newGenAI(m.reg, o)
	if err != nil {
		// Only a second exporter on the same registry fails, and the registry is new.
		panic(err)
	}
	m.genai = g
	return m
}

// ObserveAttempt counts an upstream attempt's outcome on a channel (health.Config.Observe).
func (m *Metrics) ObserveAttempt(channel string, f health.Failure) {
	if !m.labels.Load().channels[channel] {
		channel = Unknown
	}
	m.attempts.WithLabelValues(channel, f.String()).Inc()
}

// authFailureCodes are the answers to a failed key (gateway_auth_failures_total{code}).
var authFailureCodes = []apierr.Code{apierr.InvalidAPIKey, apierr.RateLimitExceeded}

// ObserveAuthFailure counts how a request whose key failed was answered
// (lifecycle.Config.ObserveAuthFailure).
func (m *Metrics) ObserveAuthFailure(code apierr.Code) {
	if !slices.Contains(authFailureCodes, code) {
		return
	}
	m.authFailures.WithLabelValues(string(code)).Inc()
}

// WatchHealth exports the channels' health on this replica as
// gateway_channel_state{channel,state} (1 for the channel's current state, 0 for the
// others), read from t at each scrape.
func (m *Metrics) WatchHealth(t *health.Tracker) {
	m.reg.MustRegister(&healthCollector{t: t, m: m})
}

var channelStateDesc = prometheus.NewDesc("gateway_channel_state",
	"Channel health on this extproc replica: 1 for its current state (healthy, cooling, probing).",
	[]string{"channel", "state"}, nil)

type healthCollector struct {
	t *health.Tracker
	m *Metrics
}

func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- channelStateDesc }

func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	for n := range c.m.labels.Load().channels {
		cur, _ := c.t.State(n)
		for _, s := range []health.State{health.Healthy, health.Cooling, health.Probing} {
			v := 0.0
			if s == cur {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(channelStateDesc, prometheus.GaugeValue, v, n, s.String())
		}
	}
}

// Registry returns the registry the collectors are on.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

func (m *Metrics) model(id string) string {
	switch {
	case id == "":
		return NoneLbl
	case m.labels.Load().models[id]:
		return id
	}
	return Unknown
}

func (m *Metrics) channel(name string) string {
	switch {
	case name == "":
		return NoneLbl
	case m.labels.Load().channels[name]:
		return name
	}
	return Unknown
}

// ObservePhase implements envoy.Observer.
func (m *Metrics) ObservePhase(p envoy.Phase, d time.Duration) {
	m.phases.WithLabelValues(string(p)).Observe(d.Seconds())
}

// Held implements lifecycle.Observer: a hold was made.
func (m *Metrics) Held(res ledger.Reservation) {
	m.credits.WithLabelValues("held").Add(float64(res.Amount))
	m.inFlight.Inc()
}

// Observe implements lifecycle.Observer: it counts the request, the upstream error that
// failed it, and its hold's settlement. The lifecycle hands over each hold once and each
// request's record once, so nothing is counted twice (a replayed commit is the one
// settlement of its request).
func (m *Metrics) Observe(rec lifecycle.Record) {
	code := CodeOK
	switch c := rec.Reply.Code; {
	case c != "" && m.codes[c]:
		code = string(c)
	case c != "":
		code = Unknown
	case !rec.Reply.Answered:
		// The stream ended before any answer: the client (or Envoy) gave up.
		code = Canceled
	}
	model := rec.Model
	if model == "" {
		model = rec.AskedModel
	}
	m.requests.WithLabelValues(rec.Endpoint, m.model(model), m.channel(rec.Channel), code).Inc()
	kind := UpstreamKind(rec.Reply)
	if kind != "" {
		m.upstreamErrors.WithLabelValues(kind).Inc()
	}
	if rec.Provider != "" {
		// Routed to a provider: the GenAI metrics (genai.go). error.type is the code
		// answered, or the kind of a streamed answer cut short.
		errType := ""
		switch {
		case code != CodeOK:
			errType = code
		case kind == KindDisconnect:
			errType = kind
		}
		m.genai.observe(&rec, m.model(model), errType)
	}
	if s := &rec.Settlement; s.Reservation != "" {
		m.settled(rec.Model, rec.Tier, s)
	}
}

// settled counts a hold's settlement: a landed commit's charge, and the rest of the hold
// as released. A hold whose settlement failed for good is released whole: accounting
// refused it because the hold had expired (or expires it), and nothing was charged.
func (m *Metrics) settled(model, tier string, s *lifecycle.Settlement) {
	m.inFlight.Dec()
	var charged int64
	if s.Landed() && s.Outcome == lifecycle.OutcomeCommit {
		charged = s.ChargedMicros
		m.credits.WithLabelValues("committed").Add(float64(charged))
		if !m.labels.Load().models[model] {
			model = "other"
		}
		m.spend.WithLabelValues(model, m.tiers.label(tier)).Add(float64(charged))
		if n := s.Usage.InputTokens; n > 0 {
			m.tokens.WithLabelValues("input").Add(float64(n))
		}
		if n := s.Usage.OutputTokens; n > 0 {
			m.tokens.WithLabelValues("output").Add(float64(n))
		}
	}
	if back := s.HoldMicros - charged; back > 0 {
		m.credits.WithLabelValues("released").Add(float64(back))
	}
}

// UpstreamKind classifies a stream's upstream failure, "" when the upstream did not
// fail it: an error answered in a response phase with one of the upstream codes, or a
// streamed success cut before its last chunk.
func UpstreamKind(o lifecycle.Reply) string {
	if o.Code == "" {
		if o.Streamed && !o.Complete && o.UpstreamStatus >= 200 && o.UpstreamStatus <= 299 {
			return KindDisconnect
		}
		return ""
	}
	if !o.CodeOnResponse {
		return ""
	}
	s := o.UpstreamStatus
	switch o.Code {
	case apierr.UpstreamAccountUnavailable:
		return KindAccountUnavailable
	case apierr.ServiceUnavailable, apierr.UpstreamError, apierr.InvalidRequest:
	default:
		// Answers of the response phase that are not upstream failures: an internal
		// error of the rewriter, an unknown video task.
		return ""
	}
	switch {
	case s == 504 || s == 408:
		return KindTimeout
	case o.Code == apierr.ServiceUnavailable:
		return KindUnavailable
	case o.Code == apierr.InvalidRequest:
		return KindRejected
	case s >= 200 && s <= 299:
		return KindUnusable
	case s >= 500:
		return KindServerError
	}
	return KindClientError
}

// AccountingInterceptor times every unary accounting call by method (the last element
// of the full method name: Authenticate, Reserve, Commit, Release, ...). A call a
// standby redirected to the owner is two calls.
func (m *Metrics) AccountingInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		m.accounting.WithLabelValues(method[strings.LastIndexByte(method, '/')+1:]).Observe(time.Since(start).Seconds())
		return err
	}
}

// catalogLabels are the label values a catalog allows.
type catalogLabels struct {
	models, channels map[string]bool
}

func labelsOf(cat *catalog.Catalog) *catalogLabels {
	l := &catalogLabels{models: map[string]bool{}, channels: map[string]bool{}}
	if cat == nil {
		return l
	}
	for _, md := range cat.Models() {
		l.models[md.ID] = true
		for _, ch := range md.Channels() {
			l.channels[ch.Name] = true
		}
	}
	return l
}

// SetCatalog records the catalog now serving (at start and after each reload): its ids
// become the allowed label values and gateway_catalog_info names its version.
func (m *Metrics) SetCatalog(cat *catalog.Catalog, version string) {
	m.labels.Store(labelsOf(cat))
	m.catalog.Reset()
	m.catalog.WithLabelValues(version).Set(1)
}

// CatalogReload counts a catalog file change: applied, or refused.
func (m *Metrics) CatalogReload(applied bool) {
	if applied {
		m.reloads.WithLabelValues("applied").Inc()
		return
	}
	m.reloads.WithLabelValues("refused").Inc()
}
