// Package loadtest drives a gateway with an open-loop load: requests leave at a fixed
// arrival rate whatever the answers' latency, and each latency is measured from the
// request's intended send time, so a stall delays every request scheduled behind it and
// shows in the percentiles (no coordinated omission). It also reads a process's CPU time
// and memory from /proc, so a run can say what one request costs each part.
//
// It knows nothing of the gateway's internals: it sends HTTP and reads /proc.
package loadtest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Target is where and what to send (see Sender).
type Target struct {
	URL    string
	Header http.Header
	// Body returns the i-th request's body.
	Body func(i int) []byte
	// Header2 returns extra headers of the i-th request (e.g. a key per request), or nil.
	Header2 func(i int) http.Header
}

// Result is one run at one rate.
type Result struct {
	Sent      int
	OK        int
	Statuses  map[int]int // 0: no answer (transport error)
	Latencies []time.Duration
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of sorted latencies, nearest rank.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(q*float64(len(sorted))+0.999999) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return sorted[rank]
}

// clockTicks is Linux's USER_HZ, the unit of /proc/PID/stat's CPU times: 100 on every
// architecture Go supports on Linux.
const clockTicks = 100

// CPU returns the user+system CPU time a process has used, from /proc/PID/stat.
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields are counted after its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseUint(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad times", pid)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// Memory returns a process's resident set and its peak, from /proc/PID/status.
func Memory(pid int) (rss, peak int64, err error) {
	err = statusNumbers(fmt.Sprintf("/proc/%d/status", pid), func(k string, n int64) {
		switch k {
		case "VmRSS":
			rss = n << 10 // in kB
		case "VmHWM":
			peak = n << 10
		}
	})
	return rss, peak, err
}

// statusNumbers calls fn with each numeric field of a /proc status file ("Name:  value",
// a value in kB without its unit).
func statusNumbers(path string, fn func(key string, n int64)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil {
			fn(k, n)
		}
	}
	return nil
}

// ContextSwitches returns how many times a process's threads have stopped running, by
// waiting (voluntary) or by being preempted (involuntary), summed over the threads it has
// now (/proc/PID/task/*/status): each is a trip through the kernel's scheduler, the cost
// a message between processes pays besides its system calls. A thread that has exited is
// no longer counted.
func ContextSwitches(pid int) (int64, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/[0-9]*", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("/proc/%d/task: no threads", pid)
	}
	var n int64
	for _, task := range tasks {
		// An error: the thread has exited.
		_ = statusNumbers(filepath.Join(task, "status"), func(k string, c int64) {
			if k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches" {
				n += c
			}
		})
	}
	return n, nil
}

// PidsNamed returns the processes whose command name (/proc/PID/comm) is name, such as
// every PostgreSQL backend.
func PidsNamed(name string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil || strings.TrimSpace(string(b)) != name {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(d)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ByPid reads each of pids with read, such as CPU or ContextSwitches (a process that has
// exited is left out).
func ByPid[V any](pids []int, read func(pid int) (V, error)) map[int]V {
	m := make(map[int]V, len(pids))
	for _, pid := range pids {
		if v, err := read(pid); err == nil {
			m[pid] = v
		}
	}
	return m
}

// Used is what the processes of two readings of ByPid (CPU, ContextSwitches) added in
// between: a process that started in between counts from zero.
func Used[V ~int64](before, after map[int]V) V {
	var sum V
	for pid, d := range after {
		sum += d - before[pid]
	}
	return sum
}

// CPUMeter is the CPU time of this process and of every PostgreSQL process of the
// machine at one moment, for a benchmark's CPU per operation (StartCPU, then Report).
type CPUMeter struct {
	self time.Duration
	pg   map[int]time.Duration
}

// PostgresCommEnv names the environment variable with the command name of the
// PostgreSQL processes a CPUMeter counts (default "postgres"): a private server started
// under another name (a symlink to the postgres binary) is measured alone, without the
// other servers of the machine.
const PostgresCommEnv = "LOADTEST_POSTGRES_COMM"

func postgresComm() string {
	if c := os.Getenv(PostgresCommEnv); c != "" {
		return c
	}
	return "postgres"
}

// StartCPU reads the CPU time of this process and of PostgreSQL now.
func StartCPU() CPUMeter {
	self, _ := CPU(os.Getpid())
	return CPUMeter{self: self, pg: ByPid(PidsNamed(postgresComm()), CPU)}
}

// Report reports, through report (a benchmark's ReportMetric), the CPU time this process
// and PostgreSQL used since m per operation, n of them: "go-µs/UNIT" and "pg-µs/UNIT".
func (m CPUMeter) Report(report func(float64, string), n int, unit string) {
	self, _ := CPU(os.Getpid())
	pg := Used(m.pg, ByPid(PidsNamed(postgresComm()), CPU))
	report(float64((self-m.self).Microseconds())/float64(n), "go-µs/"+unit)
	report(float64(pg.Microseconds())/float64(n), "pg-µs/"+unit)
}
