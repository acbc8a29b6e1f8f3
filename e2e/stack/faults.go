package stack

import (
	"context"
	"fmt"
	"syscall"
)

// The fault controls below serve the fault-injection tests: they act on one part of a
// running stack by name ("mock", "accounting", "extproc", "front" or "envoy", and the
// further replicas' and gateways' "accounting-2", "extproc-2", "front-2", …).

// find returns the live process of the part named name.
func (s *Stack) find(name string) (*proc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		if p.name == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("stack: no part named %q", name)
}

// Kill sends SIGKILL to the part's process group (kill -9: no drain, no settlement) and
// waits for it to exit. The part stays down until Restart.
func (s *Stack) Kill(name string) error {
	p, err := s.find(name)
	if err != nil {
		return err
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	return nil
}

// Pause stops the part's processes (SIGSTOP): connections stay open and nothing answers,
// as with a process stalled by the scheduler or a full disk. Resume continues it.
func (s *Stack) Pause(name string) error { return s.signal(name, syscall.SIGSTOP) }

// Resume continues a paused part (SIGCONT).
func (s *Stack) Resume(name string) error { return s.signal(name, syscall.SIGCONT) }

func (s *Stack) signal(name string, sig syscall.Signal) error {
	p, err := s.find(name)
	if err != nil {
		return err
	}
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// Restart starts a part again with the command, arguments and environment it was first
// started with, after killing it if it still runs, and waits until it is ready.
func (s *Stack) Restart(ctx context.Context, name string) error {
	p, err := s.find(name)
	if err != nil {
		return err
	}
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	// The new process takes the old one's place, so that Stop still stops the parts in
	// reverse order of their dependencies.
	s.mu.Lock()
	at := -1
	for i, q := range s.procs {
		if q == p {
			at = i
			s.procs = append(s.procs[:i], s.procs[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	if err := s.spawnPath(ctx, name, p.env, p.path, p.args...); err != nil {
		return err
	}
	ready := s.waitReady(ctx, name)
	s.mu.Lock()
	if n := len(s.procs); at >= 0 && at < n {
		q := s.procs[n-1]
		copy(s.procs[at+1:], s.procs[at:n-1])
		s.procs[at] = q
	}
	s.mu.Unlock()
	return ready
}

// waitReady waits until the part named name (just spawned) is ready: an accounting
// replica's or an extproc's /readyz, the mock's or a front's port.
func (s *Stack) waitReady(ctx context.Context, name string) error {
	for _, r := range s.Accounting {
		if r.Name == name {
			return s.waitHTTP(ctx, name, "http://"+r.MetricsAddr+"/readyz")
		}
	}
	for _, g := range s.Gates {
		switch name {
		case g.Extproc:
			return s.waitHTTP(ctx, name, "http://"+g.ExtprocMetricsAddr+"/readyz")
		case g.Front:
			return s.waitTCP(ctx, name, g.Addr)
		}
	}
	if name == "mock" {
		return s.waitTCP(ctx, name, s.MockAddr)
	}
	return s.waitTCP(ctx, name, s.GatewayAddr)
}

// Pid returns the process id of the part named name (0 when there is none), for tools
// that read its CPU time and memory from /proc.
func (s *Stack) Pid(name string) int {
	p, err := s.find(name)
	if err != nil {
		return 0
	}
	return p.cmd.Process.Pid
}
