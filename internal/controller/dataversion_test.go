package controller_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/controller"
	"github.com/etcd-steward/steward/internal/plan"
)

// The version a member's data was last written by is recorded on its EtcdMember (it must outlive
// the Pod), and written only when it changes: a steady reconcile writes nothing.
func TestSyncMemberStatusRecordsDataVersionOnlyWhenItChanges(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	m := &stewardv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "ghost-0", Namespace: ns,
		Labels: map[string]string{stewardv1.LabelCluster: "ghost"}},
		Spec: stewardv1.EtcdMemberSpec{ClusterName: "ghost", Template: unmanagedCluster(ns).Spec.MemberTemplate}}
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	c, writes := countingClient(t)
	r := &controller.EtcdClusterReconciler{Client: c, APIReader: c}
	decide := func(dv *stewardv1.DataVersion) plan.Decision {
		return plan.Decision{Members: []stewardv1.MemberStatus{{Name: m.Name, Role: stewardv1.RoleFollower, Ready: true, Version: "3.5.35"}},
			DataVersions: map[string]*stewardv1.DataVersion{m.Name: dv}}
	}
	sync := func(dv *stewardv1.DataVersion, wantPatches float64) {
		t.Helper()
		before := writes()["patch etcdmembers.etcd.steward.dev/status"]
		if err := r.SyncMemberStatus(ctx, []*stewardv1.EtcdMember{m}, decide(dv)); err != nil {
			t.Fatal(err)
		}
		if got := writes()["patch etcdmembers.etcd.steward.dev/status"] - before; got != wantPatches {
			t.Errorf("data version %+v: %v status patches, want %v", dv, got, wantPatches)
		}
		var stored stewardv1.EtcdMember
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), &stored); err != nil {
			t.Fatal(err)
		}
		if got := stored.Status.DataVersion; (got == nil) != (dv == nil) || (got != nil && *got != *dv) {
			t.Errorf("stored data version %+v, want %+v", got, dv)
		}
		m = &stored // the next reconcile reads what was stored
	}
	sync(&stewardv1.DataVersion{Server: "3.5.35"}, 1)
	sync(&stewardv1.DataVersion{Server: "3.5.35"}, 0) // steady: nothing to write
	sync(&stewardv1.DataVersion{Server: "3.6.16"}, 1) // the member was rolled onto 3.6
	sync(&stewardv1.DataVersion{Server: "3.6.16", Storage: "3.6.0"}, 1)
	sync(&stewardv1.DataVersion{Server: "3.6.16", Storage: "3.6.0"}, 0)
}
