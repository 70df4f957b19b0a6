package controller

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-steward/steward/internal/etcd"
	"github.com/etcd-steward/steward/internal/evidence"
	"github.com/etcd-steward/steward/internal/plan"
	"github.com/etcd-steward/steward/internal/resources"
)

// activePeersMetric is etcd's gauge of its peer connections: 1 while the rafthttp stream to the
// remote member is up, 0 once it failed (etcd_network_active_peers{Local,Remote}).
const activePeersMetric = "etcd_network_active_peers"

// peerViewTimeout bounds the read of the leader's metrics.
const peerViewTimeout = 3 * time.Second

// peerViews reads etcd's own view of every member: whether the leader has an active connection to
// it, from the leader's metrics. This is the evidence of a node loss that the operator's own reach
// cannot give (an operator cut off from a member proves nothing about etcd). Nothing is known when
// no leader answers or its metrics cannot be read.
func (r *EtcdClusterReconciler) peerViews(ctx context.Context, o *observed, f *plan.Facts) {
	leader, ok := f.Etcd.Leader()
	if !ok || !f.Etcd.MemberListKnown() {
		return
	}
	var pod *corev1.Pod
	for _, e := range f.Etcd.Endpoints {
		if e.Reachable && e.MemberID == leader {
			pod = o.pods[e.Member]
		}
	}
	if pod == nil || pod.Status.PodIP == "" {
		return
	}
	url := fmt.Sprintf("http://%s:%d/metrics", pod.Status.PodIP, resources.MetricsPort)
	if r.MetricsURL != nil {
		url = r.MetricsURL(pod)
	}
	active, err := readActivePeers(ctx, url, etcd.IDString(leader))
	if err != nil {
		return
	}
	for i := range f.Members {
		m := &f.Members[i]
		l, listed := f.Etcd.Match(m.Name, m.PeerURL)
		if !listed {
			continue
		}
		m.Nodes.Peer = evidence.PeerView{Known: true, Active: l.ID == leader || active[etcd.IDString(l.ID)]}
	}
}

// readActivePeers reads the member's metrics and returns, by remote member ID (hex), whether its
// connection to that peer is active. A peer never connected since the member started has no
// series: it is not active.
func readActivePeers(ctx context.Context, url, local string) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, peerViewTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: %s", resp.Status)
	}
	return parseActivePeers(resp.Body, local)
}

// parseActivePeers reads etcd_network_active_peers samples of the Prometheus text format.
func parseActivePeers(r io.Reader, local string) (map[string]bool, error) {
	out := map[string]bool{}
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, activePeersMetric+"{") {
			continue
		}
		end := strings.LastIndex(line, "}")
		if end < 0 {
			continue
		}
		labels := parseLabels(line[len(activePeersMetric)+1 : end])
		value, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil || !strings.EqualFold(labels["Local"], local) {
			continue
		}
		out[strings.ToLower(labels["Remote"])] = value > 0
	}
	return out, s.Err()
}

// parseLabels splits `a="x",b="y"` (etcd's member IDs need no escaping).
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			out[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	return out
}
