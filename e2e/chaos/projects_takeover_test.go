package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmgw/gateway/e2e/stack"
)

// TestProjectLimitThroughOwnerTakeover: one project's daily limit holds through two
// gateways and two accounting replicas while the ledger's owner is killed (kill -9) in
// the middle of the load. Sixteen clients of the official OpenAI SDK, half on each
// gateway, stream slow answers (so that many holds are in flight) from three keys of the project and one key of its child
// project; the owner is killed once the answers have spent about half the limit, and the
// load goes on through the takeover until the limit refuses requests. Afterwards:
// the project's spend is within its limit and equals the statement's charges and the
// balance moved, every answer is charged exactly once its price, no error is charged,
// nothing is held (and the ledger's invariants hold, ownStack checks them at the end).
func TestProjectLimitThroughOwnerTakeover(t *testing.T) {
	t.Parallel()
	s := ownStack(t, func(c *stack.Config) { c.AccountingReplicas, c.Gateways = 2, 2 })
	if len(s.Gates) != 2 || len(s.Accounting) != 2 {
		t.Fatalf("%d gateways and %d accounting replicas, want 2 and 2", len(s.Gates), len(s.Accounting))
	}
	const limit = 20_000 // micros: about a hundred of these answers
	acc := fmt.Sprint(ctlOn(t, s, "account", "create", "--tier", "enterprise")["id"])
	ctlOn(t, s, "account", "topup", acc, "--amount", "10")
	project := fmt.Sprint(ctlOn(t, s, "project", "create", "--account", acc, "--name", "capped",
		"--daily-limit", strconv.FormatFloat(limit/1e6, 'f', -1, 64))["id"])
	child := fmt.Sprint(ctlOn(t, s, "project", "create", "--account", acc, "--name", "child", "--parent", project)["id"])
	var secrets []string
	for _, p := range []string{project, project, project, child} {
		secrets = append(secrets, fmt.Sprint(ctlOn(t, s, "key", "create", "--account", acc, "--project", p)["key"]))
	}

	pool, err := pgxpool.New(context.Background(), s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	var (
		words      atomic.Int64 // one counter for the account: a charge's input tokens name its call
		mu         sync.Mutex
		answers    []*answer
		gateOf     = map[*answer]int{}
		spent      int64     // the price of the answers so far, as their clients saw it
		takeoverAt time.Time // when a standby owned the ledger
		afterTO    struct{ admitted, refused int }
		stop       atomic.Bool
		wg         sync.WaitGroup
	)
	for w := range 16 {
		gate := w % 2
		c := openai.NewClient(option.WithBaseURL(s.Gates[gate].BaseURL+"/"), option.WithAPIKey(secrets[(w/2)%len(secrets)]),
			option.WithMaxRetries(0), option.WithHTTPClient(&http.Client{Timeout: time.Minute}))
		wg.Go(func() {
			for !stop.Load() {
				a := &answer{words: int(words.Add(1))}
				// Streamed slowly (eight chunks 50 ms apart): many holds are in flight
				// at every moment, at the kill and when the limit is near.
				chat(c, "demo-chat", a, "[[mock:tokens=8]] [[mock:gap=50]]", true, nil)
				mu.Lock()
				answers, gateOf[a] = append(answers, a), gate
				if a.err == nil {
					spent += chatCost(a.in, a.out)
				}
				if !takeoverAt.IsZero() && a.start.After(takeoverAt) {
					switch {
					case a.err == nil:
						afterTO.admitted++
					case limitRefusal(a.err):
						afterTO.refused++
					}
				}
				mu.Unlock()
				time.Sleep(20 * time.Millisecond) // not a flood of a shared machine
			}
		})
	}
	defer func() { stop.Store(true); wg.Wait() }()

	// Kill the owner once about half the limit is spent.
	waitUntil(t, 30*time.Second, "half the limit spent", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return spent >= limit/2
	})
	owner, err := ledgerOwner(pool)
	if err != nil {
		t.Fatal(err)
	}
	var victim stack.Replica
	for _, r := range s.Accounting {
		if r.Addr == owner {
			victim = r
		}
	}
	if victim.Name == "" {
		t.Fatalf("the ledger's owner %q is none of the replicas %v", owner, s.Accounting)
	}
	mu.Lock()
	spentAtKill := spent
	mu.Unlock()
	killedAt := time.Now()
	if err := s.Kill(victim.Name); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 15*time.Second, "a standby owns the ledger", func() bool {
		o, err := ledgerOwner(pool)
		return err == nil && o != "" && o != victim.Addr
	})
	mu.Lock()
	takeoverAt = time.Now()
	mu.Unlock()
	takeover := takeoverAt.Sub(killedAt)
	t.Logf("killed %s (the owner) at %d of %d micros spent; a standby owned the ledger %v later",
		victim.Name, spentAtKill, limit, takeover.Round(time.Millisecond))

	// The load goes on until the limit refuses requests decided by the new owner.
	waitUntil(t, 30*time.Second, "the limit refuses requests after the takeover", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return afterTO.refused >= 16
	})
	stop.Store(true)
	wg.Wait()
	// The killed replica comes back as a standby (gatewayctl dials the first replica).
	if err := s.Restart(context.Background(), victim.Name); err != nil {
		t.Fatalf("restart %s: %v", victim.Name, err)
	}

	var admitted, refused, failed int
	perGate := [2]int{}
	statuses := map[string]int{}
	var duringTakeover int
	for _, a := range answers {
		switch {
		case a.err == nil:
			admitted++
			perGate[gateOf[a]]++
		case limitRefusal(a.err):
			refused++
		default:
			failed++
			var apiErr *openai.Error
			if errors.As(a.err, &apiErr) {
				statuses[fmt.Sprintf("%d %s", apiErr.StatusCode, apiErr.Code)]++
			} else {
				statuses[a.err.Error()]++
			}
			if !a.end.Before(killedAt) && !a.start.After(killedAt.Add(takeover)) {
				duringTakeover++
			}
		}
	}
	t.Logf("%d requests: %d admitted (%d on gateway 1, %d on gateway 2; %d after the takeover), %d refused by the limit (%d after the takeover), %d errors (%d across the takeover): %v",
		len(answers), admitted, perGate[0], perGate[1], afterTO.admitted, refused, afterTO.refused, failed, duringTakeover, statuses)
	if perGate[0] == 0 || perGate[1] == 0 || afterTO.admitted == 0 {
		t.Errorf("the run proves nothing: admitted %v per gateway, %d after the takeover", perGate, afterTO.admitted)
	}

	k := &key{account: acc}
	waitSettled(t, s, k, leaseBound)
	if n := judgeAnswers(t, s, k, answers); n != admitted {
		t.Errorf("%d answers judged, want %d", n, admitted)
	}
	show := ctlOn(t, s, "project", "show", project)
	got := func(m map[string]any, name string) int64 {
		n, ok := m[name+"_micros"].(float64) // exact: far below 2^53
		if !ok {
			t.Fatalf("no %s_micros in %v", name, m)
		}
		return int64(n)
	}
	projectSpent := got(show, "spent_today")
	balance := got(ctlOn(t, s, "account", "show", acc), "balance")
	t.Logf("project spent %d micros of its limit %d; answers priced %d; balance moved %d", projectSpent, limit, spent, 10_000_000-balance)
	if projectSpent > limit {
		t.Errorf("project spent %d micros, above its daily limit %d", projectSpent, limit)
	}
	if projectSpent != spent || 10_000_000-balance != spent {
		t.Errorf("project spent %d, balance moved %d, answers priced %d: want all equal", projectSpent, 10_000_000-balance, spent)
	}
	if r := got(show, "reserved"); r != 0 {
		t.Errorf("project still holds %d micros", r)
	}
}

// limitRefusal says whether err is the spec's refusal of a spend limit.
func limitRefusal(err error) bool {
	var apiErr *openai.Error
	return errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusTooManyRequests && apiErr.Code == "key_limit_reached"
}

// ledgerOwner is the address of the replica holding a live lease on the ledger ("" when
// none does).
func ledgerOwner(pool *pgxpool.Pool) (string, error) {
	var addr string
	var live bool
	err := pool.QueryRow(context.Background(), `SELECT addr, lease_until > clock_timestamp() FROM ledger_owner WHERE shard = 0`).Scan(&addr, &live)
	if err != nil || !live {
		return "", err
	}
	return addr, nil
}

// waitUntil polls cond every 10 ms until it holds, failing the test after within.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
