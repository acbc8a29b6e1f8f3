package front

import (
	"errors"
	"fmt"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	previoushostsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	previousprioritiesv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
)

// retryOn is a set of RetryPolicy::RETRY_ON_* conditions.
type retryOn uint8

const (
	retryOnConnectFailure retryOn = 1 << iota
	retryOnReset
	retryOnRetriableStatusCodes
)

// emulatedRetryOn are the retry_on / x-envoy-retry-on conditions the front emulates.
var emulatedRetryOn = map[string]retryOn{
	"connect-failure":        retryOnConnectFailure,
	"reset":                  retryOnReset,
	"retriable-status-codes": retryOnRetriableStatusCodes,
}

// knownRetryOn are the other conditions Envoy knows (RetryStateImpl::parseRetryOn):
// refused, not emulated.
var knownRetryOn = map[string]bool{
	"5xx": true, "gateway-error": true, "envoy-ratelimited": true, "retriable-4xx": true,
	"refused-stream": true, "retriable-headers": true, "reset-before-request": true,
	"http3-post-connect-failure": true,
}

// RetryPolicy is the emulated subset of a route's retry_policy (RetryPolicyImpl in
// source/common/router/config_impl.cc).
type RetryPolicy struct {
	On retryOn
	// NumRetries is num_retries (default 1).
	NumRetries uint32
	// RetriableStatusCodes are retriable_status_codes.
	RetriableStatusCodes []uint32
	// PreviousPriorities: retry_priority envoy.retry_priorities.previous_priorities with
	// this update_frequency (0: no retry priority).
	PreviousPriorities uint32
	// PreviousHosts: retry_host_predicate envoy.retry_host_predicates.previous_hosts.
	PreviousHosts bool
	// HostSelectionAttempts is host_selection_retry_max_attempts (default 1).
	HostSelectionAttempts uint32
}

// parseRetryOn parses a comma-separated retry_on; unknown conditions are ignored, as
// Envoy ignores them in the header (RetryStateImpl::parseRetryOn), known but unemulated
// ones are returned in refused.
func parseRetryOn(s string) (on retryOn, refused []string) {
	for _, tok := range strings.Split(s, ",") {
		tok = strings.TrimSpace(tok)
		if bit, ok := emulatedRetryOn[tok]; ok {
			on |= bit
		} else if knownRetryOn[tok] {
			refused = append(refused, tok)
		}
	}
	return on, refused
}

func retryPolicyFrom(rp *routev3.RetryPolicy) (*RetryPolicy, error) {
	if rp == nil {
		return nil, nil
	}
	p := &RetryPolicy{NumRetries: 1, HostSelectionAttempts: 1}
	for _, tok := range strings.Split(rp.GetRetryOn(), ",") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		bit, ok := emulatedRetryOn[tok]
		if !ok {
			return nil, fmt.Errorf("retry_policy.retry_on %q not emulated (only connect-failure, reset, retriable-status-codes)", tok)
		}
		p.On |= bit
	}
	if v := rp.GetNumRetries(); v != nil {
		p.NumRetries = v.GetValue()
	}
	p.RetriableStatusCodes = rp.GetRetriableStatusCodes()
	if n := rp.GetHostSelectionRetryMaxAttempts(); n != 0 {
		// RetryPolicyImpl keeps its default of 1 unless the field is set.
		if n < 0 || n > 1<<31 {
			return nil, errors.New("retry_policy.host_selection_retry_max_attempts out of range")
		}
		p.HostSelectionAttempts = uint32(n)
	}
	if pr := rp.GetRetryPriority(); pr != nil {
		cfg := &previousprioritiesv3.PreviousPrioritiesConfig{}
		if pr.GetName() != "envoy.retry_priorities.previous_priorities" || pr.GetTypedConfig().UnmarshalTo(cfg) != nil {
			return nil, fmt.Errorf("retry_policy.retry_priority %q not emulated (only envoy.retry_priorities.previous_priorities)", pr.GetName())
		}
		if cfg.GetUpdateFrequency() <= 0 {
			return nil, errors.New("retry_priority previous_priorities: update_frequency must be greater than 0")
		}
		p.PreviousPriorities = uint32(cfg.GetUpdateFrequency())
	}
	for _, hp := range rp.GetRetryHostPredicate() {
		if hp.GetName() != "envoy.retry_host_predicates.previous_hosts" || !hp.GetTypedConfig().MessageIs(&previoushostsv3.PreviousHostsPredicate{}) {
			return nil, fmt.Errorf("retry_policy.retry_host_predicate %q not emulated (only envoy.retry_host_predicates.previous_hosts)", hp.GetName())
		}
		p.PreviousHosts = true
	}
	return p, nil
}
