package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Alerts counts the webhook worker's work (alerts.Observer):
//
//   - accounting_alert_events_total{type}: alert events the outbox received (the
//     ledger's alerts and webhook.test), counted by the owner's worker;
//   - accounting_webhook_attempts_total and accounting_webhook_failures_total: delivery
//     attempts, and those not answered 2xx within the timeout;
//   - accounting_webhook_oldest_undelivered_seconds: the age of the oldest delivery
//     still to make (0: none).
type Alerts struct {
	generated *prometheus.CounterVec
	attempts  prometheus.Counter
	failures  prometheus.Counter
	oldest    prometheus.Gauge
}

// Alerts returns the webhook collectors, registered on m's registry.
func (m *Metrics) Alerts() *Alerts {
	a := &Alerts{
		generated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "accounting_alert_events_total",
			Help: "Alert events put in the webhook outbox, by type.",
		}, []string{"type"}),
		attempts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "accounting_webhook_attempts_total",
			Help: "Webhook delivery attempts.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "accounting_webhook_failures_total",
			Help: "Webhook delivery attempts not answered 2xx within the timeout.",
		}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "accounting_webhook_oldest_undelivered_seconds",
			Help: "Age of the oldest webhook delivery not yet made or given up (0: none).",
		}),
	}
	m.reg.MustRegister(a.generated, a.attempts, a.failures, a.oldest)
	return a
}

// Generated counts an event of eventType put in the outbox. The type comes from the
// ledger's fixed set (machine.AlertTypes and webhook.test).
func (a *Alerts) Generated(eventType string) { a.generated.WithLabelValues(eventType).Inc() }

// Attempted counts a delivery attempt.
func (a *Alerts) Attempted(ok bool) {
	a.attempts.Inc()
	if !ok {
		a.failures.Inc()
	}
}

// Undelivered sets the age of the oldest delivery waiting.
func (a *Alerts) Undelivered(oldest time.Duration) { a.oldest.Set(oldest.Seconds()) }
