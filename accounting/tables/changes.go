package tables

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/accounting/ledger"
)

// changesAppName names the Changes connection in pg_stat_activity.
const changesAppName = "ledger-changes"

// Changes delivers the key and account changes that any process commits on the
// database (NOTIFY on ChangesChannel, sent by triggers in the same transaction as the
// change) until ctx ends, then closes the channel. It holds one dedicated connection
// outside the pool. The first value is a ChangeReset, sent once LISTEN is in place; after
// the connection is lost it reconnects with backoff and sends ChangeReset again, since
// changes may have been missed meanwhile. The consumer must keep reading: the feed
// waits for it.
func (s *Store) Changes(ctx context.Context) (<-chan ledger.Change, error) {
	conn, err := s.listen(ctx)
	if err != nil {
		return nil, err
	}
	ch := make(chan ledger.Change, 64)
	go s.feedChanges(ctx, conn, ch)
	return ch, nil
}

func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = changesAppName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, dbError("listen for changes", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+ChangesChannel); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, dbError("listen for changes", err)
	}
	return conn, nil
}

func (s *Store) feedChanges(ctx context.Context, conn *pgx.Conn, ch chan<- ledger.Change) {
	defer close(ch)
	send := func(c ledger.Change) bool {
		select {
		case ch <- c:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		if !send(ledger.Change{Kind: ledger.ChangeReset}) {
			conn.Close(context.WithoutCancel(ctx))
			return
		}
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				break
			}
			if c, ok := parseChange(n.Payload); ok && !send(c) {
				break
			}
		}
		conn.Close(context.WithoutCancel(ctx))
		if conn = s.reconnect(ctx); conn == nil {
			return
		}
	}
}

// reconnect opens a new listening connection, backing off between attempts; nil once
// ctx has ended.
func (s *Store) reconnect(ctx context.Context) *pgx.Conn {
	wait := s.opts.ReconnectMin
	for {
		if ctx.Err() != nil {
			return nil
		}
		if conn, err := s.listen(ctx); err == nil {
			return conn
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		wait = min(2*wait, s.opts.ReconnectMax)
	}
}

// parseChange reads a notification payload: "k:<key id>" or "a:<account id>".
func parseChange(payload string) (ledger.Change, bool) {
	kind, id, ok := strings.Cut(payload, ":")
	if !ok || id == "" {
		return ledger.Change{}, false
	}
	switch kind {
	case "k":
		return ledger.Change{Kind: ledger.ChangeKey, KeyID: id}, true
	case "a":
		return ledger.Change{Kind: ledger.ChangeAccount, AccountID: id}, true
	}
	return ledger.Change{}, false
}
