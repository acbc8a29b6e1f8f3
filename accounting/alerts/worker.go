package alerts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	urlguard "github.com/llmgw/gateway/extproc/webhook"
)

// Delivery timing: an attempt has 5 s; a failed one is tried again after each of
// retryDelays in turn, then hourly, until giveUpAfter past its first attempt.
const (
	AttemptTimeout = 5 * time.Second
	giveUpAfter    = 24 * time.Hour
	hourly         = time.Hour
)

var retryDelays = [...]time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute}

// NextAttempt is when a delivery whose attempts-th attempt (1 for the first) failed at
// now is tried again, or false when it is given up.
func NextAttempt(attempts int, first, now time.Time) (time.Time, bool) {
	delay := hourly
	if attempts >= 1 && attempts <= len(retryDelays) {
		delay = retryDelays[attempts-1]
	}
	next := now.Add(delay)
	if next.Sub(first) > giveUpAfter {
		return time.Time{}, false
	}
	return next, true
}

// Observer is told what the worker does (the metrics package implements it).
type Observer interface {
	Generated(eventType string)
	Attempted(ok bool)
	Undelivered(oldest time.Duration) // 0: nothing waits
}

// Worker delivers the outbox (webhook_deliveries) while Owning says this process owns
// the ledger: each due delivery is claimed (its next attempt moved past the attempt's
// time, so a second worker skips it), POSTed with a fresh timestamp and signature, and
// its attempt recorded. It runs beside the decide loop and shares nothing with it:
// admission never waits for a webhook.
type Worker struct {
	Pool     *pgxpool.Pool
	Keys     *Keys
	Owning   func() bool
	Log      *zap.Logger
	Observer Observer // nil: none
	Now      func() time.Time
	// Poll is how often the outbox is read; 250 ms when zero.
	Poll time.Duration
	// Parallel bounds the attempts in flight; 16 when zero.
	Parallel int

	public, private *http.Client
	lastN           int64 // the last webhook_events.n counted as generated
}

// A claim moves a delivery's next attempt claimLease ahead: no other worker takes it
// before then. The attempt's deadline is AttemptTimeout from the claim (not from when
// the request starts), so a live worker has its answer, or has given up, by then;
// claimMargin covers the clocks of two replicas disagreeing a little. A worker that
// died mid-attempt (kill -9) thus holds its delivery up for claimLease at most, and
// the record of an attempt is fenced by its claim (record), so a worker that records
// after its claim lapsed cannot undo what the worker that took over does.
const (
	claimMargin = 2 * time.Second
	claimLease  = AttemptTimeout + claimMargin
)

func (w *Worker) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// refusePrivate is a dialer's Control that refuses every non-public address: a public
// name that resolves to an internal address at delivery time is not called.
func refusePrivate(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !urlguard.PublicAddr(ap.Addr()) {
		return fmt.Errorf("alerts: %s is not a public address", address)
	}
	return nil
}

func newClient(control func(string, string, syscall.RawConn) error) *http.Client {
	d := &net.Dialer{Timeout: AttemptTimeout, Control: control}
	return &http.Client{
		Timeout:   AttemptTimeout,
		Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute},
		// A redirect is an answer that is not 2xx: never followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Run delivers until ctx ends, then waits for the attempts in flight.
func (w *Worker) Run(ctx context.Context) {
	if w.Log == nil {
		w.Log = zap.NewNop()
	}
	poll, parallel := w.Poll, w.Parallel
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	if parallel <= 0 {
		parallel = 16
	}
	w.public, w.private = newClient(refusePrivate), newClient(nil)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	defer wg.Wait()
	started := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(poll):
		}
		if w.Owning != nil && !w.Owning() {
			started = false
			continue
		}
		if !started {
			if err := w.start(ctx); err != nil {
				w.Log.Warn("webhook worker start", zap.Error(err))
				continue
			}
			started = true
		}
		w.observe(ctx)
		ds, err := w.claim(ctx, cap(sem)-len(sem))
		if err != nil {
			if ctx.Err() == nil {
				w.Log.Warn("reading the webhook outbox", zap.Error(err))
			}
			continue
		}
		for _, d := range ds {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				w.deliver(ctx, d)
			}()
		}
	}
}

// start reseals secrets of an older key and sets the generated-events cursor.
func (w *Worker) start(ctx context.Context) error {
	if n, err := (&Webhooks{Pool: w.Pool, Keys: w.Keys}).Reseal(ctx); err != nil {
		return err
	} else if n > 0 {
		w.Log.Info("webhook secrets sealed with the new key", zap.Int("count", n))
	}
	return w.Pool.QueryRow(ctx, `SELECT coalesce(max(n), 0) FROM webhook_events`).Scan(&w.lastN)
}

// observe counts the events the outbox received since the last pass and the age of
// the oldest undelivered one.
func (w *Worker) observe(ctx context.Context) {
	if w.Observer == nil {
		return
	}
	rows, err := w.Pool.Query(ctx, `SELECT n, type FROM webhook_events WHERE n > $1 ORDER BY n LIMIT 10000`, w.lastN)
	if err == nil {
		for rows.Next() {
			var typ string
			if rows.Scan(&w.lastN, &typ) == nil {
				w.Observer.Generated(typ)
			}
		}
		rows.Close()
	}
	var oldest *time.Time
	if err := w.Pool.QueryRow(ctx, `SELECT min(created_at) FROM webhook_deliveries WHERE next_attempt_at IS NOT NULL`).Scan(&oldest); err == nil {
		age := time.Duration(0)
		if oldest != nil {
			age = max(w.now().Sub(*oldest), 0)
		}
		w.Observer.Undelivered(age)
	}
}

// due is one claimed delivery with what sending it needs.
type due struct {
	webhookID, eventID string
	attempts           int
	first              *time.Time
	url                string
	sealed             []byte
	allowPrivate       bool
	deleted            bool
	body               []byte
	// claim is the next_attempt_at the claim wrote (the claim's token), deadline the
	// end of the attempt it allows.
	claim, deadline time.Time
}

// claim takes up to limit due deliveries, moving their next attempt claimLease ahead.
func (w *Worker) claim(ctx context.Context, limit int) ([]due, error) {
	if limit <= 0 {
		return nil, nil
	}
	// Microseconds: the database's precision, so that record finds the claim it wrote.
	now := w.now().Truncate(time.Microsecond)
	lease := now.Add(claimLease)
	// On the real clock (Now may be a test's), taken before the claim is written.
	deadline := time.Now().Add(AttemptTimeout)
	rows, err := w.Pool.Query(ctx, `
		WITH c AS (
			UPDATE webhook_deliveries d SET next_attempt_at = $2
			FROM (SELECT webhook_id, event_id FROM webhook_deliveries
				WHERE next_attempt_at <= $1 ORDER BY next_attempt_at LIMIT $3 FOR UPDATE SKIP LOCKED) q
			WHERE d.webhook_id = q.webhook_id AND d.event_id = q.event_id
			RETURNING d.webhook_id, d.event_id, d.attempts, d.first_attempt_at)
		SELECT c.webhook_id, c.event_id, c.attempts, c.first_attempt_at, w.url, w.secret, w.allow_private,
			w.deleted_at IS NOT NULL, e.body
		FROM c JOIN webhooks w ON w.id = c.webhook_id JOIN webhook_events e ON e.id = c.event_id`,
		now, lease, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []due
	for rows.Next() {
		var d due
		var id uuid.UUID
		var body string
		if err := rows.Scan(&id, &d.eventID, &d.attempts, &d.first, &d.url, &d.sealed, &d.allowPrivate, &d.deleted, &body); err != nil {
			return nil, err
		}
		d.webhookID, d.body = id.String(), []byte(body)
		d.claim, d.deadline = lease, deadline
		out = append(out, d)
	}
	return out, rows.Err()
}

// deliver makes one attempt and records it.
func (w *Worker) deliver(ctx context.Context, d due) {
	if d.deleted {
		w.record(ctx, d, nil, "webhook deleted", false, true)
		return
	}
	status, errText, tried := w.send(ctx, d)
	if !tried { // the claim's time ran out before the request left: no attempt
		w.release(ctx, d)
		return
	}
	ok := status >= 200 && status < 300
	if w.Observer != nil {
		w.Observer.Attempted(ok)
	}
	w.record(ctx, d, &status, errText, ok, false)
}

// send POSTs d's body before d's deadline; the status is 0 when no HTTP answer came.
// tried is false when nothing was sent because the deadline had passed (or the pass
// ended) before the request could leave.
func (w *Worker) send(ctx context.Context, d due) (status int, errText string, tried bool) {
	secret, err := w.Keys.Open(d.sealed)
	if err != nil {
		return 0, err.Error(), true
	}
	ts := w.now().Unix()
	sig, err := Sign(secret, d.eventID, ts, d.body)
	if err != nil {
		return 0, err.Error(), true
	}
	ctx, cancel := context.WithDeadline(ctx, d.deadline)
	defer cancel()
	if ctx.Err() != nil {
		return 0, "", false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytesReader(d.body))
	if err != nil {
		return 0, err.Error(), true
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("user-agent", "llmgw-webhooks/1")
	req.Header.Set("webhook-id", d.eventID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", sig)
	client := w.public
	if d.allowPrivate {
		client = w.private
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, trimError(err), true
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, "HTTP " + resp.Status, true
	}
	return resp.StatusCode, "", true
}

func trimError(err error) string {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && errors.Is(err, context.DeadlineExceeded) {
		return "no answer within " + AttemptTimeout.String()
	}
	s := err.Error()
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}

// record stores an attempt (status nil: none was made) and schedules the next.
func (w *Worker) record(ctx context.Context, d due, status *int, errText string, ok, drop bool) {
	now := w.now()
	var first *time.Time // set at the first attempt made
	if d.first != nil {
		first = d.first
	} else if !drop {
		first = &now
	}
	attempts := d.attempts
	var next, delivered *time.Time
	switch {
	case ok:
		delivered = &now
	case drop:
	default:
		attempts++
		if t, more := NextAttempt(attempts, *first, now); more {
			next = &t
		} else {
			w.Log.Warn("webhook delivery given up", zap.String("webhook", d.webhookID), zap.String("event", d.eventID),
				zap.Int("attempts", attempts))
		}
	}
	if ok {
		attempts++
	}
	var st *int32
	if status != nil {
		s := int32(*status)
		st = &s
	}
	// The context of the pass may have ended (the owner stops): the attempt is still
	// recorded, or the delivery is sent again after its lease. Only while the claim is
	// this worker's: once it lapsed another worker may have taken the delivery over,
	// and its claim and record win (the receiver may get the event twice, with the same
	// webhook-id: at least once).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	tag, err := w.Pool.Exec(ctx, `
		UPDATE webhook_deliveries SET attempts = $3, last_status = coalesce($4, last_status), last_error = $5,
			first_attempt_at = coalesce(first_attempt_at, $6), next_attempt_at = $7, delivered_at = $8
		WHERE webhook_id = $1 AND event_id = $2 AND next_attempt_at = $9`,
		d.webhookID, d.eventID, attempts, st, errText, first, next, delivered, d.claim)
	if err != nil {
		w.Log.Warn("recording a webhook attempt", zap.Error(err))
	} else if tag.RowsAffected() == 0 {
		w.Log.Info("webhook attempt not recorded: its claim lapsed or the webhook was deleted",
			zap.String("webhook", d.webhookID), zap.String("event", d.eventID))
	}
}

// release gives a claimed delivery back, due now, when no attempt was made.
func (w *Worker) release(ctx context.Context, d due) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := w.Pool.Exec(ctx, `UPDATE webhook_deliveries SET next_attempt_at = $3
		WHERE webhook_id = $1 AND event_id = $2 AND next_attempt_at = $4`,
		d.webhookID, d.eventID, w.now(), d.claim); err != nil {
		w.Log.Warn("releasing a webhook delivery", zap.Error(err))
	}
}
