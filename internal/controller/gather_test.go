package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/etcd"
	"github.com/etcd-steward/steward/internal/etcdtest"
	"github.com/etcd-steward/steward/internal/ports"
)

// etcdFacts against a real one-member etcd and an address nothing listens on: cluster-wide calls go
// to the Running members (to anyone with an address before one is), every address is asked for its
// status, and whatever fails is a fact, not an error.
func TestEtcdFacts(t *testing.T) {
	cl := etcdtest.Start(t, 1)
	free, err := ports.Free(1)
	if err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf("http://127.0.0.1:%d", free[0])
	live := cl.Members[0].ClientURL
	r := &EtcdClusterReconciler{Etcd: etcd.NewPool()}
	t.Cleanup(func() {
		for _, k := range []string{"running", "bootstrap", "down", "adopting"} {
			r.Etcd.Forget(k)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster := func(uid string) *stewardv1.EtcdCluster {
		return &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: types.UID(uid)},
			Spec: stewardv1.EtcdClusterSpec{TLS: &stewardv1.TLSSpec{Enabled: ptr.To(false)}}}
	}
	member := func(name string, phase stewardv1.MemberPhase) *stewardv1.EtcdMember {
		m := &stewardv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: name}}
		m.Status.Phase = phase
		return m
	}

	t.Run("no address yet", func(t *testing.T) {
		o := &observed{members: map[string]*stewardv1.EtcdMember{"c-0": member("c-0", "")}}
		f := r.etcdFacts(ctx, cluster("none"), o)
		if f.MemberListKnown() || o.client != nil || len(f.Endpoints) != 0 {
			t.Errorf("facts %+v, client %v", f, o.client)
		}
	})

	t.Run("a Running member and one that does not answer", func(t *testing.T) {
		// c-1 is not Running (joining, say): the member list is read from c-0 alone.
		o := &observed{members: map[string]*stewardv1.EtcdMember{"c-0": member("c-0", stewardv1.MemberRunning),
			"c-1": member("c-1", stewardv1.MemberPending)}, endpoints: map[string]string{"c-1": dead, "c-0": live}}
		f := r.etcdFacts(ctx, cluster("running"), o)
		if !f.MemberListKnown() || len(f.Members) != 1 || f.Members[0].Name != cl.Members[0].Name ||
			len(f.Members[0].PeerURLs) != 1 || f.Members[0].PeerURLs[0] != cl.Members[0].PeerURL || f.Members[0].IsLearner {
			t.Fatalf("member list %+v (%s)", f.Members, f.MemberListErr)
		}
		if o.client == nil || o.clusterID == "" {
			t.Errorf("client %v, cluster ID %q", o.client, o.clusterID)
		}
		if len(f.Endpoints) != 2 || f.Endpoints[0].Member != "c-0" || f.Endpoints[1].Member != "c-1" {
			t.Fatalf("endpoints %+v, want c-0 and c-1 in order", f.Endpoints)
		}
		up, down := f.Endpoints[0], f.Endpoints[1]
		if !up.Reachable || up.Err != "" || !up.Healthy || !up.ReadOK || up.MemberID != f.Members[0].ID || up.LeaderID != up.MemberID ||
			up.Version == "" || up.DBSize == 0 || up.Revision == 0 || up.RaftIndex == 0 || up.AppliedIndex == 0 {
			t.Errorf("the live endpoint: %+v", up)
		}
		if etcd.IDString(up.ClusterID) != o.clusterID {
			t.Errorf("endpoint's cluster ID %x, member list's %s", up.ClusterID, o.clusterID)
		}
		if down.Reachable || down.Err == "" || down.Healthy || down.ReadOK || down.MemberID != 0 {
			t.Errorf("the dead endpoint: %+v", down)
		}
		if len(f.Alarms) != 0 || f.Hashes != nil {
			t.Errorf("alarms %v, hashes %v on a healthy cluster", f.Alarms, f.Hashes)
		}
	})

	t.Run("bootstrap: nobody Running yet", func(t *testing.T) {
		o := &observed{members: map[string]*stewardv1.EtcdMember{}, endpoints: map[string]string{"c-0": live}}
		f := r.etcdFacts(ctx, cluster("bootstrap"), o)
		if !f.MemberListKnown() || len(f.Members) != 1 || len(f.Endpoints) != 1 || !f.Endpoints[0].ReadOK {
			t.Errorf("facts %+v", f)
		}
	})

	// An adoption whose first Steward member is still a learner: cluster-wide calls (a promotion
	// above all: etcd refuses MemberPromote sent to a learner, "rpc not supported for learner") go
	// to the source's endpoints only, never to the learner's. The e2e saw a 3.5 adoption promote
	// through the learner for minutes before this.
	t.Run("adopting: a learner is no cluster-wide endpoint", func(t *testing.T) {
		ec := cluster("adopting")
		ec.Spec.Bootstrap = &stewardv1.BootstrapSpec{Join: &stewardv1.JoinSpec{Endpoints: []string{live}}}
		o := &observed{members: map[string]*stewardv1.EtcdMember{"c-0": member("c-0", stewardv1.MemberLearner)},
			endpoints: map[string]string{"c-0": dead}}
		f := r.etcdFacts(ctx, ec, o)
		if !f.MemberListKnown() || o.client == nil {
			t.Fatalf("member list %+v (%s)", f.Members, f.MemberListErr)
		}
		if eps := o.client.Endpoints(); len(eps) != 1 || eps[0] != live {
			t.Fatalf("cluster-wide endpoints %v, want only the source's %s", eps, live)
		}
		src := "source-" + cl.Members[0].Name
		if _, ok := f.Endpoint(src); !ok || len(f.Endpoints) != 2 {
			t.Errorf("endpoints %+v, want c-0 and %s", f.Endpoints, src)
		}
	})

	// Quorum lost: the member list and the survivor's quorum read each wait out their timeout. Read
	// together, a gather costs one timeout; one after the other they cost two (10 s and more held
	// every step of a quorum recovery, and the chokepoint's second read before each).
	t.Run("quorum lost: one timeout, not the sum", func(t *testing.T) {
		three := etcdtest.Start(t, 3)
		o := &observed{members: map[string]*stewardv1.EtcdMember{}, endpoints: map[string]string{}}
		for i, m := range three.Members {
			name := fmt.Sprintf("c-%d", i)
			o.members[name], o.endpoints[name] = member(name, stewardv1.MemberRunning), m.ClientURL
		}
		// Connected while healthy, as the operator is when the loss comes.
		if f := r.etcdFacts(ctx, cluster("lost"), o); !f.MemberListKnown() {
			t.Fatalf("healthy: %s", f.MemberListErr)
		}
		three.Kill(three.Members[1])
		three.Kill(three.Members[2])
		start := time.Now()
		f := r.etcdFacts(ctx, cluster("lost"), o)
		took := time.Since(start)
		r.Etcd.Forget("lost")
		if f.MemberListKnown() || len(f.Endpoints) != 3 || !f.Endpoints[0].Reachable || f.Endpoints[0].ReadOK {
			t.Fatalf("facts %+v (%s)", f.Endpoints, f.MemberListErr)
		}
		if limit := etcd.CallTimeout + 3*time.Second; took > limit {
			t.Errorf("the gather took %s without quorum, over %s: its reads waited one after the other", took.Round(time.Millisecond), limit)
		}
		t.Logf("gather without quorum: %s", took.Round(time.Millisecond))
	})

	t.Run("the only voter does not answer", func(t *testing.T) {
		short, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		o := &observed{members: map[string]*stewardv1.EtcdMember{"c-1": member("c-1", stewardv1.MemberRunning)},
			endpoints: map[string]string{"c-1": dead}}
		f := r.etcdFacts(short, cluster("down"), o)
		if f.MemberListKnown() || o.clusterID != "" || len(f.Members) != 0 {
			t.Errorf("member list read from nobody: %+v, cluster %q", f.Members, o.clusterID)
		}
		if len(f.Endpoints) != 1 || f.Endpoints[0].Reachable || f.Endpoints[0].ReadOK {
			t.Errorf("endpoints %+v", f.Endpoints)
		}
		if f.MemberListErr == "" || f.Endpoints[0].Err == "" {
			t.Errorf("no reason given: %q, %q", f.MemberListErr, f.Endpoints[0].Err)
		}
	})
}
