package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EtcdClientPort is where member Pods serve clients: https on operator clusters with TLS
// (the default), http on plaintext ones and on the framework's own EtcdSet.
const EtcdClientPort = 2379

// PodClientURL is the client URL of a member Pod by Pod IP: https when secure. The test
// process runs on the node and routes to Pod IPs directly (the CNI bridge), so no
// port-forward. No member certificate names a Pod IP: dial it with a chain-only
// config (ClientTLS.Config("")).
func PodClientURL(p *corev1.Pod, secure bool) string {
	scheme := "http"
	if secure {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s:%d", scheme, p.Status.PodIP, EtcdClientPort)
}

// ServiceDialer dials host:port after resolving the host with the cluster's DNS server (dnsIP), as
// an application in a Pod resolves a Service name: "<svc>.<ns>.svc" through the search path, that
// is with the cluster domain ($STEWARD_E2E_CLUSTER_DOMAIN, default cluster.local) appended. Nil
// when dnsIP is empty.
func ServiceDialer(dnsIP string) func(ctx context.Context, addr string) (net.Conn, error) {
	domain := os.Getenv("STEWARD_E2E_CLUSTER_DOMAIN")
	if domain == "" {
		domain = "cluster.local"
	}
	if dnsIP == "" {
		return nil
	}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort(dnsIP, "53"))
	}}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if strings.HasSuffix(host, ".svc") {
			host += "." + domain + "."
		}
		ips, err := r.LookupHost(ctx, host)
		if err != nil {
			return nil, err
		}
		return (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(ips[0], port))
	}
}

// NewServiceClient connects to a Service by name (https://<svc>.<ns>.svc:2379), resolving it with
// the cluster DNS at dnsIP: the documented client path.
func NewServiceClient(endpoint, dnsIP string, tc *tls.Config) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:            []string{endpoint},
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		TLS:                  tc,
		Logger:               zap.NewNop(),
		DialOptions:          []grpc.DialOption{grpc.WithContextDialer(ServiceDialer(dnsIP))},
	})
}

// NewEtcdClient connects to endpoints with short timeouts suited to tests that kill
// members: a dead endpoint must cost a fraction of a second, not the default 5 s+.
// The client's own logging is off: retries during disruptions are expected. tc nil
// means plaintext; otherwise the endpoints must be https URLs.
func NewEtcdClient(endpoints []string, tc *tls.Config) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("no etcd endpoints")
	}
	return clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		TLS:                  tc,
		Logger:               zap.NewNop(),
	})
}

// EtcdClient connects to the given member Pods by Pod IP (over TLS unless tc is nil;
// give it a chain-only config, see PodClientURL) and closes the client when the test ends.
func (f *Framework) EtcdClient(t testing.TB, tc *tls.Config, pods ...*corev1.Pod) *clientv3.Client {
	t.Helper()
	var eps []string
	for _, p := range pods {
		if p.Status.PodIP != "" {
			eps = append(eps, PodClientURL(p, tc != nil))
		}
	}
	c, err := NewEtcdClient(eps, tc)
	if err != nil {
		t.Fatalf("etcd client for %v: %v", eps, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Pods lists the Pods of ns matching labels, sorted by name (client lists are).
func (f *Framework) Pods(ctx context.Context, ns string, labels map[string]string) ([]*corev1.Pod, error) {
	var list corev1.PodList
	if err := f.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// PodReady reports whether p is Ready and not being deleted.
func PodReady(p *corev1.Pod) bool {
	if p == nil || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodsReady is a Condition: exactly n Pods match labels and all are Ready.
func (f *Framework) PodsReady(ns string, labels map[string]string, n int) Condition {
	return func(ctx context.Context) (bool, error) {
		pods, err := f.Pods(ctx, ns, labels)
		if err != nil {
			return false, err
		}
		ready := 0
		for _, p := range pods {
			if PodReady(p) {
				ready++
			}
		}
		if ready != n || len(pods) != n {
			return false, fmt.Errorf("%d/%d pods ready, want %d", ready, len(pods), n)
		}
		return true, nil
	}
}

// EtcdHealthy is a Condition: a linearizable read through every endpoint succeeds
// (Pod readiness alone does not prove a member serves). tc nil means plaintext.
func EtcdHealthy(endpoints []string, tc *tls.Config) Condition {
	return func(ctx context.Context) (bool, error) {
		for _, ep := range endpoints {
			c, err := NewEtcdClient([]string{ep}, tc)
			if err != nil {
				return false, err
			}
			_, err = c.Get(ctx, "health-probe")
			_ = c.Close()
			if err != nil {
				return false, fmt.Errorf("%s: %w", ep, err)
			}
		}
		return true, nil
	}
}
