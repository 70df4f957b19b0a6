package controller

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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

	// A member whose etcd container is not running (the Pod has its address while its init
	// container runs, or etcd exited and waits for its restart) cannot answer: it is not dialled,
	// so the gather does not wait out a call's timeout on it. Here its address accepts connections
	// and never answers, as a stalled one would: a dial would hang until the timeout.
	t.Run("an etcd container not running is not dialled", func(t *testing.T) {
		mute := muteListener(t)
		waiting := podWithEtcd(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}})
		exited := podWithEtcd(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}})
		start := time.Now()
		o := &observed{members: map[string]*stewardv1.EtcdMember{"c-0": member("c-0", stewardv1.MemberRunning), "c-1": member("c-1", stewardv1.MemberRunning)},
			endpoints: map[string]string{"c-0": live, "c-1": mute}, pods: map[string]*corev1.Pod{"c-0": podWithEtcd(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}), "c-1": exited}}
		f := r.etcdFacts(ctx, cluster("not-running"), o)
		r.Etcd.Forget("not-running")
		if !f.MemberListKnown() || len(f.Endpoints) != 2 || !f.Endpoints[0].ReadOK {
			t.Fatalf("facts %+v (%s)", f.Endpoints, f.MemberListErr)
		}
		if e := f.Endpoints[1]; e.Reachable || !strings.Contains(e.Err, "not running") {
			t.Errorf("c-1, whose etcd exited: %+v", e)
		}
		// Bootstrap: the seed's Pod has an address, its etcd has not started yet.
		o = &observed{members: map[string]*stewardv1.EtcdMember{}, endpoints: map[string]string{"c-0": mute}, pods: map[string]*corev1.Pod{"c-0": waiting}}
		f = r.etcdFacts(ctx, cluster("not-started"), o)
		r.Etcd.Forget("not-started")
		if f.MemberListKnown() || !strings.Contains(f.MemberListErr, "etcd container is running") || len(f.Endpoints) != 1 || f.Endpoints[0].Reachable {
			t.Errorf("facts %+v (%s)", f.Endpoints, f.MemberListErr)
		}
		// The only voter's etcd exited; a learner's runs: the member list is not asked (a learner is
		// no cluster-wide endpoint), the learner is still asked for its status.
		running := podWithEtcd(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})
		o = &observed{members: map[string]*stewardv1.EtcdMember{"c-0": member("c-0", stewardv1.MemberRunning), "c-1": member("c-1", stewardv1.MemberLearner)},
			endpoints: map[string]string{"c-0": mute, "c-1": live}, pods: map[string]*corev1.Pod{"c-0": exited, "c-1": running}}
		f = r.etcdFacts(ctx, cluster("voter-exited"), o)
		r.Etcd.Forget("voter-exited")
		if f.MemberListKnown() || len(f.Endpoints) != 2 || f.Endpoints[0].Reachable || !f.Endpoints[1].Reachable {
			t.Errorf("facts %+v (%s)", f.Endpoints, f.MemberListErr)
		}
		if took := time.Since(start); took >= etcd.CallTimeout {
			t.Errorf("the three gathers took %s: something waited on an etcd that does not run", took.Round(time.Millisecond))
		}
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

// podWithEtcd is a member Pod whose etcd container is in state.
func podWithEtcd(state corev1.ContainerState) *corev1.Pod {
	return &corev1.Pod{Status: corev1.PodStatus{PodIP: "10.0.0.1", ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", State: state}}}}
}

// muteListener is an http:// address that accepts connections and never answers: the kernel
// completes the handshakes of a listening socket's backlog, so nothing needs to call Accept.
func muteListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return "http://" + l.Addr().String()
}
