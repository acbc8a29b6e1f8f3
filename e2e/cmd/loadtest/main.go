// Command loadtest measures what the gateway adds to a request: it starts a private
// stack (like the e2e suite), creates paying keys, and at each rate sends the same
// non-streamed chat request open loop through the gateway and then straight to the mock
// provider, back to back. It prints latency percentiles, the latency the gateway adds,
// the success rate, the CPU time each part spent per request (from /proc) and each
// part's memory, as the README's performance table.
//
//	make loadtest                                  # the README's rates
//	go run ./e2e/cmd/loadtest -rates 100,1000 -duration 20s
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/llmgw/gateway/e2e/internal/harness"
	"github.com/llmgw/gateway/e2e/loadtest"
	"github.com/llmgw/gateway/e2e/stack"
)

func main() {
	rates := flag.String("rates", "100,250,500,1000", "arrival rates to run, requests per second")
	duration := flag.Duration("duration", 10*time.Second, "how long each rate runs, per target")
	keys := flag.Int("keys", 40, "paying keys (one enterprise account each) the requests rotate over")
	root := flag.String("root", ".", "the repository root")
	profile := flag.String("profile", "", "write CPU and allocation profiles (NAME.pprof, NAME.allocs.pprof) of extproc, accounting and the Envoy test front, taken during the last rate's gateway run, into this directory")
	flag.Parse()
	if *profile != "" {
		// The parts serve their runtime profiles only when asked (they inherit this).
		_ = os.Setenv("EXTPROC_PPROF", "1")
		_ = os.Setenv("ACCOUNTING_PPROF", "1")
		_ = os.Setenv("FRONT_PPROF", "1") // on the admin address; real Envoy ignores it
	}
	if err := run(*root, *rates, *duration, *keys, *profile); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

func run(root, rateList string, d time.Duration, nkeys int, profileDir string) error {
	var rates []int
	for _, r := range strings.Split(rateList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(r))
		if err != nil || n <= 0 {
			return fmt.Errorf("bad rate %q", r)
		}
		rates = append(rates, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Fprintln(os.Stderr, "loadtest: building and starting a private stack…")
	env, err := harness.Start(root)
	if err != nil {
		return err
	}
	defer env.Close()
	s := env.Stack
	secrets, err := makeKeys(s, nkeys)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: time.Minute,
	}}
	prompt := func(i int) []byte {
		b, _ := json.Marshal(map[string]any{
			"model":      "demo-chat",
			"max_tokens": 16,
			"messages":   []map[string]string{{"role": "user", "content": fmt.Sprintf("load test %d [[mock:tokens=8]]", i)}},
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
	// Warm both paths (connections, caches) before measuring.
	loadtest.Run(ctx, client, gateway, 50, 2*time.Second)
	loadtest.Run(ctx, client, direct, 50, time.Second)

	parts := []string{"front", "extproc", "accounting"}
	if s.Front == "envoy" {
		parts[0] = "envoy"
	}
	fmt.Printf("Front: %s; %d keys; %s per rate and target; non-streamed demo-chat, 8 output tokens.\n\n", s.Front, nkeys, d)
	fmt.Println("| rate | gateway p50 / p90 / p99 / p99.9 | direct p50 / p99 | added p50 / p99 | success | CPU per request: " +
		strings.Join(parts, " / ") + " / postgres | peak RSS: " + strings.Join(parts, " / ") + " | ledger operations per transaction |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
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
		before := cpuNow(s, parts)
		group0 := groupCommit(s.AccountingMetricsAdr)
		g := loadtest.Run(ctx, client, gateway, rate, d)
		after := cpuNow(s, parts)
		group1 := groupCommit(s.AccountingMetricsAdr)
		profiled.Wait()
		dr := loadtest.Run(ctx, client, direct, rate, d)
		q := loadtest.Quantile
		ms := func(x time.Duration) string { return fmt.Sprintf("%.2f", float64(x)/float64(time.Millisecond)) }
		var cpu, rss []string
		for _, p := range append(parts, "postgres") {
			per := loadtest.Used(before[p], after[p]) / time.Duration(max(g.Sent, 1))
			cpu = append(cpu, ms(per))
		}
		for _, p := range parts {
			_, peak, _ := loadtest.Memory(s.Pid(p))
			rss = append(rss, fmt.Sprintf("%d MB", peak>>20))
		}
		batching := "n/a"
		if tx := group1[0] - group0[0]; tx > 0 && group0[0] >= 0 {
			batching = fmt.Sprintf("%.1f", (group1[1]-group0[1])/tx)
		}
		fmt.Printf("| %d rps | %s / %s / %s / %s ms | %s / %s ms | %s / %s ms | %.2f %% (%d of %d) | %s ms | %s | %s |\n",
			rate, ms(q(g.Latencies, .5)), ms(q(g.Latencies, .9)), ms(q(g.Latencies, .99)), ms(q(g.Latencies, .999)),
			ms(q(dr.Latencies, .5)), ms(q(dr.Latencies, .99)),
			ms(q(g.Latencies, .5)-q(dr.Latencies, .5)), ms(q(g.Latencies, .99)-q(dr.Latencies, .99)),
			100*float64(g.OK)/float64(max(g.Sent, 1)), g.OK, g.Sent,
			strings.Join(cpu, " / "), strings.Join(rss, " / "), batching)
		if g.OK != g.Sent {
			fmt.Fprintf(os.Stderr, "loadtest: %d rps: statuses %v\n", rate, g.Statuses)
		}
	}
	return nil
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

// groupCommit reads the ledger's group-commit counters (transactions, operations) from
// accounting's metrics at addr; -1s when they cannot be read.
func groupCommit(addr string) [2]float64 {
	out := [2]float64{-1, -1}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		for i, want := range []string{"accounting_ledger_group_transactions_total", "accounting_ledger_group_operations_total"} {
			if name == want {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					out[i] = f
				}
			}
		}
	}
	return out
}

// cpuNow reads the CPU time of each part and of every PostgreSQL process.
func cpuNow(s *stack.Stack, parts []string) map[string]map[int]time.Duration {
	m := map[string]map[int]time.Duration{}
	for _, p := range parts {
		m[p] = loadtest.CPUByPid([]int{s.Pid(p)})
	}
	m["postgres"] = loadtest.CPUByPid(loadtest.PidsNamed("postgres"))
	return m
}

// makeKeys creates n enterprise accounts, each topped up and with one key, and returns
// the keys' secrets.
func makeKeys(s *stack.Stack, n int) ([]string, error) {
	ctl := func(args ...string) (map[string]any, error) {
		out, err := harness.Ctl(s, args...)
		if err != nil {
			return nil, err
		}
		var v map[string]any
		return v, json.Unmarshal(out, &v)
	}
	var secrets []string
	for i := 0; i < n; i++ {
		acc, err := ctl("account", "create", "--tier", "enterprise")
		if err != nil {
			return nil, err
		}
		id := fmt.Sprint(acc["id"])
		if _, err := ctl("account", "topup", id, "--amount", "1000"); err != nil {
			return nil, err
		}
		k, err := ctl("key", "create", "--account", id)
		if err != nil {
			return nil, err
		}
		secrets = append(secrets, fmt.Sprint(k["key"]))
	}
	return secrets, nil
}
