package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/server/servertest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func recvKind(t *testing.T, st grpc.ServerStreamingClient[accountingv1.WatchChangesResponse]) *accountingv1.WatchChangesResponse {
	t.Helper()
	m, err := st.Recv()
	if err != nil {
		t.Fatalf("recv: %v", err)
	}
	return m
}

// syncStreams reads each of streams past a change it makes the store emit, failing t on
// anything but a RESET before it, so that what the streams get next is the live feed
// only. The store's feed opens with a RESET of its own, which the hub publishes when it
// has read it: possibly after a stream's first RESET, even once mem.Feeds() counts the
// feed. That RESET is the contract's (the feed was not yet running when the stream
// began, so changes may have been missed), but no test can tell when it has gone out.
func syncStreams(t *testing.T, mem *servertest.Memory, streams ...grpc.ServerStreamingClient[accountingv1.WatchChangesResponse]) {
	t.Helper()
	mem.Emit(ledger.Change{Kind: ledger.ChangeAccount, AccountID: "sync"})
	for _, st := range streams {
		for {
			m := recvKind(t, st)
			if m.GetAccountId() == "sync" {
				break
			}
			if m.GetKind() != accountingv1.ChangeKind_CHANGE_KIND_RESET {
				t.Fatalf("before the sync change got %.40v", m)
			}
		}
	}
}

func TestWatchChangesResetFirstThenInOrder(t *testing.T) {
	mem := servertest.NewMemory()
	f := servertest.Start(t, mem, servertest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var streams []grpc.ServerStreamingClient[accountingv1.WatchChangesResponse]
	for _, tok := range []string{servertest.ServiceToken, servertest.AdminToken} {
		st, err := f.Ledger(t, tok).WatchChanges(ctx, &accountingv1.WatchChangesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if m := recvKind(t, st); m.GetKind() != accountingv1.ChangeKind_CHANGE_KIND_RESET {
			t.Fatalf("first message = %v, want RESET", m)
		}
		streams = append(streams, st)
	}
	waitFor(t, "two subscribers and the hub's feed", func() bool { return f.Hub.Subscribers() == 2 && mem.Feeds() == 1 })
	syncStreams(t, mem, streams...)

	const n = 200
	go func() {
		for i := range n {
			if i%2 == 0 {
				mem.Emit(ledger.Change{Kind: ledger.ChangeKey, KeyID: fmt.Sprintf("key_%d", i), AccountID: "acct_1"})
			} else {
				mem.Emit(ledger.Change{Kind: ledger.ChangeAccount, AccountID: fmt.Sprintf("acct_%d", i)})
			}
		}
	}()
	for si, st := range streams {
		for i := range n {
			m := recvKind(t, st)
			if i%2 == 0 {
				if m.GetKind() != accountingv1.ChangeKind_CHANGE_KIND_KEY || m.GetKeyId() != fmt.Sprintf("key_%d", i) || m.GetAccountId() != "acct_1" {
					t.Fatalf("stream %d message %d = %v", si, i, m)
				}
			} else if m.GetKind() != accountingv1.ChangeKind_CHANGE_KIND_ACCOUNT || m.GetAccountId() != fmt.Sprintf("acct_%d", i) {
				t.Fatalf("stream %d message %d = %v", si, i, m)
			}
		}
	}
	cancel()
	waitFor(t, "subscribers to leave", func() bool { return f.Hub.Subscribers() == 0 })
}

// TestWatchChangesSlowSubscriberDoesNotBlockOthers keeps one stream unread while many
// large changes flow: the other stream gets every change in order, and the unread one,
// once it reads again, is told to RESET and then follows the live feed.
func TestWatchChangesSlowSubscriberDoesNotBlockOthers(t *testing.T) {
	mem := servertest.NewMemory()
	f := servertest.Start(t, mem, servertest.Options{SubscriberBuffer: 16})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	fast, err := f.Ledger(t, servertest.ServiceToken).WatchChanges(ctx, &accountingv1.WatchChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The slow stream's connection has a fixed 64 KiB window, so the server's sends to
	// it stall after a few dozen of these large messages.
	slowConn, err := client.Dial(ctx, f.Addr, servertest.ServiceToken,
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer slowConn.Close()
	slow, err := accountingv1.NewLedgerServiceClient(slowConn).WatchChanges(ctx, &accountingv1.WatchChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	recvKind(t, fast)
	if m := recvKind(t, slow); m.GetKind() != accountingv1.ChangeKind_CHANGE_KIND_RESET {
		t.Fatalf("first = %v", m)
	}
	waitFor(t, "two subscribers", func() bool { return f.Hub.Subscribers() == 2 && mem.Feeds() == 1 })
	syncStreams(t, mem, fast, slow)

	pad := strings.Repeat("x", 2000)
	const n = 400 // ≈ 800 KB: far beyond the slow stream's window, write quota and buffer
	for i := range n {
		id := fmt.Sprintf("key_%04d_%s", i, pad)
		mem.Emit(ledger.Change{Kind: ledger.ChangeKey, KeyID: id})
		// Lock-step with the fast reader, so only the slow one falls behind.
		m := recvKind(t, fast)
		if m.GetKind() != accountingv1.ChangeKind_CHANGE_KIND_KEY || m.GetKeyId() != id {
			t.Fatalf("fast stream message %d = %.40v", i, m)
		}
	}
	mem.Emit(ledger.Change{Kind: ledger.ChangeAccount, AccountID: "marker"})
	if m := recvKind(t, fast); m.GetAccountId() != "marker" {
		t.Fatalf("fast stream missed the marker: %.40v", m)
	}

	// The slow stream: a prefix of the changes in order, then a RESET standing for
	// everything it missed (the first marker included).
	next := 0
	for {
		m := recvKind(t, slow)
		if m.GetKind() == accountingv1.ChangeKind_CHANGE_KIND_RESET {
			break
		}
		if m.GetAccountId() == "marker" {
			t.Fatal("slow stream got the marker without a RESET: it never fell behind")
		}
		if want := fmt.Sprintf("key_%04d_", next); !strings.HasPrefix(m.GetKeyId(), want) {
			t.Fatalf("slow stream out of order: got %.20s, want %s", m.GetKeyId(), want)
		}
		next++
	}
	if next >= n {
		t.Fatalf("slow stream got all %d changes before its RESET", n)
	}
	// Caught up, it follows the live feed again. On a loaded machine the slow stream may
	// still see changes published while it was resuming after its RESET, and lag again
	// (another RESET): a watcher that reloads on a RESET only invalidates once more, so
	// both are harmless; what matters is that the new change comes.
	mem.Emit(ledger.Change{Kind: ledger.ChangeAccount, AccountID: "after-reset"})
	if m := recvKind(t, fast); m.GetAccountId() != "after-reset" {
		t.Fatalf("fast stream after the RESET got %.40v, want the new change", m)
	}
	for {
		m := recvKind(t, slow)
		if m.GetAccountId() == "after-reset" {
			break
		}
		switch {
		case m.GetKind() == accountingv1.ChangeKind_CHANGE_KIND_KEY:
		case m.GetAccountId() == "marker":
			// Its RESET came before the marker was published (the stream's server side
			// drained its lag while the client's transport still took data in), so the
			// marker follows it as a change of its own: also harmless.
		case m.GetKind() == accountingv1.ChangeKind_CHANGE_KIND_RESET:
			// It lagged again, and this RESET may stand for the new change itself: a
			// watcher reloads on it. Publish the change once more: a stream that reads
			// as fast as changes come gets it.
			mem.Emit(ledger.Change{Kind: ledger.ChangeAccount, AccountID: "after-reset"})
		default:
			t.Fatalf("slow stream after the RESET got %.40v, want the new change", m)
		}
	}
}
