// Package etcd talks to the members of one etcd cluster: membership changes, per-endpoint status,
// leadership transfer and the linearizable read the recovery gate needs. Every call has a timeout;
// clients are cached per cluster and closed when the cluster goes.
package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/connectivity"

	"github.com/etcd-steward/steward/internal/failpoint"
)

// CallTimeout bounds every etcd call, so one dead member cannot stall a reconcile.
const CallTimeout = 5 * time.Second

// Member is one entry of the live member list, matched to Steward's members by peer URL.
type Member struct {
	ID         uint64
	Name       string
	PeerURLs   []string
	ClientURLs []string
	IsLearner  bool
}

// IDString is the member ID as etcd prints it (hex), as recorded in status.
func IDString(id uint64) string { return fmt.Sprintf("%x", id) }

// EndpointStatus is what one member says about itself.
type EndpointStatus struct {
	Endpoint     string
	MemberID     uint64
	ClusterID    uint64
	Leader       uint64
	RaftIndex    uint64
	AppliedIndex uint64
	RaftTerm     uint64
	Version      string
	// StorageVersion is the storage version of the member's data (etcd 3.6+, once the cluster
	// version reached 3.6: "3.6.0"); "" when it reports none.
	StorageVersion string
	// DowngradeEnabled and DowngradeTarget are the cluster's downgrade as this member reports it
	// (etcd 3.6+).
	DowngradeEnabled bool
	DowngradeTarget  string
	IsLearner        bool
	// DBSize is the backend file's size, DBSizeInUse the part holding live data; DBSizeQuota the
	// member's quota (etcd 3.6 and later report it; 0 before).
	DBSize, DBSizeInUse, DBSizeQuota int64
	// Revision is the store's revision this member had applied (from the response header).
	Revision int64
	// Errors are the errors the member reported other than alarms ("etcdserver: no leader").
	Errors []string
	// Alarms are the cluster's active alarms as this member knows them.
	Alarms []Alarm
	Err    error
}

// Healthy is true when the endpoint answered, knows a leader and reports no error. An alarm is not
// one: a member under NOSPACE serves reads, deletes and maintenance; alarms are their own fact.
func (s EndpointStatus) Healthy() bool { return s.Err == nil && len(s.Errors) == 0 && s.Leader != 0 }

// Client is a client for one cluster. Endpoints are the voters' client URLs; a learner's endpoint
// is used only for per-endpoint calls (status), since learners refuse most requests.
type Client struct {
	c *clientv3.Client

	// one holds a client per member endpoint, for calls that must reach one member (its status,
	// a read through it, MoveLeader to the leader). Kept across reconciles: dialling every member
	// anew every few seconds is what a steady cluster would otherwise cost.
	mu  sync.Mutex
	one map[string]*clientv3.Client
	tls *tls.Config
}

// New connects to the given endpoints, with TLS when creds is not nil. It does not block on
// connection: calls fail fast instead.
func New(endpoints []string, creds *Credentials) (*Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("no etcd endpoints")
	}
	var tc *tls.Config
	if creds != nil {
		tc = creds.Config()
	}
	c, err := clientv3.New(config(endpoints, tc, zap.NewNop()))
	if err != nil {
		return nil, err
	}
	return &Client{c: c, one: map[string]*clientv3.Client{}, tls: tc}, nil
}

func config(endpoints []string, tc *tls.Config, logger *zap.Logger) clientv3.Config {
	return clientv3.Config{
		Endpoints:            endpoints,
		TLS:                  tc,
		DialTimeout:          CallTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: CallTimeout,
		AutoSyncInterval:     0, // Steward sets endpoints from its own view of the voters.
		Logger:               logger,
	}
}

// Close releases connections.
func (c *Client) Close() error {
	c.Retain(nil)
	return c.c.Close()
}

// endpoint returns the cached client of one member endpoint. A cached connection that failed
// is woken up first: gRPC backs off its reconnects up to two minutes, so after a member was down
// for a while (a crash loop, a long restart) every status read would fail for up to two minutes
// after it came back, and status and the recovery gate would call it down. Steward's reads come
// every few seconds anyway; each one tries the member for real.
func (c *Client) endpoint(ep string) (*clientv3.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if one, ok := c.one[ep]; ok {
		if conn := one.ActiveConnection(); conn.GetState() == connectivity.TransientFailure {
			conn.ResetConnectBackoff()
		}
		return one, nil
	}
	one, err := clientv3.New(config([]string{ep}, c.tls, c.c.GetLogger()))
	if err != nil {
		return nil, err
	}
	c.one[ep] = one
	return one, nil
}

// cluster returns the client of the cluster-wide calls (member list, add, promote, remove, alarms,
// auth, compaction, downgrade), its connection woken up first when it failed, for the reason
// endpoint gives: each call tries the cluster for real instead of waiting out gRPC's backoff.
func (c *Client) cluster() *clientv3.Client {
	if conn := c.c.ActiveConnection(); conn.GetState() == connectivity.TransientFailure {
		conn.ResetConnectBackoff()
	}
	return c.c
}

// Retain closes the per-member clients of endpoints not listed (a Pod that went, or got a new IP).
func (c *Client) Retain(endpoints []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ep, one := range c.one {
		if !slices.Contains(endpoints, ep) {
			_ = one.Close()
			delete(c.one, ep)
		}
	}
}

// SetEndpoints replaces the endpoints used for cluster-wide calls.
func (c *Client) SetEndpoints(endpoints []string) {
	if !slices.Equal(sortedCopy(c.c.Endpoints()), sortedCopy(endpoints)) {
		c.c.SetEndpoints(endpoints...)
	}
}

// Endpoints are the current endpoints.
func (c *Client) Endpoints() []string { return c.c.Endpoints() }

func sortedCopy(s []string) []string { c := slices.Clone(s); slices.Sort(c); return c }

func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, CallTimeout)
}

// MemberList is the live membership, read linearizably so it reflects every committed change, and
// the cluster's ID.
func (c *Client) MemberList(ctx context.Context) ([]Member, uint64, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	resp, err := c.cluster().MemberList(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("member list: %w", err)
	}
	return convertMembers(resp.Members), resp.Header.ClusterId, nil
}

func convertMembers(ms []*etcdserverpb.Member) []Member {
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner})
	}
	return out
}

// FindByPeerURL returns the member whose peer URLs include url. Matching by URL, not by a cached
// ID, is what makes a half-done MemberAdd recognisable after an operator restart.
func FindByPeerURL(members []Member, url string) (Member, bool) {
	for _, m := range members {
		if slices.Contains(m.PeerURLs, url) {
			return m, true
		}
	}
	return Member{}, false
}

// ErrClusterNotSettled is returned by AddLearner while etcd refuses membership changes because the
// leader has not been connected to every voter for long enough (etcd's strict reconfig check
// wants five seconds); retry later.
var ErrClusterNotSettled = errors.New("etcd refuses membership changes until every voter has been connected for a while")

// AddLearner adds a member as a learner (a non-voting member that catches up before it counts).
func (c *Client) AddLearner(ctx context.Context, peerURL string) (Member, []Member, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	failpoint.Hit(ctx, failpoint.BeforeMemberAdd)
	resp, err := c.cluster().MemberAddAsLearner(ctx, []string{peerURL})
	if errors.Is(err, rpctypes.ErrUnhealthy) {
		return Member{}, nil, ErrClusterNotSettled
	}
	if err != nil {
		return Member{}, nil, fmt.Errorf("adding learner %s: %w", peerURL, err)
	}
	failpoint.Hit(ctx, failpoint.AfterMemberAdd)
	added := convertMembers([]*etcdserverpb.Member{resp.Member})[0]
	return added, convertMembers(resp.Members), nil
}

// ErrLearnerNotReady is returned by Promote while the learner is still catching up; retry later.
var ErrLearnerNotReady = errors.New("learner is not yet in sync with the leader")

// Promote makes a learner a voter.
func (c *Client) Promote(ctx context.Context, id uint64) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	failpoint.Hit(ctx, failpoint.BeforeMemberPromote)
	_, err := c.cluster().MemberPromote(ctx, id)
	if errors.Is(err, rpctypes.ErrMemberLearnerNotReady) {
		return ErrLearnerNotReady
	}
	if err != nil {
		return fmt.Errorf("promoting %s: %w", IDString(id), err)
	}
	failpoint.Hit(ctx, failpoint.AfterMemberPromote)
	return nil
}

// Remove removes a member. A member already gone counts as removed, so the call can be repeated.
func (c *Client) Remove(ctx context.Context, id uint64) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	failpoint.Hit(ctx, failpoint.BeforeMemberRemove)
	_, err := c.cluster().MemberRemove(ctx, id)
	if err == nil || errors.Is(err, rpctypes.ErrMemberNotFound) {
		failpoint.Hit(ctx, failpoint.AfterMemberRemove)
		return nil
	}
	// A removal is done when the member is gone, whatever the answer said: the request may have
	// reached the member being removed, which stops once it applies its own removal ("server
	// stopped"), or a repeated call may meet etcd's strict reconfig check before its lookup.
	if members, _, lerr := c.MemberList(ctx); lerr == nil && !slices.ContainsFunc(members, func(m Member) bool { return m.ID == id }) {
		failpoint.Hit(ctx, failpoint.AfterMemberRemove)
		return nil
	}
	if errors.Is(err, rpctypes.ErrUnhealthy) {
		return ErrClusterNotSettled
	}
	return fmt.Errorf("removing %s: %w", IDString(id), err)
}
