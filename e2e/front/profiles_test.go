package front

import (
	"io"
	"log"
	"net"
	"net/http"
	"testing"
)

func TestAdminAddressFromBootstrap(t *testing.T) {
	cfg, err := FromBootstrap(loadBootstrap(t).Parsed())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Admin != "127.0.0.1:9901" {
		t.Errorf("admin address %q, want envoy.yaml's 127.0.0.1:9901", cfg.Admin)
	}
}

func TestProfilesServedOnlyUnderPrefix(t *testing.T) {
	quiet := log.New(io.Discard, "", 0)
	if _, err := startProfiles("", quiet); err == nil {
		t.Error("profiles without an admin address: no error")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := serveProfiles(ln, quiet)
	defer closeServer(srv)
	for path, want := range map[string]int{"/debug/pprof/": http.StatusOK, "/debug/pprof/cmdline": http.StatusOK, "/": http.StatusNotFound, "/stats": http.StatusNotFound} {
		resp, err := http.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}
