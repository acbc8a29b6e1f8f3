package front

import (
	"net/http"
	"sync"
	"sync/atomic"
)

// upstream is one cluster as the front runs it: its settings, its connection pool and
// its circuit-breaker count. A cluster that CDS changes gets a new upstream (Envoy builds
// a new cluster; requests in flight finish on the old one), one CDS leaves unchanged
// keeps its upstream (Envoy skips a cluster whose config hash did not change:
// ClusterManagerImpl::addOrUpdateCluster).
type upstream struct {
	cfg *Cluster
	// transports are the connection pools per transport socket: [0] the cluster's
	// transport_socket, [i+1] transport_socket_matches[i] (Host.socket).
	transports []*http.Transport
	inFlight   atomic.Int64
	// retries counts the outstanding retries (the max_retries circuit breaker).
	retries atomic.Int64
	lb      *balancer
}

func newUpstream(c *Cluster) *upstream {
	u := &upstream{cfg: c, transports: []*http.Transport{newTransport(c, c.TLS)}, lb: newBalancer(c.Endpoints, nil)}
	for _, m := range c.SocketMatches {
		u.transports = append(u.transports, newTransport(c, m.TLS))
	}
	return u
}

// closeIdle closes the idle connections of every transport socket.
func (u *upstream) closeIdle() {
	for _, t := range u.transports {
		t.CloseIdleConnections()
	}
}

// acquireRetry takes one of the cluster's max_retries slots; false on overflow
// (ResourceManager retries().canCreate()).
func (u *upstream) acquireRetry() bool {
	if u.retries.Add(1) > int64(u.cfg.MaxRetries) {
		u.retries.Add(-1)
		return false
	}
	return true
}

func (u *upstream) releaseRetry() { u.retries.Add(-1) }

// acquire takes one of the cluster's circuit-breaker slots; false on overflow (Envoy's
// pool overflow: the request is not sent).
func (u *upstream) acquire() bool {
	if u.inFlight.Add(1) > int64(u.cfg.MaxInFlight) {
		u.inFlight.Add(-1)
		return false
	}
	return true
}

func (u *upstream) release() { u.inFlight.Add(-1) }

// clusterTable is the front's clusters: the bootstrap's static ones and those CDS
// delivered. Readers take a snapshot map; updates replace it whole.
type clusterTable struct {
	cur atomic.Pointer[map[string]*upstream]
	mu  sync.Mutex // serializes updates
	// static names the bootstrap's clusters, which CDS never replaces or removes.
	static map[string]bool
}

func newClusterTable(static map[string]*Cluster) *clusterTable {
	t := &clusterTable{static: map[string]bool{}}
	m := map[string]*upstream{}
	for name, c := range static {
		m[name] = newUpstream(c)
		t.static[name] = true
	}
	t.cur.Store(&m)
	return t
}

// staticConfigs returns the configurations of the static clusters.
func (t *clusterTable) staticConfigs() map[string]*Cluster {
	out := map[string]*Cluster{}
	for name, u := range *t.cur.Load() {
		if t.static[name] {
			out[name] = u.cfg
		}
	}
	return out
}

// get returns the named cluster, nil when there is none.
func (t *clusterTable) get(name string) *upstream { return (*t.cur.Load())[name] }

// replaceDynamic makes clusters the whole set of CDS clusters (state of the world):
// new and changed ones are built, unchanged ones kept, the others removed (CdsApiImpl:
// a cluster absent from an update is removed; requests on it finish). It returns the
// names it added or changed and those it removed.
func (t *clusterTable) replaceDynamic(clusters []*Cluster) (changed, removed []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.cur.Load()
	next := make(map[string]*upstream, len(old))
	for name, u := range old {
		if t.static[name] {
			next[name] = u
		}
	}
	for _, c := range clusters {
		if u := old[c.Name]; u != nil && !t.static[c.Name] && u.cfg.source == c.source {
			next[c.Name] = u
			continue
		}
		next[c.Name] = newUpstream(c)
		changed = append(changed, c.Name)
	}
	for name, u := range old {
		if next[name] != u {
			// Replaced or removed: no new request uses it; idle connections go now, busy
			// ones when their request ends.
			u.closeIdle()
			if next[name] == nil {
				removed = append(removed, name)
			}
		}
	}
	t.cur.Store(&next)
	return changed, removed
}

func (t *clusterTable) closeIdle() {
	for _, u := range *t.cur.Load() {
		u.closeIdle()
	}
}
