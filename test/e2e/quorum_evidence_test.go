//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// TestPartitionedOperatorFencesNothing (issue 23): with spec.quorumLoss Automatic after 30 s and a
// successful backup, the operator is cut off from members while etcd keeps its quorum, in the
// three shapes a partition takes: from two members (the one it reaches has a leader), on the
// minority side (the one member it reaches is itself cut off from the other two), and from every
// member. Each lasts until afterSeconds and a margin of 15 s have passed since status showed the
// operator had seen the cut: an operator that took unreachable members for lost ones would
// have started a recovery by then (its timer cannot start after what status says it saw).
// No member is touched, no recovery starts, status says
// which members the operator cannot reach, a recover-quorum annotation is refused and removed, and
// every acknowledged write is readable afterwards.
func TestPartitionedOperatorFencesNothing(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "cut", 3, "", func(ec *stewardv1.EtcdCluster) {
		ec.Spec.QuorumLoss = &stewardv1.QuorumLossSpec{Policy: stewardv1.QuorumLossAutomatic, AfterSeconds: ptr.To(int32(cutAfter / time.Second))}
	})
	c := clientFor(t, ns, "cut")
	keys := putMany(t, c, "/before/", 300)
	dest, _ := s3Storage(t, ns)
	createObj(t, newBackup(ns, "before-cut", "cut", dest))
	if b := backupDone(t, ns, "before-cut", 3*time.Minute); b.Status.Phase != stewardv1.BackupSucceeded {
		t.Fatalf("backup %s: %s", b.Status.Phase, b.Status.Message)
	}
	waitSettled(t, ns, "cut", 3, time.Minute)
	before := uids(t, ns, "cut")
	pods := memberPods(t, ns, "cut")
	ip := func(n string) string { return pods[n].Status.PodIP }
	stop := watchNoRecovery(t, ns, "cut")

	// The cuts are made in the operator Pod's network namespace: no other scenario may kill the
	// operator meanwhile, or its next Pod would reach every member (CI saw Available stay True with
	// "3 of 3 voters healthy" through the third cut).
	release := holdOperator(t)

	// 1. The operator cut off from two members; the one it reaches has a leader.
	healOp := cutOperatorFrom(t, ip("cut-1"), ip("cut-2"))
	waitAvailable(t, ns, "cut", metav1.ConditionTrue, "cannot reach cut-1, cut-2")
	seen := time.Now()
	puts(t, c, "/cut-from-two/", keys, 100)
	holdUntil(seen.Add(cutAfter + cutMargin))

	// 2. The operator on the minority side: cut-0, the only member it reaches, is cut off from
	// the other two, which keep quorum and serve.
	peerCut := &cut{}
	if pids, err := containerPIDs(pods["cut-0"], "etcd"); err != nil {
		t.Fatal(err)
	} else {
		peerCut.pid = pids[0]
	}
	for _, n := range []string{"cut-1", "cut-2"} {
		peerCut.rules = append(peerCut.rules, []string{"INPUT", "-s", ip(n), "-j", "DROP"}, []string{"OUTPUT", "-d", ip(n), "-j", "DROP"})
	}
	if err := peerCut.apply(); err != nil {
		healOp()
		t.Fatal(err)
	}
	waitAvailable(t, ns, "cut", metav1.ConditionUnknown, "cannot reach cut-1, cut-2")
	seen = time.Now()
	annotateCluster(t, ns, "cut", stewardv1.AnnotationRecoverQuorum, "auto")
	waitAnnotationRemoved(t, ns, "cut", "Steward recovers only on etcd's evidence that quorum is lost")
	puts(t, c, "/minority-side/", keys, 100) // some go to cut-0 and fail: only the acknowledged count
	holdUntil(seen.Add(cutAfter + cutMargin))
	peerCut.heal()
	healOp()

	// 3. The operator cut off from every member, a successful backup present.
	waitAvailable(t, ns, "cut", metav1.ConditionTrue, "")
	healOp = cutOperatorFrom(t, ip("cut-0"), ip("cut-1"), ip("cut-2"))
	waitAvailable(t, ns, "cut", metav1.ConditionUnknown, "cannot reach cut-0, cut-1, cut-2")
	seen = time.Now()
	puts(t, c, "/cut-from-all/", keys, 100)
	holdUntil(seen.Add(cutAfter + cutMargin))
	healOp()
	release()

	waitSettled(t, ns, "cut", 3, 3*time.Minute)
	stop()
	assertPodsUntouched(t, ns, "cut", before, "a partitioned operator must touch no member")
	if ev := eventsWith(t, ns, "cut", "StartRecovery"); len(ev) > 0 {
		t.Errorf("a recovery started while etcd had quorum: %q", ev)
	}
	ec, err := get(context.Background(), ns, "cut")
	if err != nil {
		t.Fatal(err)
	}
	if qr := ec.Status.QuorumRecovery; qr != nil && (qr.Last != nil || qr.InProgress != nil) {
		t.Errorf("status.quorumRecovery = %+v, want no recovery", qr)
	}
	checkData(t, clientFor(t, ns, "cut"), "/", keys)
	t.Logf("%d acknowledged writes readable after the three partitions", len(keys))
}

// cutOperatorFrom cuts the running operator off the given member IPs. Other scenarios restart the
// operator meanwhile: heal finds the operator's container again, since a container restarted in
// the same Pod keeps the Pod's network namespace and the rules in it (a new Pod starts without).
func cutOperatorFrom(t *testing.T, ips ...string) (heal func()) {
	t.Helper()
	op, err := operatorPod(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c, err := partitionFrom(op, "manager", ips)
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		if cur, err := operatorPod(context.Background()); err == nil && cur.UID == op.UID {
			if pids, err := containerPIDs(cur, "manager"); err == nil {
				c.pid = pids[0]
			}
		}
		c.heal()
	}
}

// watchNoRecovery fails the test if status ever records a recovery in progress; stop ends it.
func watchNoRecovery(t *testing.T, ns, name string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if ec, err := get(ctx, ns, name); err == nil && ec.Status.QuorumRecovery != nil && ec.Status.QuorumRecovery.InProgress != nil {
				t.Errorf("a quorum recovery started: %+v", *ec.Status.QuorumRecovery.InProgress)
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// waitAvailable waits for condition Available with the status and a message naming what it must.
func waitAvailable(t *testing.T, ns, name string, status metav1.ConditionStatus, message string) {
	t.Helper()
	f.WaitFor(t, ns, fmt.Sprintf("Available=%s ~%q", status, message), 2*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, name)
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(ec.Status.Conditions, "Available")
		return c != nil && c.Status == status && strings.Contains(c.Message, message), fmt.Errorf("%s", condition(ec, "Available"))
	})
}

// waitAnnotationRemoved: Steward removed the recover-quorum annotation with an Event saying why.
func waitAnnotationRemoved(t *testing.T, ns, name, why string) {
	t.Helper()
	f.WaitFor(t, ns, "the recover-quorum annotation removed", 2*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, name)
		if err != nil {
			return false, err
		}
		_, set := ec.Annotations[stewardv1.AnnotationRecoverQuorum]
		ev := eventsWith(t, ns, name, "QuorumRecoveryAnnotationRemoved")
		ok := !set && len(ev) > 0 && strings.Contains(ev[len(ev)-1], why)
		return ok, fmt.Errorf("annotation set %v; events %q", set, ev)
	})
}

// puts writes n keys one by one with a short deadline each, adding those acknowledged to keys. Ten
// failures in a row end it: the client's connection is pinned to a member that cannot commit (the
// minority side), and the rest would only wait out their deadlines (200 s in a focused run).
func puts(t *testing.T, c *clientv3.Client, prefix string, keys map[string]string, n int) {
	t.Helper()
	acked, failed, tried := 0, 0, 0
	for i := 0; i < n && failed < 10; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		k, v := fmt.Sprintf("%s%05d", prefix, i), fmt.Sprintf("value-%d", i)
		tried++
		if _, err := c.Put(ctx, k, v); err == nil {
			keys[k] = v
			acked, failed = acked+1, 0
		} else {
			failed++
		}
		cancel()
	}
	t.Logf("%s: %d of %d writes acknowledged (%d tried)", prefix, acked, n, tried)
}

func holdUntil(t time.Time) { time.Sleep(time.Until(t)) }

// cutAfter is the partitioned cluster's spec.quorumLoss.afterSeconds (the least allowed);
// cutMargin past it: fifteen of the operator's one-second requeues of a cluster not settled.
const (
	cutAfter  = 30 * time.Second
	cutMargin = 15 * time.Second
)
