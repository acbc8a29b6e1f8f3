package failover_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/logging/logtest"
)

const (
	serviceToken = "svc-token-for-failover-tests-0123456789"
	adminToken   = "adm-token-for-failover-tests-0123456789"
	// lease is the owner's lease in every test: a dead owner is replaced about this
	// long after it stopped renewing.
	lease = time.Second
)

// proc is one accounting process. Its ports stay its own across restarts, so that
// the clients' connections find the restarted process where the killed one was.
type proc struct {
	name        string
	addr        string // gRPC, also the address it advertises as owner
	metricsAddr string
	db          string

	// defaults, when set, runs it with the default lease (no --ledger-lease).
	defaults bool

	cmd  *exec.Cmd
	logs *logtest.Buffer
	done chan struct{} // closed once the process exited
	code int           // its exit code, once done is closed
}

// freePort returns a loopback address nobody listens on now.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// newProc starts an accounting process with the journal engine on db and waits until
// it serves its health endpoint. It is killed when t ends, if still running.
func newProc(t testing.TB, name, db string) *proc {
	t.Helper()
	p := &proc{name: name, addr: freePort(t), metricsAddr: freePort(t), db: db}
	p.start(t)
	t.Cleanup(func() { p.kill() })
	return p
}

// start runs the process (again, after it exited) on its ports.
func (p *proc) start(t testing.TB) {
	t.Helper()
	p.logs = &logtest.Buffer{}
	p.done = make(chan struct{})
	args := []string{"--listen", p.addr, "--advertise", p.addr, "--metrics-listen", p.metricsAddr,
		"--database-url", p.db, "--sweep-interval", "200ms", "--shutdown-timeout", "2s"}
	if !p.defaults {
		args = append(args, "--ledger-lease", lease.String())
	}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = append(os.Environ(), "GATEWAY_SERVICE_TOKEN="+serviceToken, "GATEWAY_ADMIN_TOKEN="+adminToken)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	cmd, done := p.cmd, p.done
	go func() {
		err := cmd.Wait()
		var exit *exec.ExitError
		switch {
		case err == nil:
			p.code = 0
		case errors.As(err, &exit):
			p.code = exit.ExitCode() // -1 when a signal ended it
		default:
			p.code = -2
		}
		close(done)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !p.healthy() {
		select {
		case <-done:
			t.Fatalf("%s exited with %d before serving:\n%s", p.name, p.code, p.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not serve:\n%s", p.name, p.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (p *proc) healthy() bool { return p.get("/healthz") }

// ready reports whether p says it is ready (/readyz): owning the ledger or knowing
// its owner.
func (p *proc) ready() bool { return p.get("/readyz") }

func (p *proc) get(path string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + p.metricsAddr + path)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (p *proc) signal(s syscall.Signal) error { return p.cmd.Process.Signal(s) }

// kill ends the process at once (SIGKILL) and waits for it.
func (p *proc) kill() {
	if p.cmd == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.signal(syscall.SIGCONT) // a paused process dies only once it runs
	_ = p.signal(syscall.SIGKILL)
	<-p.done
}

// stop asks the process to stop (SIGTERM) and returns its exit code.
func (p *proc) stop(t testing.TB) int {
	t.Helper()
	_ = p.signal(syscall.SIGTERM)
	return p.wait(t, 10*time.Second)
}

// wait waits up to d for the process to exit and returns its exit code.
func (p *proc) wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(d):
		t.Fatalf("%s still running after %v:\n%s", p.name, d, tail(p.logs.String(), 30))
		return 0
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// errorLines are the log lines of p at level error.
func (p *proc) errorLines() []string {
	var out []string
	for _, l := range strings.Split(p.logs.String(), "\n") {
		if strings.Contains(l, `"level":"error"`) {
			out = append(out, l)
		}
	}
	return out
}

func (p *proc) String() string { return fmt.Sprintf("%s (%s)", p.name, p.addr) }
