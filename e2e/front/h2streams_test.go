package front

import (
	"net"
	"testing"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/llmgw/gateway/e2e/internal/bootstraptest"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestHTTP2MaxConcurrentStreams: the front offers a downstream HTTP/2 connection the
// connection manager's http2_protocol_options.max_concurrent_streams, as Envoy does in
// its first SETTINGS frame.
func TestHTTP2MaxConcurrentStreams(t *testing.T) {
	for _, tc := range []struct {
		edit bootstrapEdit
		want uint32
	}{
		{nil, 100},
		{func(b *bootstraptest.Bootstrap) {
			b.HCM(func(h *hcmv3.HttpConnectionManager) {
				h.Http2ProtocolOptions.MaxConcurrentStreams = wrapperspb.UInt32(7)
			})
		}, 7},
	} {
		h := newHarness(t, nil, continueAll, tc.edit)
		c, err := net.Dial("tcp", h.front.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
			t.Fatal(err)
		}
		fr := http2.NewFramer(c, c)
		if err := fr.WriteSettings(); err != nil {
			t.Fatal(err)
		}
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		sf, ok := f.(*http2.SettingsFrame)
		if !ok {
			t.Fatalf("first frame %T", f)
		}
		if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); !ok || v != tc.want {
			t.Errorf("max concurrent streams %d (sent %v), want %d", v, ok, tc.want)
		}
	}
}
