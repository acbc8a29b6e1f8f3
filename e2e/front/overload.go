package front

import (
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	overloadv3 "github.com/envoyproxy/go-control-plane/envoy/config/overload/v3"
	connsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	heapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
)

// The overload manager names the front emulates.
const (
	monitorConnections = "envoy.resource_monitors.global_downstream_max_connections"
	monitorHeap        = "envoy.resource_monitors.fixed_heap"
	actionShrinkHeap   = "envoy.overload_actions.shrink_heap"
	actionStopRequests = "envoy.overload_actions.stop_accepting_requests"
	// detailsOverload is the details of the 503 stop_accepting_requests answers
	// (StreamInfo::ResponseCodeDetails::Overload, sent from
	// conn_manager_impl.cc ActiveStream::decodeHeaders before any filter runs).
	detailsOverload = "overload"
)

// Overload is the bootstrap's overload manager as far as the front emulates it: the
// proactive downstream-connections monitor, and the fixed heap monitor (measured on the
// front's own Go heap) with its shrink_heap and stop_accepting_requests actions on
// threshold triggers.
type Overload struct {
	Refresh time.Duration
	// MaxConnections is global_downstream_max_connections (0: no limit).
	MaxConnections int64
	// MaxHeap is fixed_heap's max_heap_size_bytes (0: no heap monitor).
	MaxHeap uint64
	// ShrinkAt and StopRequestsAt are the actions' thresholds on the heap pressure (0: the
	// action is not configured).
	ShrinkAt, StopRequestsAt float64
}

func overloadFrom(om *overloadv3.OverloadManager) (Overload, error) {
	var o Overload
	if om == nil {
		return o, nil
	}
	o.Refresh = om.GetRefreshInterval().AsDuration()
	if o.Refresh <= 0 {
		o.Refresh = time.Second // Envoy's default refresh_interval
	}
	for _, m := range om.GetResourceMonitors() {
		cfg, err := m.GetTypedConfig().UnmarshalNew()
		if err != nil {
			return o, fmt.Errorf("resource monitor %s: %v", m.GetName(), err)
		}
		switch c := cfg.(type) {
		case *connsv3.DownstreamConnectionsConfig:
			if m.GetName() != monitorConnections || c.GetMaxActiveDownstreamConnections() <= 0 {
				return o, fmt.Errorf("resource monitor %s: only %s with a positive maximum is emulated", m.GetName(), monitorConnections)
			}
			o.MaxConnections = c.GetMaxActiveDownstreamConnections()
		case *heapv3.FixedHeapConfig:
			if m.GetName() != monitorHeap || c.GetMaxHeapSizeBytes() == 0 {
				return o, fmt.Errorf("resource monitor %s: only %s with a positive size is emulated", m.GetName(), monitorHeap)
			}
			o.MaxHeap = c.GetMaxHeapSizeBytes()
		default:
			return o, fmt.Errorf("resource monitor %s is not emulated", m.GetName())
		}
	}
	for _, a := range om.GetActions() {
		if len(a.GetTriggers()) != 1 {
			return o, fmt.Errorf("action %s: exactly one trigger is emulated", a.GetName())
		}
		tr := a.GetTriggers()[0]
		if tr.GetName() != monitorHeap || o.MaxHeap == 0 || tr.GetThreshold() == nil {
			return o, fmt.Errorf("action %s: only a threshold trigger on %s is emulated", a.GetName(), monitorHeap)
		}
		v := tr.GetThreshold().GetValue()
		switch a.GetName() {
		case actionShrinkHeap:
			o.ShrinkAt = v
		case actionStopRequests:
			o.StopRequestsAt = v
		default:
			return o, fmt.Errorf("action %s is not emulated", a.GetName())
		}
	}
	return o, nil
}

// heapWatch samples the heap every refresh interval, as Envoy's overload manager does,
// and sets the actions' states.
type heapWatch struct {
	o            Overload
	stopRequests atomic.Bool
	done         chan struct{}
	once         sync.Once
}

func startHeapWatch(o Overload) *heapWatch {
	w := &heapWatch{o: o, done: make(chan struct{})}
	if o.MaxHeap == 0 {
		return w
	}
	w.sample()
	go func() {
		t := time.NewTicker(o.Refresh)
		defer t.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-t.C:
				w.sample()
			}
		}
	}()
	return w
}

// heapInUse is the Go heap's live and not-yet-swept objects: what fixed_heap reads from
// tcmalloc as the heap in use.
func heapInUse() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

func (w *heapWatch) sample() {
	pressure := float64(heapInUse()) / float64(w.o.MaxHeap)
	w.stopRequests.Store(w.o.StopRequestsAt > 0 && pressure >= w.o.StopRequestsAt)
	if w.o.ShrinkAt > 0 && pressure >= w.o.ShrinkAt {
		debug.FreeOSMemory()
	}
}

func (w *heapWatch) close() { w.once.Do(func() { close(w.done) }) }

// limitListener refuses connections past max by closing them at accept, as Envoy's
// listener does when global_downstream_max_connections is reached
// (active_tcp_listener.cc, ActiveTcpListener::onAcceptWorker: the socket is closed and
// downstream_cx_overload_reject counted).
type limitListener struct {
	net.Listener
	max    int64
	active atomic.Int64
}

func limitConnections(ln net.Listener, max int64) net.Listener {
	if max <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, max: max}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.active.Add(1) > l.max {
			l.active.Add(-1)
			_ = c.Close()
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

type countedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.active.Add(-1) })
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
