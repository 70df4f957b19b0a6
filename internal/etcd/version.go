package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-steward/steward/internal/failpoint"
)

// Versions is what a member's /version says: its server version, the cluster version (what the
// whole cluster speaks) and, from 3.6, its storage version.
type Versions struct {
	Server  string `json:"etcdserver"`
	Cluster string `json:"etcdcluster"`
	Storage string `json:"storage"`
}

// Versions asks one endpoint (a client URL) its /version over HTTP, with the cluster's client TLS.
// The cluster version is not in any gRPC response; etcd serves /version on the client port.
func (c *Client) Versions(ctx context.Context, endpoint string) (Versions, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+"/version", nil)
	if err != nil {
		return Versions{}, err
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: c.tls}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		return Versions{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return Versions{}, fmt.Errorf("GET %s/version: %s", endpoint, resp.Status)
	}
	var v Versions
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return Versions{}, fmt.Errorf("GET %s/version: %w", endpoint, err)
	}
	return v, nil
}

// Downgrade runs one of etcd's downgrade actions (validate, enable, cancel) for the target
// version's major.minor, and returns the cluster version etcd answered with.
func (c *Client) Downgrade(ctx context.Context, action clientv3.DowngradeAction, minor string) (string, error) {
	if action == clientv3.DowngradeEnable {
		failpoint.Hit(ctx, failpoint.BeforeDowngradeEnable)
	}
	call, cancel := withTimeout(ctx)
	defer cancel()
	resp, err := c.cluster().Downgrade(call, action, minor)
	if err != nil {
		return "", err
	}
	if action == clientv3.DowngradeEnable {
		failpoint.Hit(ctx, failpoint.AfterDowngradeEnable)
	}
	return resp.Version, nil
}
