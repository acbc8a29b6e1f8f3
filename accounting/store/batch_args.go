package store

import (
	"encoding/json"
	"errors"
	"time"
)

// errShortBatch: ledger_batch answered fewer rows than it was given operations.
var errShortBatch = errors.New("the batch answered fewer operations than it was given")

// batchArgs are ledger_batch's parallel arrays, one element per operation; an
// operation's elements of other kinds stay NULL.
type batchArgs struct {
	kind          []int16
	now           []*time.Time
	requestID     []*string
	keyID         []*string
	model         []*string
	amount        []*int64
	pool          []*int16
	ttl           []*time.Duration
	resID         []*string
	actual        []*int64
	inputTokens   []*int64
	outputTokens  []*int64
	units         []*string // JSON text
	upstreamModel []*string
	channel       []*string
	reason        []*string
}

func newBatchArgs(n int) *batchArgs {
	return &batchArgs{
		kind: make([]int16, 0, n), now: make([]*time.Time, 0, n),
		requestID: make([]*string, 0, n), keyID: make([]*string, 0, n), model: make([]*string, 0, n),
		amount: make([]*int64, 0, n), pool: make([]*int16, 0, n), ttl: make([]*time.Duration, 0, n),
		resID: make([]*string, 0, n), actual: make([]*int64, 0, n), inputTokens: make([]*int64, 0, n),
		outputTokens: make([]*int64, 0, n), units: make([]*string, 0, n), upstreamModel: make([]*string, 0, n),
		channel: make([]*string, 0, n), reason: make([]*string, 0, n),
	}
}

// add appends op's arguments.
func (a *batchArgs) add(op *batchOp) error {
	a.kind = append(a.kind, int16(op.kind))
	a.now = append(a.now, op.now)
	var (
		requestID, keyID, model, resID, upstreamModel, channel, reason *string
		amount, actual, inputTokens, outputTokens                      *int64
		pool                                                           *int16
		ttl                                                            *time.Duration
		units                                                          *string
	)
	switch op.kind {
	case opReserve:
		r := op.reserve
		p, amt := int16(r.Pool), int64(r.Amount)
		requestID, keyID, model, amount, pool, ttl = &r.RequestID, &r.KeyID, &r.Model, &amt, &p, &r.TTL
	case opCommit:
		c := op.commit
		act := int64(c.Actual)
		resID, actual, inputTokens, outputTokens = &c.ReservationID, &act, &c.Usage.InputTokens, &c.Usage.OutputTokens
		upstreamModel, channel = &c.UpstreamModel, &c.Channel
		if len(c.Usage.Units) > 0 {
			j, err := json.Marshal(c.Usage.Units)
			if err != nil {
				return err
			}
			js := string(j)
			units = &js
		}
	case opRelease:
		resID, reason = &op.resID, &op.reason
	}
	a.requestID = append(a.requestID, requestID)
	a.keyID = append(a.keyID, keyID)
	a.model = append(a.model, model)
	a.amount = append(a.amount, amount)
	a.pool = append(a.pool, pool)
	a.ttl = append(a.ttl, ttl)
	a.resID = append(a.resID, resID)
	a.actual = append(a.actual, actual)
	a.inputTokens = append(a.inputTokens, inputTokens)
	a.outputTokens = append(a.outputTokens, outputTokens)
	a.units = append(a.units, units)
	a.upstreamModel = append(a.upstreamModel, upstreamModel)
	a.channel = append(a.channel, channel)
	a.reason = append(a.reason, reason)
	return nil
}
