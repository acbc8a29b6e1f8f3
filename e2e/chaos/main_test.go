// Package chaos_test is the fault-injection suite: it runs a private stack, drives
// concurrent paying traffic through it while it kills and restarts extproc and
// accounting, pauses accounting, cuts PostgreSQL's connections and holds one account's
// row locked, and then judges the ledger against what each client saw: an error costs
// nothing, a completed answer costs exactly the price of its usage, no hold outlives its
// lease, and the ledger's invariants hold. Beside it, each on a stack of its own, the
// outage tests take the upstream down for 5 s under load (the channel must serve again
// within 10 s of its return) and accounting for 45 s and for 3 minutes while answers are
// delivered (each must be charged exactly once).
//
// It is part of `make test` in a short form (CHAOS_DURATION widens TestFaults); the
// 3-minute outage sets the suite's length.
package chaos_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/llmgw/gateway/e2e/internal/harness"
)

var env *harness.Env

func TestMain(m *testing.M) {
	// Short leases, so that the holds of a killed extproc free within the run.
	for k, v := range leaseEnv {
		if err := os.Setenv(k, v); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(harness.Main(m, "chaos", "../..", func(e *harness.Env) { env = e }))
}
