// Package stack starts the whole gateway on loopback: PostgreSQL (the running one, or a
// private cluster when none is reachable), the accounting service, extproc, the mock
// providers and the front (real Envoy when one is available, else the Envoy test front).
//
// `make run` (bin/localstack) and the e2e suite both use it, so the suite always tests
// the stack a newcomer gets. It runs the binaries from a bin directory as child
// processes and knows nothing of their internals beyond flags, environment and ports.
package stack

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/llmgw/gateway/internal/demoenv"
	"github.com/llmgw/gateway/internal/goenv"
	"github.com/llmgw/gateway/internal/runfiles"
)

// Config says where the stack's parts listen and where its files are. Zero fields take
// the defaults of docs/local-stack.md, each overridable by its environment variable.
type Config struct {
	// Root is the repository root (envoy/, deploy/ are read from it).
	Root string
	// BinDir holds the binaries (default Root/bin).
	BinDir string
	// RunDir receives tokens, the rendered envoy.yaml and logs (default Root/.run).
	RunDir string

	GatewayAddr          string // GATEWAY_ADDR, 127.0.0.1:8080
	EnvoyAdminAddr       string // ENVOY_ADMIN_ADDR, 127.0.0.1:9901
	ExtprocAddr          string // EXTPROC_ADDR, 127.0.0.1:50051
	AccountingAddr       string // ACCOUNTING_ADDR, 127.0.0.1:50052
	MockAddr             string // MOCK_ADDR, 127.0.0.1:18080
	ExtprocMetricsAddr   string // EXTPROC_METRICS_ADDR, 127.0.0.1:9101
	AccountingMetricsAdr string // ACCOUNTING_METRICS_ADDR, 127.0.0.1:9102
	ConsoleAddr          string // CONSOLE_ADDR, 127.0.0.1:8090 (the web console)
	OIDCAddr             string // OIDC_ADDR, 127.0.0.1:8091 (the local OpenID provider, with OIDC)
	DatabaseURL          string // DATABASE_URL
	// Catalog is the file extproc serves and reloads (GATEWAY_CATALOG). Empty means a
	// working copy of the demo catalog, RunDir/catalog.yaml, written anew from
	// Root/deploy/local/catalog.yaml at every start, so experiments never edit a
	// tracked file.
	Catalog string
	// AccountingReplicas is how many accounting processes serve the one database
	// (ACCOUNTING_REPLICAS, 1), as the manifests' replicas do: the first at
	// AccountingAddr, the others (named accounting-2, …) at free loopback ports; extproc
	// and the console dial all of them as a list (Stack.AccountingTarget).
	AccountingReplicas int
	// Gateways is how many gateways (an extproc and the front before it) serve clients
	// (1): the first at GatewayAddr, EnvoyAdminAddr, ExtprocAddr and ExtprocMetricsAddr,
	// the others (extproc-2 and front-2 or envoy-2, …) at free loopback ports, all on the
	// same accounting replicas, catalog and mock (Stack.Gates).
	Gateways int
	// EnvoyBin runs real Envoy when set (ENVOY_BIN, or `envoy` on PATH when
	// UsePathEnvoy); empty uses the Envoy test front.
	EnvoyBin     string
	UsePathEnvoy bool

	// OIDC starts a local OpenID provider at OIDCAddr, configures the console's single
	// sign-on for it and seeds one person per role (signin.go); `make run OIDC=1`.
	OIDC bool

	// Log receives the children's output, each line prefixed with its name.
	Log io.Writer
}

const defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/gateway?sslmode=disable"

// FromEnv fills the zero fields of c from the environment and the defaults.
func (c Config) FromEnv() Config {
	set := func(p *string, env, def string) {
		if *p != "" {
			return
		}
		if v := os.Getenv(env); v != "" {
			*p = v
			return
		}
		*p = def
	}
	if c.Root == "" {
		c.Root, _ = os.Getwd()
	}
	set(&c.BinDir, "GATEWAY_BIN_DIR", filepath.Join(c.Root, "bin"))
	set(&c.RunDir, "GATEWAY_RUN_DIR", filepath.Join(c.Root, ".run"))
	set(&c.GatewayAddr, "GATEWAY_ADDR", "127.0.0.1:8080")
	set(&c.EnvoyAdminAddr, "ENVOY_ADMIN_ADDR", "127.0.0.1:9901")
	set(&c.ExtprocAddr, "EXTPROC_ADDR", "127.0.0.1:50051")
	set(&c.AccountingAddr, "ACCOUNTING_ADDR", "127.0.0.1:50052")
	set(&c.MockAddr, "MOCK_ADDR", DefaultMockAddr)
	set(&c.ExtprocMetricsAddr, "EXTPROC_METRICS_ADDR", "127.0.0.1:9101")
	set(&c.ConsoleAddr, "CONSOLE_ADDR", "127.0.0.1:8090")
	set(&c.OIDCAddr, "OIDC_ADDR", "127.0.0.1:8091")
	set(&c.AccountingMetricsAdr, "ACCOUNTING_METRICS_ADDR", "127.0.0.1:9102")
	set(&c.DatabaseURL, "DATABASE_URL", defaultDatabaseURL)
	set(&c.Catalog, "GATEWAY_CATALOG", "")
	if c.AccountingReplicas == 0 {
		c.AccountingReplicas, _ = strconv.Atoi(os.Getenv("ACCOUNTING_REPLICAS"))
	}
	c.AccountingReplicas = max(c.AccountingReplicas, 1)
	c.Gateways = max(c.Gateways, 1)
	set(&c.EnvoyBin, "ENVOY_BIN", "")
	if c.EnvoyBin == "" && c.UsePathEnvoy {
		if p, err := exec.LookPath("envoy"); err == nil {
			c.EnvoyBin = p
		}
	}
	if c.Log == nil {
		c.Log = os.Stdout
	}
	return c
}

// Stack is a running stack. Stop it with Stop.
type Stack struct {
	Config
	// BaseURL is the client-facing base address, ending in /v1.
	BaseURL      string
	AdminToken   string
	ServiceToken string
	// Front names what serves the gateway address: "envoy" or "envoy test front".
	Front string
	// Accounting lists the accounting replicas, the first at AccountingAddr.
	Accounting []Replica
	// Gates lists the gateways, the first at GatewayAddr (BaseURL).
	Gates []Gateway

	clouds cloudSecrets

	mu    sync.Mutex
	procs []*proc
	pg    *privatePostgres
}

// Replica is one accounting process: its part name, gRPC and metrics addresses.
type Replica struct{ Name, Addr, MetricsAddr string }

// Gateway is one extproc and the front before it: their part names and addresses, and
// the client-facing base address (ending in /v1).
type Gateway struct {
	Extproc, Front                  string
	BaseURL, Addr, AdminAddr        string
	ExtprocAddr, ExtprocMetricsAddr string
	envoyConfig                     string // the rendered envoy.yaml's file name
	baseID                          int    // real Envoy's --base-id
}

// AccountingTarget is what extproc and the console dial: the one accounting address, or
// every replica's as a comma-separated list (accounting/client.Dial).
func (s *Stack) AccountingTarget() string {
	if len(s.Accounting) == 0 { // not started yet
		return s.AccountingAddr
	}
	addrs := make([]string, len(s.Accounting))
	for i, r := range s.Accounting {
		addrs[i] = r.Addr
	}
	return strings.Join(addrs, ",")
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// path, args and env start the part again (Restart).
	path string
	args []string
	env  []string
}

// Start starts every part and returns when the gateway is ready, or an error (after
// stopping whatever it had started).
func Start(ctx context.Context, c Config) (*Stack, error) {
	c = c.FromEnv()
	s := &Stack{Config: c, BaseURL: "http://" + c.GatewayAddr + "/v1"}
	if err := s.start(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Stack) start(ctx context.Context) error {
	// Before anything is written: a second start beside a running stack must leave its
	// tokens and client files alone.
	busy := []string{s.GatewayAddr, s.ExtprocAddr, s.AccountingAddr, s.MockAddr}
	if s.OIDC {
		busy = append(busy, s.OIDCAddr)
	}
	for _, a := range busy {
		if dialOK(a) {
			return fmt.Errorf("%s is already in use: is another stack running? (override the port with its environment variable)", a)
		}
	}
	if err := os.MkdirAll(s.RunDir, 0o700); err != nil {
		return err
	}
	var err error
	if s.AdminToken, err = writeToken(filepath.Join(s.RunDir, runfiles.AdminTokenFile)); err != nil { // AdminTokenFile
		return err
	}
	if s.ServiceToken, err = writeToken(filepath.Join(s.RunDir, "service-token")); err != nil {
		return err
	}
	if err := keepWebhookKey(filepath.Join(s.RunDir, webhookKeyFile)); err != nil {
		return err
	}
	if err := s.ensurePostgres(ctx); err != nil {
		return err
	}

	gcpKey, err := s.makeCloudSecrets()
	if err != nil {
		return err
	}
	if err := s.spawn(ctx, "mock", s.childEnv("mock"), "mockproviders", "--listen", s.MockAddr, "--gcp-public-key", gcpKey); err != nil {
		return err
	}
	if err := s.waitTCP(ctx, "mock", s.MockAddr); err != nil {
		return err
	}
	s.Accounting = []Replica{{"accounting", s.AccountingAddr, s.AccountingMetricsAdr}}
	for i := 2; i <= s.AccountingReplicas; i++ {
		s.Accounting = append(s.Accounting, Replica{fmt.Sprintf("accounting-%d", i), FreeAddr(), FreeAddr()})
	}
	for _, r := range s.Accounting {
		// The first migrates the database; the others find it migrated.
		if err := s.spawn(ctx, r.Name, s.childEnv("accounting"), "accounting", "--listen", r.Addr, "--metrics-listen", r.MetricsAddr); err != nil {
			return err
		}
		if err := s.waitHTTP(ctx, r.Name, "http://"+r.MetricsAddr+"/readyz"); err != nil {
			return err
		}
	}
	if s.OIDC {
		if err := s.startOIDC(ctx); err != nil {
			return err
		}
	}
	if err := s.spawn(ctx, "console", s.childEnv("console"), "console", "--listen", s.ConsoleAddr); err != nil {
		return err
	}
	if err := s.waitTCP(ctx, "console", s.ConsoleAddr); err != nil {
		return err
	}
	if s.OIDC {
		if err := s.SeedSignIn(ctx); err != nil {
			return fmt.Errorf("seeding the sign-in people: %w", err)
		}
	}
	if err := s.renderCatalog(); err != nil {
		return err
	}
	front := "front" // the first front's part name
	s.Front = "envoy test front"
	if s.EnvoyBin != "" {
		front, s.Front = "envoy", "envoy"
	}
	s.Gates = []Gateway{{Extproc: "extproc", Front: front, BaseURL: s.BaseURL, Addr: s.GatewayAddr, AdminAddr: s.EnvoyAdminAddr,
		ExtprocAddr: s.ExtprocAddr, ExtprocMetricsAddr: s.ExtprocMetricsAddr, envoyConfig: "envoy.yaml", baseID: 7431}}
	for i := 2; i <= s.Gateways; i++ {
		addr := FreeAddr()
		s.Gates = append(s.Gates, Gateway{Extproc: fmt.Sprintf("extproc-%d", i), Front: fmt.Sprintf("%s-%d", front, i),
			BaseURL: "http://" + addr + "/v1", Addr: addr, AdminAddr: FreeAddr(), ExtprocAddr: FreeAddr(), ExtprocMetricsAddr: FreeAddr(),
			envoyConfig: fmt.Sprintf("envoy-%d.yaml", i), baseID: 7431 + i - 1})
	}
	for _, g := range s.Gates {
		if err := s.startGateway(ctx, g); err != nil {
			return err
		}
	}
	return s.writeClientFiles()
}

// startGateway starts one gateway's extproc, then its front, and waits until both are
// ready.
func (s *Stack) startGateway(ctx context.Context, g Gateway) error {
	if err := s.spawn(ctx, g.Extproc, s.gatewayEnv("extproc", g), "extproc"); err != nil {
		return err
	}
	if err := s.waitHTTP(ctx, g.Extproc, "http://"+g.ExtprocMetricsAddr+"/readyz"); err != nil {
		return err
	}
	envoyYAML, err := s.renderEnvoyConfig(g)
	if err != nil {
		return err
	}
	if s.EnvoyBin != "" {
		err = s.spawnPath(ctx, g.Front, s.gatewayEnv("front", g), s.EnvoyBin, "-c", envoyYAML, "--log-level", "warn",
			"--base-id", strconv.Itoa(g.baseID), "--disable-hot-restart")
	} else {
		err = s.spawn(ctx, g.Front, s.gatewayEnv("front", g), "envoyfront", "--config", envoyYAML)
	}
	if err != nil {
		return err
	}
	return s.waitTCP(ctx, g.Front, g.Addr)
}

// writeClientFiles leaves in the run directory what the stack's clients read when no
// flag or variable tells them (internal/runfiles): the base URL for the SDK examples
// and what accounting's clients dial for gatewayctl. Written once the stack is ready,
// so that they name this stack's ports, moved or not.
func (s *Stack) writeClientFiles() error {
	if err := runfiles.Write(s.RunDir, runfiles.BaseURLFile, s.BaseURL); err != nil {
		return err
	}
	return runfiles.Write(s.RunDir, runfiles.AccountingAddrFile, s.AccountingTarget())
}

// DefaultMockAddr is where the demo catalog's mock-providers cluster points.
const DefaultMockAddr = "127.0.0.1:18080"

// RenderCatalog returns a catalog document with the demo's mock provider address
// replaced by mockAddr (the clusters of the catalog carry upstream addresses).
func RenderCatalog(doc []byte, mockAddr string) []byte {
	return []byte(strings.ReplaceAll(string(doc), `"`+DefaultMockAddr+`"`, `"`+mockAddr+`"`))
}

// renderCatalog decides the file extproc serves. Without a chosen catalog it writes
// the demo catalog's working copy (pointed at this stack's mock); a chosen catalog is
// served as it is unless it names the default mock address and the mock listens
// elsewhere, in which case a rendered copy in the run directory is served instead.
func (s *Stack) renderCatalog() error {
	if s.Catalog == "" {
		b, err := os.ReadFile(DemoCatalog(s.Root))
		if err != nil {
			return err
		}
		s.Catalog = filepath.Join(s.RunDir, "catalog.yaml")
		return replaceFile(s.Catalog, RenderCatalog(b, s.MockAddr))
	}
	if s.MockAddr == DefaultMockAddr {
		return nil
	}
	b, err := os.ReadFile(s.Catalog)
	if err != nil {
		return err
	}
	out := RenderCatalog(b, s.MockAddr)
	if string(out) == string(b) {
		return nil
	}
	s.Catalog = filepath.Join(s.RunDir, "catalog.yaml")
	return replaceFile(s.Catalog, out)
}

// DemoCatalog is the tracked demo catalog under the repository root.
func DemoCatalog(root string) string {
	return filepath.Join(root, "deploy", "local", "catalog.yaml")
}

// replaceFile writes b to path as a new file: whatever was there (an edited copy from
// an earlier run, a link) is replaced, not written through.
func replaceFile(path string, b []byte) error {
	tmp := path + ".new"
	_ = os.Remove(tmp)
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// renderEnvoyConfig writes envoy/envoy.yaml into the run directory with the addresses
// of gateway g in place of the defaults.
func (s *Stack) renderEnvoyConfig(g Gateway) (string, error) {
	b, err := os.ReadFile(filepath.Join(s.Root, "envoy", "envoy.yaml"))
	if err != nil {
		return "", err
	}
	text := string(b)
	for def, addr := range map[string]string{
		"127.0.0.1:8080":  g.Addr,
		"127.0.0.1:9901":  g.AdminAddr,
		"127.0.0.1:50051": g.ExtprocAddr,
	} {
		text = replaceSocketAddress(text, def, addr)
	}
	out := filepath.Join(s.RunDir, g.envoyConfig)
	return out, os.WriteFile(out, []byte(text), 0o600)
}

// replaceSocketAddress rewrites "address: H" + "port_value: P" pairs of envoy.yaml, which
// spells socket addresses as two fields, from def to addr.
func replaceSocketAddress(text, def, addr string) string {
	if def == addr {
		return text
	}
	dh, dp, _ := net.SplitHostPort(def)
	nh, np, _ := net.SplitHostPort(addr)
	lines := strings.Split(text, "\n")
	for i := 0; i+1 < len(lines); i++ {
		a := strings.TrimSpace(lines[i])
		if a != "address: "+dh && a != "address: \""+dh+"\"" {
			continue
		}
		// The port follows within the next few lines of the same socket_address.
		for j := i + 1; j < len(lines) && j <= i+3; j++ {
			if strings.TrimSpace(lines[j]) == "port_value: "+dp {
				lines[i] = strings.Replace(lines[i], dh, nh, 1)
				lines[j] = strings.Replace(lines[j], dp, np, 1)
				break
			}
		}
	}
	return strings.Join(lines, "\n")
}

func (s *Stack) spawn(ctx context.Context, name string, env []string, bin string, args ...string) error {
	return s.spawnPath(ctx, name, env, filepath.Join(s.BinDir, bin), args...)
}

func (s *Stack) spawnPath(ctx context.Context, name string, env []string, path string, args ...string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("%s: %w (run make build)", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = s.Root
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), path: path, args: args, env: env}
	go s.copyLines(name, out)
	go func() { p.err = cmd.Wait(); close(p.done) }()
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return nil
}

func (s *Stack) copyLines(name string, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fmt.Fprintf(s.Log, "%-10s | %s\n", name, sc.Text())
	}
}

// Exited returns a channel that receives why, when the first part of the stack exits.
func (s *Stack) Exited() <-chan string {
	ch := make(chan string, 1)
	s.mu.Lock()
	procs := append([]*proc(nil), s.procs...)
	s.mu.Unlock()
	for _, p := range procs {
		go func() {
			<-p.done
			select {
			case ch <- fmt.Sprintf("%s exited: %v", p.name, p.err):
			default:
			}
		}()
	}
	return ch
}

func (s *Stack) waitTCP(ctx context.Context, name, addr string) error {
	return s.waitFor(ctx, name, func() bool { return dialOK(addr) })
}

func (s *Stack) waitHTTP(ctx context.Context, name, u string) error {
	client := &http.Client{Timeout: time.Second}
	return s.waitFor(ctx, name, func() bool {
		resp, err := client.Get(u)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func (s *Stack) waitFor(ctx context.Context, name string, ready func() bool) error {
	s.mu.Lock()
	p := s.procs[len(s.procs)-1]
	s.mu.Unlock()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !ready() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready: %v", name, p.err)
		case <-deadline.C:
			return fmt.Errorf("%s was not ready within 60s", name)
		case <-tick.C:
		}
	}
	return nil
}

var (
	addrMu sync.Mutex
	given  = map[string]bool{}
)

// FreeAddr returns a loopback address nothing listens on, never one it returned before
// in this process: the kernel may hand a port just closed out again, and two parts of
// one stack on the same port fail to start (the e2e harness takes every part's address
// here, and the stack its extra accounting replicas'). It panics when no loopback port
// can be had.
func FreeAddr() string {
	addrMu.Lock()
	defer addrMu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		a := l.Addr().String()
		l.Close()
		if !given[a] {
			given[a] = true
			return a
		}
	}
}

func dialOK(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// stopGrace is how long Stop waits for a part after SIGTERM before killing it: longer
// than extproc's default drain (30 s) plus its settlement bound, so that in-flight
// streams are settled, never cut by the launcher.
const stopGrace = 45 * time.Second

// Stop stops every part in reverse order of start: SIGTERM, then SIGKILL after stopGrace.
func (s *Stack) Stop() {
	s.mu.Lock()
	procs := s.procs
	s.procs = nil
	s.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopGrace):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	if s.pg != nil {
		s.pg.stop()
		s.pg = nil
	}
}

// writeToken writes a fresh random token to path, readable by its owner only. Whatever
// was at path (an earlier run's file, whatever its mode, or a symlink) is removed first
// and the file is created exclusively: os.WriteFile would keep an existing file's mode
// and write through a link.
func writeToken(path string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(b)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		_ = f.Close()
		return "", err
	}
	return tok, f.Close()
}

// webhookKeyFile holds the key accounting seals webhook secrets with. Unlike the
// tokens it is kept across runs: the database keeps the secrets it sealed.
const webhookKeyFile = "webhook-key"

// keepWebhookKey writes a random AES-256 key (base64) to path unless a file is there.
func keepWebhookKey(path string) error {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(b) + "\n"); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// AdminTokenFile is the file holding the stack's admin token: relative to the
// repository root when inside it (.run/admin-token), else absolute.
func (s *Stack) AdminTokenFile() string {
	p := filepath.Join(s.RunDir, runfiles.AdminTokenFile)
	if rel, err := filepath.Rel(s.Root, p); err == nil && filepath.IsLocal(rel) {
		return rel
	}
	return p
}

// secretVars are the environment variables that carry a secret: each child gets only
// the ones it uses (childEnv), whatever the caller's environment holds.
var secretVars = append([]string{
	"DATABASE_URL", "GATEWAY_SERVICE_TOKEN", "GATEWAY_ADMIN_TOKEN", "ACCOUNTING_WEBHOOK_KEY", "ACCOUNTING_WEBHOOK_KEY_FILE",
}, demoenv.Vars()...)

// childEnv is the environment of one part of the stack ("mock", "accounting",
// "extproc" or "front"): the caller's environment without any secret variable, the
// stack's addresses, and only the secrets that part uses. Accounting gets the database
// URL and both tokens; extproc the service token and the demo provider credentials;
// the mock providers and the front none.
func (s *Stack) childEnv(part string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(secretVars, k) {
			env = append(env, kv)
		}
	}
	accounting := s.AccountingTarget() // what the other parts dial
	if part == "accounting" {
		accounting = s.AccountingAddr // where the first replica listens
	}
	env = append(env,
		"ACCOUNTING_ADDR="+accounting,
		"ACCOUNTING_METRICS_ADDR="+s.AccountingMetricsAdr,
		"EXTPROC_ADDR="+s.ExtprocAddr,
		"EXTPROC_METRICS_ADDR="+s.ExtprocMetricsAddr,
		"GATEWAY_CATALOG="+s.Catalog,
		"MOCK_ADDR="+s.MockAddr,
	)
	// The Go runtime's settings (internal/goenv): one P and no deep sleep of its system
	// monitor, unless the caller's environment chose (GOMAXPROCS, GODEBUG's schedtrace),
	// which then reaches every part unchanged. Real Envoy ignores both.
	env = goenv.Apply(env)
	switch part {
	case "accounting":
		env = append(env,
			"DATABASE_URL="+s.DatabaseURL,
			"GATEWAY_SERVICE_TOKEN="+s.ServiceToken,
			"GATEWAY_ADMIN_TOKEN="+s.AdminToken,
			"ACCOUNTING_WEBHOOK_KEY_FILE="+filepath.Join(s.RunDir, webhookKeyFile),
		)
	case "console":
		// Where the admin token is, named on the sign-in page: never the token itself.
		env = append(env, "CONSOLE_ADMIN_TOKEN_FILE="+s.AdminTokenFile())
		if s.OIDC {
			env = append(env, s.oidcConsoleEnv()...)
		}
	case "extproc":
		env = append(env, "GATEWAY_SERVICE_TOKEN="+s.ServiceToken)
		env = append(env, demoenv.Env(s.clouds.serviceAccount, s.clouds.refusedServiceAccount)...)
	}
	return env
}

// gatewayEnv is childEnv(part) for the extproc or front of gateway g: its extproc's
// addresses in place of the first gateway's.
func (s *Stack) gatewayEnv(part string, g Gateway) []string {
	env := s.childEnv(part)
	for i, kv := range env {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "EXTPROC_ADDR":
			env[i] = k + "=" + g.ExtprocAddr
		case "EXTPROC_METRICS_ADDR":
			env[i] = k + "=" + g.ExtprocMetricsAddr
		}
	}
	return env
}

// ensurePostgres checks that the database server in DatabaseURL answers; when it does
// not and the URL points at loopback, it starts a private cluster with the installed
// PostgreSQL server binaries.
func (s *Stack) ensurePostgres(ctx context.Context) error {
	u, err := url.Parse(s.DatabaseURL)
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "5432")
	}
	if dialOK(host) {
		return nil
	}
	if h := u.Hostname(); h != "127.0.0.1" && h != "localhost" && h != "::1" {
		return fmt.Errorf("PostgreSQL at %s does not answer", host)
	}
	pg, err := startPrivatePostgres(ctx, s.RunDir, u.Port(), s.Log)
	if err != nil {
		return fmt.Errorf("no PostgreSQL at %s and none could be started: %w", host, err)
	}
	s.pg = pg
	return s.waitForPG(ctx, host)
}

func (s *Stack) waitForPG(ctx context.Context, host string) error {
	deadline := time.Now().Add(30 * time.Second)
	for !dialOK(host) {
		if time.Now().After(deadline) {
			return errors.New("private PostgreSQL did not start within 30s")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}
