//go:build vtprotobuf

package vtcodec

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// TestGenerated: built with the vtprotobuf tag (as the Makefile, the e2e stack and the
// Dockerfile build), Envoy's ext_proc and xDS messages take the generated path.
func TestGenerated(t *testing.T) {
	for _, m := range []any{&extprocsvc.ProcessingRequest{}, &extprocsvc.ProcessingResponse{}, &discoveryv3.DiscoveryResponse{}} {
		if _, ok := m.(vtMarshaler); !ok {
			t.Errorf("%T has no generated marshalling under the vtprotobuf tag", m)
		}
	}
}
