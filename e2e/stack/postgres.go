package stack

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
)

// privatePostgres is a throwaway PostgreSQL cluster for machines that have the server
// binaries installed but no server running. It trusts local connections and listens on
// loopback only.
type privatePostgres struct {
	pgctl string
	data  string
	asPG  bool
	log   io.Writer
}

func findPGBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) == 0 {
		return "", fmt.Errorf("%s not found (install the PostgreSQL server)", name)
	}
	sort.Strings(matches)
	return matches[len(matches)-1], nil
}

func startPrivatePostgres(ctx context.Context, runDir, port string, log io.Writer) (*privatePostgres, error) {
	if port == "" {
		port = "5432"
	}
	initdb, err := findPGBin("initdb")
	if err != nil {
		return nil, err
	}
	pgctl, err := findPGBin("pg_ctl")
	if err != nil {
		return nil, err
	}
	p := &privatePostgres{pgctl: pgctl, log: log}
	// PostgreSQL refuses to run as root: run it as the postgres user, with its data in a
	// directory that user owns.
	p.data, _ = filepath.Abs(filepath.Join(runDir, "pgdata"))
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			return nil, fmt.Errorf("running as root and no postgres user to run PostgreSQL as")
		}
		p.asPG = true
		p.data = "/tmp/gateway-localstack-pgdata"
	}
	if _, err := os.Stat(filepath.Join(p.data, "PG_VERSION")); err != nil {
		if err := os.MkdirAll(p.data, 0o700); err != nil {
			return nil, err
		}
		if p.asPG {
			if err := exec.CommandContext(ctx, "chown", "postgres:postgres", p.data).Run(); err != nil {
				return nil, err
			}
		}
		if err := p.run(ctx, initdb, "-D", p.data, "-U", "postgres", "--auth=trust", "-E", "UTF8"); err != nil {
			return nil, fmt.Errorf("initdb: %w", err)
		}
	}
	fmt.Fprintf(log, "%-10s | starting a private PostgreSQL cluster in %s on 127.0.0.1:%s\n", "postgres", p.data, port)
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%s -c unix_socket_directories=%s", port, p.data)
	if err := p.run(ctx, pgctl, "-D", p.data, "-o", opts, "-l", filepath.Join(p.data, "server.log"), "-w", "start"); err != nil {
		return nil, fmt.Errorf("pg_ctl start: %w", err)
	}
	return p, nil
}

func (p *privatePostgres) run(ctx context.Context, bin string, args ...string) error {
	var cmd *exec.Cmd
	if p.asPG {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", bin}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, bin, args...)
	}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	return cmd.Run()
}

func (p *privatePostgres) stop() {
	_ = p.run(context.Background(), p.pgctl, "-D", p.data, "-m", "fast", "-w", "stop")
}
