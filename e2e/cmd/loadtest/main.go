// Command loadtest measures what the gateway adds to a request: it starts a private
// stack (like the e2e suite), creates paying keys, and at each rate sends the same
// non-streamed chat request open loop through the gateway and then straight to the mock
// provider, back to back. It prints latency percentiles, the latency the gateway adds,
// the success rate, the CPU time and the context switches each part spent per request
// (from /proc) and each part's memory, as docs/performance.md's load table.
//
//	make loadtest                                  # docs/performance.md's rates
//	go run ./e2e/cmd/loadtest -rates 100,1000 -duration 20s
//	go run ./e2e/cmd/loadtest -runs 3 -baseline ../other-checkout
//	go run ./e2e/cmd/loadtest -rates 200,500 -hanging-webhook
//
// With -runs N every rate is measured N times, each time on a fresh stack, and a summary
// gives each figure's median (and the ranges of the added latency and the CPU). With
// -baseline DIR the code in DIR (another checkout) is measured too, alternated with this
// one run by run ("before" and "after"), so that both see the same machine. With
// -hanging-webhook every load account has a webhook on a receiver that never answers
// and thresholds the run crosses (alerts.go), so that the owner's delivery worker keeps
// attempts hanging for their 5 s all along: admission should not notice.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/e2e/internal/harness"
	"github.com/llmgw/gateway/e2e/loadtest"
	"github.com/llmgw/gateway/e2e/stack"
	"github.com/llmgw/gateway/internal/goenv"
)

func main() {
	rates := flag.String("rates", "100,250,500,1000", "arrival rates to run, requests per second")
	duration := flag.Duration("duration", 10*time.Second, "how long each rate runs, per target")
	keys := flag.Int("keys", 40, "paying keys (one enterprise account each) the requests rotate over")
	root := flag.String("root", ".", "the repository root")
	runs := flag.Int("runs", 1, "how many times each rate runs, each time on a fresh stack; more than one adds a summary of medians")
	baseline := flag.String("baseline", "", "another checkout's root, measured alternately with -root (before / after)")
	promptBytes := flag.Int("prompt", 0, "bytes of English prose before the user message's one line (what the tokenizer counts grows with it)")
	systemBytes := flag.Int("system", 0, "bytes of English prose in a system message, the same in every request (as an application's system prompt)")
	profile := flag.String("profile", "", "write CPU and allocation profiles (NAME.pprof, NAME.allocs.pprof) of extproc, accounting (its first replica) and the Envoy test front, taken during the last rate's gateway run, into this directory")
	hanging := flag.Bool("hanging-webhook", false, "subscribe every load account to a webhook receiver that accepts connections and never answers, and set a low balance and a key daily limit the run crosses (balance.low, budget.threshold 50 and 80 %), so that webhook attempts time out all along the run; a line after each row says how many alerts and attempts there were")
	accounting := flag.Int("accounting", 1, "accounting replicas on the one database, extproc's calls spread over them (round robin), as the manifests deploy two; the accounting column sums their CPU and context switches and shows the largest peak RSS")
	flag.Parse()
	if *accounting < 1 {
		fmt.Fprintln(os.Stderr, "loadtest: -accounting must be at least 1")
		os.Exit(2)
	}
	_ = os.Setenv("ACCOUNTING_REPLICAS", strconv.Itoa(*accounting)) // the stack reads it
	// The generator runs with the Go runtime settings each part of the stack gets
	// (internal/goenv; the runtime reads them only at start, so the tool starts itself
	// again with them), unless the caller's environment chose them, which then reach the
	// parts too. One P: at 100 rps the generator's CPU per request 0.38 → 0.31 ms and its
	// context switches 23.7 → 19.2 (two alternated runs); at 1,000 rps one P is enough,
	// 0.12 → 0.11 ms.
	if !goenv.Applied(os.Environ()) {
		reexec()
	}
	if *profile != "" {
		// The parts serve their runtime profiles only when asked (they inherit this).
		_ = os.Setenv("EXTPROC_PPROF", "1")
		_ = os.Setenv("ACCOUNTING_PPROF", "1")
		_ = os.Setenv("FRONT_PPROF", "1") // on the admin address; real Envoy ignores it
	}
	if err := run(*root, *baseline, *rates, *duration, *keys, *runs, prompt{*promptBytes, *systemBytes}, *profile, *hanging); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

// prompt is the size of the prose each request carries: before the user message's line,
// and in a system message.
type prompt struct{ user, system int }

func run(root, baseline, rateList string, d time.Duration, nkeys, runs int, size prompt, profileDir string, hanging bool) error {
	var rates []int
	for _, r := range strings.Split(rateList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(r))
		if err != nil || n <= 0 {
			return fmt.Errorf("bad rate %q", r)
		}
		rates = append(rates, n)
	}
	if runs < 1 {
		return fmt.Errorf("bad -runs %d", runs)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	type code struct{ label, root string }
	codes := []code{{"", root}}
	if baseline != "" {
		codes = []code{{"before", baseline}, {"after", root}}
	}
	all := map[code]map[int][]row{}
	var parts []string // the parts' names, once a stack has started
	for i := range runs {
		for _, c := range codes {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			prof := ""
			if i == runs-1 && c.root == root {
				prof = profileDir
			}
			rows, err := measure(ctx, c.root, c.label, rates, d, nkeys, size, prof, hanging, func(names []string, front string, replicas int) {
				if parts == nil {
					parts = names
					what := "a one-line prompt"
					if size.user > 0 {
						what = fmt.Sprintf("a prompt of %d bytes", len(filler(size.user))+len("load test 0 [[mock:tokens=8]]"))
					}
					if size.system > 0 {
						what += fmt.Sprintf(" after the same system prompt of %d bytes", len(filler(size.system)))
					}
					if replicas > 1 {
						front += fmt.Sprintf("; %d accounting replicas", replicas)
					}
					if hanging {
						front += "; every account's webhook on a receiver that never answers"
					}
					fmt.Printf("Front: %s; %d keys; %s per rate and target; non-streamed demo-chat, %s, 8 output tokens.\n\n", front, nkeys, d, what)
					fmt.Println(header(parts, baseline != ""))
				}
			})
			if err != nil {
				return err
			}
			if all[c] == nil {
				all[c] = map[int][]row{}
			}
			for _, r := range rows {
				all[c][r.rate] = append(all[c][r.rate], r)
			}
		}
	}
	if runs > 1 || baseline != "" {
		fmt.Printf("\nMedians of %d runs:\n\n%s\n", runs, header(parts, baseline != ""))
		var spans []string
		for _, rate := range rates {
			for _, c := range codes {
				if rs := all[c][rate]; len(rs) > 0 {
					fmt.Println(median(rs))
					spans = append(spans, ranges(rs))
				}
			}
		}
		fmt.Println("\nRanges:")
		for _, sp := range spans {
			fmt.Println("- " + sp)
		}
	}
	return nil
}

// measure starts a private stack of the code at root, creates the paying keys and runs
// every rate through the gateway and then straight to the mock, printing each rate's row
// as it comes (labelled code when not empty) after head (called once the stack is up,
// with the parts' names, the front's and how many accounting replicas run). With profileDir, the last rate's gateway run
// is profiled. With hanging, the accounts' alerts go to a receiver that never answers.
func measure(ctx context.Context, root, code string, rates []int, d time.Duration, nkeys int, size prompt, profileDir string, hanging bool,
	head func(parts []string, front string, replicas int)) ([]row, error) {
	fmt.Fprintln(os.Stderr, "loadtest: building and starting a private stack…")
	env, err := harness.Start(root)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	s := env.Stack
	accts, err := makeKeys(s, nkeys)
	if err != nil {
		return nil, err
	}
	secrets := make([]string, len(accts))
	for i, a := range accts {
		secrets[i] = a.secret
	}
	// The stack's database was just created (its files copied, its schema and keys
	// written): the kernel writes those dirty pages back once they are 30 s old
	// (vm.dirty_expire_centisecs), in the middle of the second rate's run, and PostgreSQL's
	// WAL flushes wait behind that writeback (COMMITs of 47–64 ms in its log, ≈30 ms of
	// added p99 at 250 rps). A deployment does not create its database just before its
	// traffic: write them back now, before anything is measured.
	syscall.Sync()
	// No accept-encoding on either target: the gateway asks its upstream for identity
	// whatever the client allows, so a direct request that allowed gzip would make the
	// baseline pay the mock's compression and the client's decompression, work the
	// gateway's path never does (≈0.4 ms of the mock's CPU per request at 1,000 rps), and
	// understate the added latency.
	prose := filler(size.user)
	var system []map[string]string
	if size.system > 0 {
		system = []map[string]string{{"role": "system", "content": filler(size.system)}}
	}
	prompt := func(i int) []byte {
		b, _ := json.Marshal(map[string]any{
			"model":      "demo-chat",
			"max_tokens": 16,
			"messages":   append(system, map[string]string{"role": "user", "content": prose + fmt.Sprintf("load test %d [[mock:tokens=8]]", i)}),
		})
		return b
	}
	gateway := loadtest.Target{
		URL:    s.BaseURL + "/chat/completions",
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   prompt,
		Header2: func(i int) http.Header {
			return http.Header{"Authorization": {"Bearer " + secrets[i%len(secrets)]}}
		},
	}
	direct := loadtest.Target{
		URL:    "http://" + s.MockAddr + "/v1/chat/completions",
		Header: http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer sk-mock-openai"}},
		Body: func(i int) []byte {
			b := prompt(i)
			return []byte(strings.Replace(string(b), `"demo-chat"`, `"mock-gpt"`, 1))
		},
	}
	if hanging {
		recv, err := newSilentReceiver()
		if err != nil {
			return nil, err
		}
		defer recv.Close()
		cost, err := oneRequestCost(s, accts[0], prompt(0))
		if err != nil {
			return nil, err
		}
		total := 100.0 // the warm-up
		for _, r := range rates {
			total += float64(r) * d.Seconds()
		}
		alerts, err := armAlerts(s, accts, recv, cost, total/float64(len(accts)))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "loadtest: %d accounts subscribed to a receiver that never answers, %d alerts to come (a request costs %s)\n",
			len(accts), alerts, ledger.FormatCredits6(cost))
	}
	toGateway, err := loadtest.NewSender(gateway)
	if err != nil {
		return nil, err
	}
	defer toGateway.Close()
	toDirect, err := loadtest.NewSender(direct)
	if err != nil {
		return nil, err
	}
	defer toDirect.Close()
	// Warm both paths (connections, caches) before measuring.
	toGateway.Run(ctx, 50, 2*time.Second)
	toDirect.Run(ctx, 50, time.Second)

	parts := []string{"front", "extproc", "accounting"}
	if s.Front == "envoy" {
		parts[0] = "envoy"
	}
	head(parts, s.Front, len(s.Accounting))
	var rows []row
	for i, rate := range rates {
		if ctx.Err() != nil {
			break
		}
		var profiled sync.WaitGroup
		if profileDir != "" && i == len(rates)-1 {
			served := map[string]string{"extproc": s.ExtprocMetricsAddr, "accounting": s.AccountingMetricsAdr}
			if s.Front != "envoy" {
				served["front"] = s.EnvoyAdminAddr
			}
			for name, addr := range served {
				for kind, file := range map[string]string{"profile": name + ".pprof", "allocs": name + ".allocs.pprof"} {
					profiled.Go(func() {
						if err := saveProfile(addr, kind, filepath.Join(profileDir, file), d/2); err != nil {
							fmt.Fprintf(os.Stderr, "loadtest: %s profile of %s: %v\n", kind, name, err)
						}
					})
				}
			}
		}
		before, switched := partsNow(s, parts, loadtest.CPU), partsNow(s, parts, loadtest.ContextSwitches)
		ledger0 := ledgerNow(s)
		g := toGateway.Run(ctx, rate, d)
		after, switchedAfter := partsNow(s, parts, loadtest.CPU), partsNow(s, parts, loadtest.ContextSwitches)
		ledger1 := ledgerNow(s)
		profiled.Wait()
		dr := toDirect.Run(ctx, rate, d)
		q := func(lat []time.Duration, p float64) float64 {
			return float64(loadtest.Quantile(lat, p)) / float64(time.Millisecond)
		}
		grew := func(series string) float64 { return delta(ledger0, ledger1, series) }
		r := row{code: code, rate: rate, ok: g.OK, sent: g.Sent,
			operationsPerTransact: ratio(grew(groupOperations), grew(groupTransactions)),
			reserve: [2]float64{
				1000 * ratio(grew(extprocReserve+"_sum"+reserveLabels), grew(extprocReserve+"_count"+reserveLabels)),
				1000 * ratio(grew(accountingReserve+"_sum"+servedLabels), grew(accountingReserve+"_count"+servedLabels)),
			},
			p50: q(g.Latencies, .5), p90: q(g.Latencies, .9), p99: q(g.Latencies, .99), p999: q(g.Latencies, .999),
			direct50: q(dr.Latencies, .5), direct99: q(dr.Latencies, .99)}
		r.added50, r.added99 = r.p50-r.direct50, r.p99-r.direct99
		// A call that took two hops is counted by both replicas.
		hops := grew(forwardedCalls) + grew(redirectedCalls)
		r.twoHops = 100 * ratio(hops, grewAll(ledger0, ledger1, accountingCalls)-hops)
		for j, p := range append(parts, "postgres", generator) {
			per := loadtest.Used(before[p], after[p]) / time.Duration(max(g.Sent, 1))
			r.cpu[j] = float64(per) / float64(time.Millisecond)
			r.switches[j] = float64(loadtest.Used(switched[p], switchedAfter[p])) / float64(max(g.Sent, 1))
		}
		for j, p := range parts {
			for _, pid := range pidsOf(s, p) {
				_, peak, _ := loadtest.Memory(pid)
				r.rss[j] = max(r.rss[j], float64(peak>>20))
			}
		}
		fmt.Println(r)
		if hanging {
			fmt.Println(webhookLine(ledger0, ledger1))
		}
		rows = append(rows, r)
		if g.OK != g.Sent {
			fmt.Fprintf(os.Stderr, "loadtest: %d rps: statuses %v\n", rate, g.Statuses)
		}
	}
	return rows, nil
}

// saveProfile writes a profile of the process serving pprof at addr, taken over d: kind
// "profile" (CPU) or "allocs" (what was allocated during d, net/http/pprof's delta).
func saveProfile(addr, kind, path string, d time.Duration) error {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", addr, kind, max(1, int(d.Seconds()))))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// The series the rows' ledger columns come from: the group commit's counters (the
// batching), the Reserve histograms of extproc's calls and of the accounting replicas'
// handling, and the calls the replicas handled and those a standby forwarded or
// answered with the owner's address (two hops).
const (
	accountingCalls   = "accounting_grpc_request_duration_seconds_count"
	forwardedCalls    = "accounting_forwarded_calls_total"
	redirectedCalls   = "accounting_redirected_calls_total"
	groupTransactions = "accounting_ledger_group_transactions_total"
	groupOperations   = "accounting_ledger_group_operations_total"
	extprocReserve    = "gateway_accounting_call_duration_seconds"
	reserveLabels     = `{method="Reserve"}`
	accountingReserve = "accounting_grpc_request_duration_seconds"
	servedLabels      = `{code="OK",method="Reserve"}`
)

// ledgerNow reads extproc's and every accounting replica's metrics, one scrape each, and
// adds up each series over the processes that have it (the replicas' counters are
// summed; extproc's and accounting's series have names of their own); nil when one
// cannot be read.
func ledgerNow(s *stack.Stack) map[string]float64 {
	addrs := []string{s.ExtprocMetricsAddr}
	for _, r := range s.Accounting {
		addrs = append(addrs, r.MetricsAddr)
	}
	sum := map[string]float64{}
	for _, addr := range addrs {
		m, err := harness.Scrape(addr)
		if err != nil {
			return nil
		}
		for k, v := range m {
			sum[k] += v
		}
	}
	return sum
}

// delta is how much series grew from reading a to reading b; NaN when either lacks it.
func delta(a, b map[string]float64, series string) float64 {
	va, ok := a[series]
	vb, okb := b[series]
	if !ok || !okb {
		return math.NaN()
	}
	return vb - va
}

// grewAll is how much the series of the metric name grew in all, whatever their labels
// (a series that appeared in between grew from 0); NaN when b could not be read.
func grewAll(a, b map[string]float64, name string) float64 {
	if b == nil {
		return math.NaN()
	}
	sum := 0.0
	for series, v := range b {
		if series == name || strings.HasPrefix(series, name+"{") {
			sum += v - a[series]
		}
	}
	return sum
}

// ratio is n/d, NaN when d is not positive (or unknown).
func ratio(n, d float64) float64 {
	if !(d > 0) {
		return math.NaN()
	}
	return n / d
}

// partsNow reads each part's process, every PostgreSQL process and this one (the load
// generator) with read (CPU time, context switches).
func partsNow[V any](s *stack.Stack, parts []string, read func(pid int) (V, error)) map[string]map[int]V {
	m := map[string]map[int]V{}
	for _, p := range parts {
		m[p] = loadtest.ByPid(pidsOf(s, p), read)
	}
	m["postgres"] = loadtest.ByPid(loadtest.PidsNamed("postgres"), read)
	m[generator] = loadtest.ByPid([]int{os.Getpid()}, read)
	return m
}

// pidsOf returns the processes of a part: accounting's replicas, or the one process.
func pidsOf(s *stack.Stack, part string) []int {
	if part != "accounting" {
		return []int{s.Pid(part)}
	}
	var pids []int
	for _, r := range s.Accounting {
		pids = append(pids, s.Pid(r.Name))
	}
	return pids
}

// generator names this process in the readings: it sends the load (and reads the
// stack's log lines), on the same cores as the parts it measures.
const generator = "load generator"

// loadAccount is one of the accounts the load is spread over, with its one key.
type loadAccount struct{ id, keyID, secret string }

// topUp is what each load account is topped up with, in micro-credits.
const topUp = 1000 * ledger.Micros(1_000_000)

// makeKeys creates n enterprise accounts, each topped up with topUp and with one key.
func makeKeys(s *stack.Stack, n int) ([]loadAccount, error) {
	ctl := func(args ...string) (map[string]any, error) {
		out, err := harness.Ctl(s, args...)
		if err != nil {
			return nil, err
		}
		var v map[string]any
		return v, json.Unmarshal(out, &v)
	}
	var accts []loadAccount
	for i := 0; i < n; i++ {
		acc, err := ctl("account", "create", "--tier", "enterprise")
		if err != nil {
			return nil, err
		}
		id := fmt.Sprint(acc["id"])
		if _, err := ctl("account", "topup", id, "--amount", ledger.FormatCredits(topUp)); err != nil {
			return nil, err
		}
		k, err := ctl("key", "create", "--account", id)
		if err != nil {
			return nil, err
		}
		accts = append(accts, loadAccount{id: id, keyID: fmt.Sprint(k["id"]), secret: fmt.Sprint(k["key"])})
	}
	return accts, nil
}

// filler is about n bytes of English prose (whole sentences), "" for n ≤ 0.
func filler(n int) string {
	const sentence = "The gateway counts every token of the prompt before it reserves the request's cost, so a longer prompt costs it more work. "
	if n <= 0 {
		return ""
	}
	return strings.Repeat(sentence, (n+len(sentence)-1)/len(sentence))
}

// reexec replaces the process with the same program and arguments under the
// environment goenv.Apply gives. It returns only when that fails, and then the tool runs
// on with the runtime's defaults (said on standard error).
func reexec() {
	self, err := os.Executable()
	if err == nil {
		err = syscall.Exec(self, os.Args, goenv.Apply(os.Environ()))
	}
	fmt.Fprintf(os.Stderr, "loadtest: runs with the Go runtime's defaults: %v\n", err)
}
