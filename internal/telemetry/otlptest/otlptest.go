// Package otlptest is an OTLP/HTTP metrics receiver for tests: it decodes each export
// (go.opentelemetry.io/proto/otlp) and sums the histogram points it received. It must
// not import any gateway package.
package otlptest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	collectormetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver is a running OTLP/HTTP metrics receiver.
type Receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []*collectormetrics.ExportMetricsServiceRequest
}

// Start starts a receiver; Close stops it.
func Start() *Receiver {
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	return r
}

// URL is the OTEL_EXPORTER_OTLP_ENDPOINT that reaches the receiver.
func (r *Receiver) URL() string { return r.srv.URL }

// Close stops the receiver.
func (r *Receiver) Close() { r.srv.Close() }

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	exp := &collectormetrics.ExportMetricsServiceRequest{}
	if err != nil || req.URL.Path != "/v1/metrics" || proto.Unmarshal(body, exp) != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.got = append(r.got, exp)
	r.mu.Unlock()
	b, _ := proto.Marshal(&collectormetrics.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

// Point is a histogram's point as the last export carried it.
type Point struct {
	Metric, Unit string
	Attrs        map[string]string // string attributes
	Count        uint64
	Sum          float64
}

// Exports is how many exports arrived.
func (r *Receiver) Exports() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// Last returns the histogram points of the last export (a cumulative push: the totals)
// and its resource's service.name.
func (r *Receiver) Last() (points []Point, service string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) == 0 {
		return nil, ""
	}
	for _, rm := range r.got[len(r.got)-1].GetResourceMetrics() {
		for _, a := range rm.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, sm := range rm.GetScopeMetrics() {
			for _, mt := range sm.GetMetrics() {
				for _, dp := range mt.GetHistogram().GetDataPoints() {
					p := Point{Metric: mt.GetName(), Unit: mt.GetUnit(), Attrs: map[string]string{}, Count: dp.GetCount(), Sum: dp.GetSum()}
					for _, a := range dp.GetAttributes() {
						p.Attrs[a.GetKey()] = a.GetValue().GetStringValue()
					}
					points = append(points, p)
				}
			}
		}
	}
	return points, service
}
