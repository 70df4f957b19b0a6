package kubectletcd

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/etcdtest"
)

// realCluster starts three real etcd processes (plaintext) and an EtcdCluster "m" whose status
// names them m0..m2 with the roles etcd reports; the fake forwarder maps each to its address.
func realCluster(t *testing.T) (*harness, *etcdtest.Cluster) {
	t.Helper()
	if _, err := etcdtest.Binary(); err != nil {
		t.Skip(err)
	}
	c := etcdtest.Start(t, 3)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.ClientURLs(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "db"},
		Spec: stewardv1.EtcdClusterSpec{TLS: &stewardv1.TLSSpec{Enabled: ptr.To(false)}}}
	fwd := fakeForward{}
	for _, m := range c.Members {
		fwd[m.Name] = strings.TrimPrefix(m.ClientURL, "http://")
		st, err := cli.Status(context.Background(), m.ClientURL)
		if err != nil {
			t.Fatal(err)
		}
		role := stewardv1.RoleFollower
		if st.Leader == st.Header.MemberId {
			role = stewardv1.RoleLeader
		}
		ec.Status.Members = append(ec.Status.Members, stewardv1.MemberStatus{Name: m.Name, Role: role, Ready: true,
			ID: strconv.FormatUint(st.Header.MemberId, 16)})
	}
	h := newHarness(t, nil, ec)
	h.env.Forward = fwd
	return h, c
}

func etcdLeader(t *testing.T, c *etcdtest.Cluster) string {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.ClientURLs(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	for _, m := range c.Members {
		st, err := cli.Status(context.Background(), m.ClientURL)
		if err == nil && st.Leader == st.Header.MemberId {
			return m.Name
		}
	}
	t.Fatal("no leader")
	return ""
}

func TestMoveLeaderAgainstEtcd(t *testing.T) {
	h, c := realCluster(t)
	before := etcdLeader(t, c)
	target := "m0"
	if before == "m0" {
		target = "m2"
	}
	if err := h.run(t, "move-leader", "m", target); err != nil {
		t.Fatal(err)
	}
	if after := etcdLeader(t, c); after != target {
		t.Fatalf("leader %s after move-leader to %s", after, target)
	}
	if !strings.Contains(h.out.String(), "leadership moved from "+before+" to "+target) {
		t.Fatalf("output: %s", h.out)
	}
	// Status is stale now (it still names the old leader): the plugin follows etcd's answer.
	h.out.Reset()
	if err := h.run(t, "move-leader", "m"); err != nil {
		t.Fatal(err)
	}
	if after := etcdLeader(t, c); after == target {
		t.Fatalf("leader still %s after a move to the first ready follower", after)
	}
	if err := h.run(t, "move-leader", "m", "m9"); err == nil || !strings.Contains(err.Error(), "not a voting member") {
		t.Fatalf("move-leader to m9: %v", err)
	}
}

func TestStatusLiveAndEtcdctlAgainstEtcd(t *testing.T) {
	h, _ := realCluster(t)
	if err := h.run(t, "status", "m", "--etcd", "-o", "json"); err != nil {
		t.Fatal(err)
	}
	var s Status
	if err := json.Unmarshal(h.out.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Live) != 3 {
		t.Fatalf("live: %+v", s.Live)
	}
	for _, l := range s.Live {
		if l.Error != "" || l.Term == 0 || l.Index == 0 || l.Revision == 0 || !strings.HasPrefix(l.Leader, "m") {
			t.Errorf("live %+v", l)
		}
	}
	bin, err := etcdtest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	etcdctl := filepath.Join(filepath.Dir(bin), "etcdctl")
	if _, err := os.Stat(etcdctl); err != nil {
		t.Skip("no etcdctl next to etcd:", err)
	}
	h.out.Reset()
	if err := h.run(t, "etcdctl", "m", "--all", "--etcdctl", etcdctl, "--", "endpoint", "status", "-w", "json"); err != nil {
		t.Fatal(err)
	}
	var eps []map[string]any
	if err := json.Unmarshal(h.out.Bytes(), &eps); err != nil || len(eps) != 3 {
		t.Fatalf("etcdctl endpoint status: %v %s", err, h.out)
	}
	// etcdctl's failures come back as its exit code.
	var code exitCode
	if err := h.run(t, "etcdctl", "m", "--etcdctl", etcdctl, "--", "get"); !errors.As(err, &code) || code == 0 {
		t.Fatalf("etcdctl get without a key: %v, want etcdctl's exit status", err)
	}
}
