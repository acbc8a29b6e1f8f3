package loadtest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var d []time.Duration
		for _, x := range n {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, c := range []struct {
		in   []time.Duration
		q    float64
		want time.Duration
	}{
		{nil, .5, 0},
		{ms(7), .99, 7 * time.Millisecond},
		{ms(1, 2, 3, 4), .5, 2 * time.Millisecond},
		{ms(hundred...), .5, 50 * time.Millisecond},
		{ms(hundred...), .99, 99 * time.Millisecond},
		{ms(hundred...), .999, 100 * time.Millisecond},
		{ms(hundred...), 1, 100 * time.Millisecond},
		{ms(hundred...), 0, 1 * time.Millisecond},
	} {
		if got := Quantile(c.in, c.q); got != c.want {
			t.Errorf("Quantile(%d values, %v) = %v, want %v", len(c.in), c.q, got, c.want)
		}
	}
}

// Every scheduled request is sent with its body and headers, each answer is counted by
// status, and one stalled answer does not hold back the requests scheduled after it
// (open loop).
func TestRunOpenLoop(t *testing.T) {
	var n atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			<-release // the first request stalls until every other one was sent
		}
		if b, err := io.ReadAll(r.Body); err != nil || string(b) != "{}" || r.Method != http.MethodPost {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if r.Header.Get("X-I") == "3" {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	target := Target{
		URL:     srv.URL,
		Body:    func(int) []byte { return []byte("{}") },
		Header2: func(i int) http.Header { return http.Header{"X-I": {string(rune('0' + i))}} },
	}
	go func() {
		for n.Load() < 10 {
			time.Sleep(time.Millisecond)
		}
		close(release)
	}()
	s, err := NewSender(target)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res := s.Run(context.Background(), 100, 100*time.Millisecond)
	if res.Sent != 10 || res.OK != 9 || res.Statuses[http.StatusTooManyRequests] != 1 {
		t.Errorf("sent %d, ok %d, statuses %v; want 10 sent, 9 ok, one 429", res.Sent, res.OK, res.Statuses)
	}
	if len(res.Latencies) != 10 {
		t.Errorf("%d latencies, want 10", len(res.Latencies))
	}
}

// Every request is answered when the server closes each connection after its answer,
// and when it closes the kept connections while they idle between requests (the kept
// connection found closed is replaced and the request written again); a server that
// is not there gives every request status 0, and the run still ends.
func TestSenderConnections(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(*httptest.Server)
	}{
		{"connection: close", func(srv *httptest.Server) {
			srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Connection", "close")
			})
		}},
		{"idle connections closed", func(srv *httptest.Server) { srv.Config.IdleTimeout = time.Millisecond }},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			c.setup(srv)
			srv.Start()
			defer srv.Close()
			s, err := NewSender(Target{URL: srv.URL, Body: func(int) []byte { return []byte("{}") }})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for range 2 {
				if res := s.Run(context.Background(), 200, 100*time.Millisecond); res.Sent != 20 || res.OK != 20 {
					t.Errorf("sent %d, ok %d, statuses %v; want 20 answered", res.Sent, res.OK, res.Statuses)
				}
			}
		})
	}
	t.Run("run cut short", func(t *testing.T) {
		// Every answer stalls until the server closes: the cut run closes its connections
		// and ends, its requests in flight unanswered.
		stall, arrived := make(chan struct{}), make(chan struct{}, 1000)
		srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			arrived <- struct{}{}
			<-stall
		}))
		defer srv.Close()
		defer close(stall)
		s, err := NewSender(Target{URL: srv.URL, Body: func(int) []byte { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-arrived // the run is under way: cut it
			cancel()
		}()
		if res := s.Run(ctx, 100, 10*time.Second); res.Sent == 0 || res.Sent >= 1000 || res.Statuses[0] != res.Sent {
			t.Errorf("sent %d, statuses %v; want every request sent unanswered", res.Sent, res.Statuses)
		}
	})
	t.Run("nothing listening", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		srv.Close()
		s, err := NewSender(Target{URL: srv.URL, Body: func(int) []byte { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if res := s.Run(context.Background(), 100, 50*time.Millisecond); res.Sent != 5 || res.Statuses[0] != 5 {
			t.Errorf("sent %d, statuses %v; want 5 unanswered", res.Sent, res.Statuses)
		}
	})
}

func TestProcReadings(t *testing.T) {
	if _, err := CPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	rss, peak, err := Memory(os.Getpid())
	if err != nil || rss <= 0 || peak < rss {
		t.Fatalf("Memory: rss %d, peak %d, %v", rss, peak, err)
	}
	if Used(map[int]time.Duration{}, map[int]time.Duration{42: time.Second}) != time.Second {
		t.Error("a process that started in between must count from zero")
	}
}

// A process's context switches grow with each time one of its threads waits: a thread
// that sleeps a hundred times adds at least a hundred voluntary switches.
func TestContextSwitches(t *testing.T) {
	before, err := ContextSwitches(os.Getpid())
	if err != nil || before <= 0 {
		t.Fatalf("ContextSwitches: %d, %v", before, err)
	}
	for range 100 {
		time.Sleep(time.Millisecond)
	}
	after, err := ContextSwitches(os.Getpid())
	if err != nil || after-before < 100 {
		t.Errorf("after 100 sleeps: %d → %d switches, %v", before, after, err)
	}
	if _, err := ContextSwitches(-1); err == nil {
		t.Error("ContextSwitches of no process: no error")
	}
}

// A CPU meter reports this process's and PostgreSQL's CPU per operation under the
// benchmark's unit; the process's own share grows with work done since the start.
func TestCPUMeterReports(t *testing.T) {
	m := StartCPU()
	// Work until the process's CPU time (counted in ticks) has moved.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if now, _ := CPU(os.Getpid()); now > m.self {
			break
		}
	}
	got := map[string]float64{}
	m.Report(func(v float64, unit string) { got[unit] = v }, 1, "pair")
	if len(got) != 2 || got["go-µs/pair"] <= 0 || got["pg-µs/pair"] < 0 {
		t.Errorf("reported %v, want go-µs/pair > 0 and pg-µs/pair ≥ 0", got)
	}
}
