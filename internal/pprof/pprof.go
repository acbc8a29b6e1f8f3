// Package pprof puts Go's runtime profiles (net/http/pprof) on a process's metrics
// listener when an operator enables them (extproc: --pprof / EXTPROC_PPROF; accounting:
// --pprof / ACCOUNTING_PPROF; the Envoy test front: --pprof / FRONT_PPROF, on the
// bootstrap's admin address). They are off by default: a profile shows the process's
// memory and call stacks, so the listener must be reachable only by operators.
package pprof

import (
	"net/http"
	httppprof "net/http/pprof"
	"strconv"
)

// Prefix is the path the profiles are served under.
const Prefix = "/debug/pprof/"

// Wrap returns h unchanged when enabled is false; else a handler that serves the
// profiles under Prefix and everything else with h.
func Wrap(h http.Handler, enabled bool) http.Handler {
	if !enabled {
		return h
	}
	mux := http.NewServeMux()
	mux.HandleFunc(Prefix, httppprof.Index) // named profiles: heap, goroutine, block, ...
	mux.HandleFunc(Prefix+"cmdline", httppprof.Cmdline)
	mux.HandleFunc(Prefix+"profile", httppprof.Profile)
	mux.HandleFunc(Prefix+"symbol", httppprof.Symbol)
	mux.HandleFunc(Prefix+"trace", httppprof.Trace)
	mux.Handle("/", h)
	return mux
}

// Enabled reads an on/off setting ("1", "true", ...; "" is off).
func Enabled(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	return strconv.ParseBool(v)
}
