package front

import (
	"net/http"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// header is one header entry; keys are lowercase, as in Envoy's header maps.
type header struct{ Key, Value string }

// headerList is an ordered header map allowing repeated keys. Not safe for concurrent use.
type headerList []header

func (h headerList) get(key string) (string, bool) {
	for _, e := range h {
		if e.Key == key {
			return e.Value, true
		}
	}
	return "", false
}

// values returns every value of key, in order.
func (h headerList) values(key string) []string {
	var out []string
	for _, e := range h {
		if e.Key == key {
			out = append(out, e.Value)
		}
	}
	return out
}

func (h *headerList) del(key string) {
	i := 0
	for i < len(*h) && (*h)[i].Key != key {
		i++
	}
	if i == len(*h) {
		return // nothing to remove (the common case): no writes
	}
	out := (*h)[:i]
	for _, e := range (*h)[i+1:] {
		if e.Key != key {
			out = append(out, e)
		}
	}
	*h = out
}

func (h *headerList) add(key, value string) { *h = append(*h, header{key, value}) }

func (h *headerList) set(key, value string) {
	h.del(key)
	h.add(key, value)
}

// toProto renders h as ext_proc sends it: one HeaderValue per value, in raw_value.
// The values share one allocation, as do the raw values.
func (h headerList) toProto() *corev3.HeaderMap {
	n := 0
	for _, e := range h {
		n += len(e.Value)
	}
	raw := make([]byte, 0, n)
	values := make([]corev3.HeaderValue, len(h))
	m := &corev3.HeaderMap{Headers: make([]*corev3.HeaderValue, len(h))}
	for i, e := range h {
		start := len(raw)
		raw = append(raw, e.Value...)
		values[i].Key, values[i].RawValue = e.Key, raw[start:len(raw):len(raw)]
		m.Headers[i] = &values[i]
	}
	return m
}

// hopByHop are connection-level headers that Envoy's codecs never pass on.
var hopByHop = map[string]bool{
	"connection": true, "keep-alive": true, "proxy-connection": true, "transfer-encoding": true,
	"upgrade": true, "te": true, "trailer": true,
}

// fromHTTP converts Go header map entries to a lowercase header list, dropping
// hop-by-hop headers.
func fromHTTP(hdr http.Header) headerList {
	return appendHTTP(make(headerList, 0, len(hdr)), hdr)
}

// appendHTTP appends fromHTTP(hdr) to h.
func appendHTTP(h headerList, hdr http.Header) headerList {
	for k, vs := range hdr {
		lk := lowerKey(k)
		if hopByHop[lk] {
			continue
		}
		for _, v := range vs {
			h = append(h, header{lk, v})
		}
	}
	return h
}

// mutationRules are the header mutation checks of the ext_proc filter: its
// mutation_rules (HeaderMutationRules allow_all_routing and allow_envoy; both false by
// default), or the permissive rules Envoy uses for immediate responses (both true).
type mutationRules struct {
	// allowRouting: :authority, host, :method and :scheme may be set (never removed).
	allowRouting bool
	// allowEnvoy: headers starting with Envoy's prefix "x-envoy" may be set or removed.
	allowEnvoy bool
	// response: the target is a response header map (":status" may be set).
	response bool
	// allowContentLength: a set of content-length is applied (it is ignored on a
	// streamed response, where Envoy keeps the upstream's value).
	allowContentLength bool
}

// permissiveRules are the rules of immediate responses (a response header map).
var permissiveRules = mutationRules{allowRouting: true, allowEnvoy: true, response: true, allowContentLength: true}

// envoyHeaderPrefix is Envoy's header prefix, as HeaderMutationRules.allow_envoy
// matches it (no trailing dash).
const envoyHeaderPrefix = "x-envoy"

func (r mutationRules) allowed(key string, removing bool) bool {
	switch {
	case key == "" || strings.ContainsAny(key, " \t\r\n:\x00") && !strings.HasPrefix(key, ":"):
		return false
	case key == ":authority" || key == "host" || key == ":method" || key == ":scheme":
		return r.allowRouting && !removing
	case key == ":path":
		return !r.response && !removing
	case key == ":status":
		return r.response && !removing
	case strings.HasPrefix(key, ":"):
		return false
	case strings.HasPrefix(key, envoyHeaderPrefix):
		return r.allowEnvoy
	}
	return true
}

// Details of Envoy's 500 when a header mutation is malformed (the status message of
// MutationUtils::applyHeaderMutations, spaces made underscores by the local reply).
const (
	detailsBadHeaderChar    = "Invalid_character_in_set_headers_mutation."
	detailsBadRemoveChar    = "Invalid_character_in_remove_headers_mutation."
	detailsValueAndRawValue = "Only_one_of_value_or_raw_value_in_the_HeaderValue_message_should_be_set."
)

// validName reports whether a header name may appear in a mutation at all (a pseudo
// header's leading colon aside, no separators or controls).
func validName(key string) bool {
	return key != "" && !strings.ContainsAny(strings.TrimPrefix(key, ":"), " \t\r\n:\x00")
}

// validValue is Envoy's HeaderUtility::headerValueIsValid (nghttp2's header value
// check): tab, visible ASCII and bytes from 0x80; no other control character.
func validValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c != '\t' && (c < 0x20 || c == 0x7f) {
			return false
		}
	}
	return true
}

// applyHeaderMutation applies m to h as Envoy's ext_proc filter does
// (mutation_utils.cc MutationUtils::applyHeaderMutations): removes first, then sets;
// only raw_value is read; the deprecated append flag decides between adding and
// replacing; mutations the rules disallow are skipped silently. A malformed mutation (an
// invalid name or value, or both value and raw_value set) fails the whole message:
// the returned details are non-empty, and Envoy answers the request with a 500 of those
// details (ext_proc.cc Filter::onReceiveMessage; an immediate response only logs it).
// Sets before the malformed one stay applied, as in Envoy.
func applyHeaderMutation(h *headerList, m *extprocsvc.HeaderMutation, rules mutationRules) (failed string) {
	if m == nil {
		return ""
	}
	for _, k := range m.GetRemoveHeaders() {
		if !validName(k) {
			return detailsBadRemoveChar
		}
		k = strings.ToLower(k)
		if rules.allowed(k, true) {
			h.del(k)
		}
	}
	for _, o := range m.GetSetHeaders() {
		if o.GetHeader() == nil {
			continue
		}
		if o.GetHeader().GetValue() != "" && len(o.GetHeader().GetRawValue()) > 0 {
			return detailsValueAndRawValue
		}
		k := strings.ToLower(o.GetHeader().GetKey())
		v := string(o.GetHeader().GetRawValue())
		if !validName(k) || !validValue(v) {
			return detailsBadHeaderChar
		}
		if !rules.allowed(k, false) {
			continue
		}
		if k == "content-length" && !rules.allowContentLength {
			continue
		}
		if k == ":status" {
			if n, err := strconv.Atoi(v); err != nil || n < 200 || n > 999 {
				continue
			}
		}
		//lint:ignore SA1019 ext_proc reads only the deprecated append flag (append_action is ignored).
		if o.GetAppend().GetValue() {
			h.add(k, v)
		} else {
			h.set(k, v)
		}
	}
	return ""
}
