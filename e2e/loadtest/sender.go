package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"syscall"
	"time"
)

// A Sender sends one Target's requests, open loop, over HTTP/1.1 connections it keeps
// from run to run. The generator shares the machine with what it measures, so it spends
// as little as it can per request: every request's bytes are made before a run's clock
// starts, and each connection belongs to one goroutine that writes a request and reads
// its answer (net/http's ReadResponse), kept for the next request. (net/http's Transport
// hands each request between three goroutines, and a goroutine per request grew its
// stack from scratch: ≈0.2 ms of CPU per request at 1,000 requests/s, as much as
// extproc's.) A request that finds no idle connection gets a new one, so a slow answer
// never holds back the requests scheduled after it.
type Sender struct {
	t    Target
	addr string
	jobs chan job

	mu     sync.Mutex
	conns  map[*senderConn]struct{}
	closed bool
}

// job is one request of a run: its bytes, when it was due, and where its result goes.
type job struct {
	ctx  context.Context
	wire []byte
	due  time.Time
	done func(status int, latency time.Duration)
}

// NewSender returns a Sender of t's requests; t.URL must be an http URL. Close it when
// done: it ends the goroutines and closes the connections.
func NewSender(t Target) (*Sender, error) {
	u, err := url.Parse(t.URL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" {
		return nil, errors.New("loadtest: only http URLs are sent")
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	return &Sender{t: t, addr: addr, jobs: make(chan job), conns: map[*senderConn]struct{}{}}, nil
}

// Run sends rate requests per second for d, open loop, and waits for every answer. Each
// latency is measured from the request's due time to the end of its answer's body.
func (s *Sender) Run(ctx context.Context, rate int, d time.Duration) Result {
	res := Result{Statuses: map[int]int{}}
	period := time.Second / time.Duration(rate)
	n := int(d / period)
	wires := make([][]byte, n)
	for i := range wires {
		if i%1024 == 0 && ctx.Err() != nil {
			return res // cut before it started: nothing sent
		}
		wires[i] = s.t.wire(i)
	}
	lat := make([]time.Duration, n)
	status := make([]int, n)
	var wg sync.WaitGroup
	// A run cut short ends its requests in flight too: their connections are closed.
	stop := context.AfterFunc(ctx, s.closeConns)
	defer stop()
	timer := time.NewTimer(0)
	<-timer.C
	start := time.Now()
	for i := 0; i < n; i++ {
		due := start.Add(time.Duration(i) * period)
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
			case <-timer.C:
			}
		}
		if ctx.Err() != nil {
			n = i
			break
		}
		wg.Add(1)
		j := job{ctx: ctx, wire: wires[i], due: due, done: func(st int, l time.Duration) {
			status[i], lat[i] = st, l
			wg.Done()
		}}
		select {
		case s.jobs <- j: // an idle connection's goroutine takes it
		default:
			go s.work(j)
		}
	}
	wg.Wait()
	res.Sent = n
	res.Latencies = lat[:n]
	for _, st := range status[:n] {
		res.Statuses[st]++
		if st == http.StatusOK {
			res.OK++
		}
	}
	slices.Sort(res.Latencies)
	return res
}

// Close ends the Sender's goroutines and closes its connections; call it once no Run
// is running.
func (s *Sender) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.jobs)
	}
	s.mu.Unlock()
	s.closeConns()
}

func (s *Sender) closeConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.Close()
	}
}

// requestTimeout bounds one request on its connection (a stalled answer ends as a
// transport error, status 0).
const requestTimeout = time.Minute

// work sends j and then every job it takes while idle, on one connection it keeps.
func (s *Sender) work(j job) {
	var c *senderConn
	defer func() { s.drop(c) }()
	for {
		var st int
		c, st = s.send(c, j)
		j.done(st, time.Since(j.due))
		var ok bool
		if j, ok = <-s.jobs; !ok {
			return
		}
	}
}

// send writes j on c (a new connection when c is nil) and reads its answer; it returns
// the connection to keep (nil: none) and the answer's status (0: no answer). A kept
// connection the server had closed meanwhile (nothing of an answer read) is replaced and
// the request written once more, as net/http's Transport does.
func (s *Sender) send(c *senderConn, j job) (*senderConn, int) {
	for {
		fresh := c == nil
		if fresh {
			var err error
			if c, err = s.dial(j.ctx); err != nil {
				return nil, 0
			}
		}
		resp, err := c.roundTrip(j.wire)
		if err != nil {
			s.drop(c)
			if !fresh && c.closedBeforeAnswer(err) {
				c = nil
				continue
			}
			return nil, 0
		}
		_, err = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			s.drop(c)
			return nil, 0
		}
		if resp.Close { // the server ends the connection after this answer
			s.drop(c)
			c = nil
		}
		return c, resp.StatusCode
	}
}

// closedBeforeAnswer reports whether err, from roundTrip, means the connection was found
// closed: the write failed, or the connection ended before any byte of an answer.
func (c *senderConn) closedBeforeAnswer(err error) bool {
	var w writeError
	if errors.As(err, &w) {
		return true
	}
	return c.read == 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET))
}

func (s *Sender) dial(ctx context.Context) (*senderConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return nil, err
	}
	c := &senderConn{Conn: nc}
	c.br = bufio.NewReader(readCounter{c})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = nc.Close()
		return nil, net.ErrClosed
	}
	s.conns[c] = struct{}{}
	return c, nil
}

func (s *Sender) drop(c *senderConn) {
	if c == nil {
		return
	}
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	_ = c.Close()
}

// senderConn is one kept connection, its reader, and the bytes read since the current
// request was written.
type senderConn struct {
	net.Conn
	br   *bufio.Reader
	read int
}

type readCounter struct{ c *senderConn }

func (r readCounter) Read(p []byte) (int, error) {
	n, err := r.c.Conn.Read(p)
	r.c.read += n
	return n, err
}

type writeError struct{ error }

func (w writeError) Unwrap() error { return w.error }

func (c *senderConn) roundTrip(wire []byte) (*http.Response, error) {
	if err := c.SetDeadline(time.Now().Add(requestTimeout)); err != nil {
		return nil, writeError{err}
	}
	if _, err := c.Write(wire); err != nil {
		return nil, writeError{err}
	}
	c.read = 0
	return http.ReadResponse(c.br, nil)
}

// wire is request i as it goes on a connection (net/http's Request.Write: the request
// line, Host, User-Agent, Content-Length, the headers, the body).
func (t Target) wire(i int) []byte {
	req, err := http.NewRequest(http.MethodPost, t.URL, bytes.NewReader(t.Body(i)))
	if err != nil {
		panic(err) // the URL was parsed by NewSender
	}
	for k, vs := range t.Header {
		req.Header[k] = vs
	}
	if t.Header2 != nil {
		for k, vs := range t.Header2(i) {
			req.Header[k] = vs
		}
	}
	var b bytes.Buffer
	if err := req.Write(&b); err != nil {
		panic(err) // writing to memory fails only on a bad request, made above
	}
	return b.Bytes()
}
