// Package goenv holds the Go runtime settings the gateway's own Go processes start with
// when their environment leaves them unset: one P (GOMAXPROCS=1) and a system monitor
// that never sleeps deeply (NoDeepSleep). The local stack gives them to every part it
// starts and the load tool to itself; the deployment's manifests set GODEBUG the same
// way and leave GOMAXPROCS to the container's CPU limit (docs/operations.md, Scaling). The
// runtime reads both only at a process's start, so they travel in the environment.
//
// It imports nothing of the gateway.
package goenv

import (
	"slices"
	"strings"
)

// NoDeepSleep is the GODEBUG setting that keeps the runtime's system monitor (sysmon)
// out of its deep sleep. With every P idle, sysmon sleeps until the next timer, and the
// first system call a goroutine then makes wakes it (entersyscall, when
// sched.sysmonwait is set); it then polls every 20 µs while a P runs, and sleeps deeply
// again once all are idle (runtime/proc.go, sysmon). A process that answers a message,
// waits for the next and answers again wakes it on every message: at 100 requests/s on
// the local stack sysmon made two thirds of extproc's context switches. With schedtrace
// set the runtime never enters the deep sleep (so that it can print on time); sysmon
// then polls at its longest delay, every 10 ms, when there is nothing to do. The period
// is the longest one (2³¹−1 ms, ≈24.8 days): the runtime prints one scheduler line to
// standard error when that much has passed since the machine's boot (its monotonic
// clock), so a process on a machine up for longer prints one line at its start, then one
// every ≈24.8 days. And a process that dies of an unrecovered panic or a fatal runtime
// error prints the scheduler's state, one line per thread, P and goroutine, before the
// usual message (runtime/panic.go, startpanic_m). Nothing else changes.
const NoDeepSleep = "schedtrace=2147483647"

// Apply returns environ with GOMAXPROCS=1 when it has no GOMAXPROCS, and NoDeepSleep
// added to GODEBUG when GODEBUG names no schedtrace (GODEBUG=schedtrace=0 keeps the
// runtime's default). Other variables and GODEBUG's other settings are kept; each
// variable appears once.
//
// One P: with more Ps than it keeps busy, a Go process wakes another thread whenever it
// readies a goroutine (gRPC hands every message from goroutine to goroutine), a context
// switch each: at 100 requests/s extproc made ≈50 per request with two Ps and ≈25 with
// one, and used less CPU (docs/performance.md). The local stack runs five Go processes
// and PostgreSQL on one machine; none needs a second core.
func Apply(environ []string) []string {
	out := make([]string, 0, len(environ)+2)
	hasProcs, hasDebug := false, false
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "GOMAXPROCS":
			if hasProcs {
				continue
			}
			hasProcs = true
		case "GODEBUG":
			if hasDebug {
				continue
			}
			hasDebug = true
			kv = "GODEBUG=" + withNoDeepSleep(v)
		}
		out = append(out, kv)
	}
	if !hasProcs {
		out = append(out, "GOMAXPROCS=1")
	}
	if !hasDebug {
		out = append(out, "GODEBUG="+NoDeepSleep)
	}
	return out
}

// Applied reports whether Apply would leave environ as it is: it has a GOMAXPROCS and a
// GODEBUG that names schedtrace, each once.
func Applied(environ []string) bool {
	return slices.Equal(Apply(environ), environ)
}

func withNoDeepSleep(godebug string) string {
	if namesSchedtrace(godebug) {
		return godebug
	}
	if godebug == "" {
		return NoDeepSleep
	}
	return godebug + "," + NoDeepSleep
}

func namesSchedtrace(godebug string) bool {
	for _, field := range strings.Split(godebug, ",") {
		if k, _, _ := strings.Cut(field, "="); k == "schedtrace" {
			return true
		}
	}
	return false
}
