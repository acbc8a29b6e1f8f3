package envoy_test

import (
	"testing"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
)

const (
	buffered = filterv3.ProcessingMode_BUFFERED
	streamed = filterv3.ProcessingMode_STREAMED
	none     = filterv3.ProcessingMode_NONE
)

// checkMode fails the test unless r, a reply to response headers, overrides the
// processing mode with the response body sent as response. The override is compared
// whole: headers sent, trailers skipped and the request body mode request (the stream's
// filter's: BUFFERED on a request's stream, NONE on an attempt's), since Envoy takes
// every field of an override as given (the adapter's modeOverride).
func checkMode(t testing.TB, r *extprocv3.ProcessingResponse, request, response filterv3.ProcessingMode_BodySendMode) {
	t.Helper()
	want := &filterv3.ProcessingMode{
		RequestHeaderMode:   filterv3.ProcessingMode_SEND,
		ResponseHeaderMode:  filterv3.ProcessingMode_SEND,
		RequestBodyMode:     request,
		ResponseBodyMode:    response,
		RequestTrailerMode:  filterv3.ProcessingMode_SKIP,
		ResponseTrailerMode: filterv3.ProcessingMode_SKIP,
	}
	if d := cmp.Diff(want, r.GetModeOverride(), protocmp.Transform()); d != "" {
		t.Fatalf("mode_override (-want +got):\n%s", d)
	}
}
