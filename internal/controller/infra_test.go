package controller_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/controller"
	"github.com/etcd-steward/steward/internal/manager"
	"github.com/etcd-steward/steward/internal/metrics"
	"github.com/etcd-steward/steward/internal/resources"
)

// countingClient is a direct client whose requests are counted by verb and resource, as the
// operator's own are (steward_kube_api_requests_total).
func countingClient(t *testing.T) (client.Client, func() map[string]float64) {
	t.Helper()
	reg := prometheus.NewRegistry()
	rec, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(rec.API.Wrap)
	c, err := client.New(cfg, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	writes := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != metrics.APIRequests.Name {
				continue
			}
			for _, m := range mf.GetMetric() {
				l := labels(m)
				if l["verb"] != "get" && l["verb"] != "list" && l["verb"] != "watch" {
					out[l["verb"]+" "+l["resource"]] += m.GetCounter().GetValue()
				}
			}
		}
		return out
	}
	return c, writes
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// At steady state the Services and the PDB cost no write: the API server defaults fields Steward
// does not set (a port's protocol), and a patch that only sets them back is a write request the
// server turns into a no-op, once per object per reconcile (bench-scale counted 3.1 per reconcile).
func TestEnsureServicesWritesOnlyChanges(t *testing.T) {
	ctx := context.Background()
	ec := unmanagedCluster(namespace(t))
	c, writes := countingClient(t)
	r := &controller.EtcdClusterReconciler{Client: c, APIReader: c}
	if err := r.EnsureServices(ctx, ec); err != nil {
		t.Fatal(err)
	}
	first := writes()
	if first["create services"] != 2 || first["create poddisruptionbudgets.policy"] != 1 {
		t.Fatalf("first upkeep wrote %v, want the two Services and the PDB created", first)
	}
	for range 3 {
		if err := r.EnsureServices(ctx, ec); err != nil {
			t.Fatal(err)
		}
	}
	if again := writes(); len(again) != len(first) || again["create services"] != 2 || again["create poddisruptionbudgets.policy"] != 1 {
		t.Errorf("three more upkeeps of unchanged objects wrote %v (after %v)", again, first)
	}
}

// A status that differs from the stored one only below what the API keeps (a condition's time with
// nanoseconds, stored in whole seconds) is not written: the patch would be empty. bench-scale saw
// one such status patch per steady-state reconcile, with no resourceVersion moving.
func TestWriteStatusSkipsWhatTheAPIWouldNotKeep(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ec := unmanagedCluster(ns)
	ec.UID = ""
	ec.Spec.Paused = true // the running manager leaves it alone
	if err := env.Client.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	at := metav1.NewTime(time.Now().Truncate(time.Second))
	// The running manager writes the cluster too (its finalizer): retry on conflicts.
	eventually(t, "a status with a condition", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return err
		}
		ec.Status.Conditions = []metav1.Condition{{Type: "Probe", Status: metav1.ConditionTrue, Reason: "Set", LastTransitionTime: at}}
		return env.Client.Status().Update(ctx, ec)
	})
	var base stewardv1.EtcdCluster
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), &base); err != nil {
		t.Fatal(err)
	}
	c, writes := countingClient(t)
	r := &controller.EtcdClusterReconciler{Client: c, APIReader: c}
	next := base.DeepCopy()
	next.Status.Conditions[0].LastTransitionTime = metav1.NewTime(at.Add(300 * time.Millisecond))
	if err := r.WriteStatus(ctx, &base, next, false); err != nil {
		t.Fatal(err)
	}
	if w := writes(); len(w) != 0 {
		t.Errorf("a status equal to the stored one but for sub-second precision was written: %v", w)
	}
	next.Status.Conditions[0].Reason = "Changed"
	if err := r.WriteStatus(ctx, &base, next, false); err != nil {
		t.Fatal(err)
	}
	if w := writes(); w["patch etcdclusters.etcd.steward.dev/status"] != 1 {
		t.Errorf("a changed status: writes %v, want one status patch", w)
	}
}

// A recovery intent decided from an object that has changed since (a cache behind the operator's
// own last write) is refused by the API server, not recorded a second time; one decided from the
// current object is written.
func TestRecoveryIntentWrittenOnlyOntoWhatItWasDecidedFrom(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ec := unmanagedCluster(ns)
	ec.UID = ""
	ec.Spec.Paused = true
	if err := env.Client.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	var stale stewardv1.EtcdCluster
	eventually(t, "the cluster as read", func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(ec), &stale) })
	// Another writer moves the object on (here: a status write of the operator's own).
	eventually(t, "a status write in between", func() error {
		var cur stewardv1.EtcdCluster
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), &cur); err != nil {
			return err
		}
		cur.Status.Conditions = []metav1.Condition{{Type: "Probe", Status: metav1.ConditionTrue, Reason: "Set", LastTransitionTime: metav1.Now()}}
		return env.Client.Status().Update(ctx, &cur)
	})
	r := &controller.EtcdClusterReconciler{Client: env.Client, APIReader: env.Client}
	start := func(from *stewardv1.EtcdCluster) *stewardv1.EtcdCluster {
		next := from.DeepCopy()
		next.Status.QuorumRecovery = &stewardv1.QuorumRecoveryStatus{InProgress: &stewardv1.QuorumRecoveryProgress{
			Survivor: "c-0", Stage: stewardv1.RecoveryFencing, Since: metav1.Now(), Trigger: "auto"}}
		return next
	}
	if err := r.WriteStatus(ctx, &stale, start(&stale), true); !apierrors.IsConflict(err) {
		t.Fatalf("an intent decided from a superseded object: err %v, want a Conflict", err)
	}
	var cur stewardv1.EtcdCluster
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), &cur); err != nil {
		t.Fatal(err)
	}
	if cur.Status.QuorumRecovery != nil {
		t.Fatalf("the refused intent was recorded: %+v", cur.Status.QuorumRecovery)
	}
	// The test's manager may write the object between the read and the write (a Conflict again):
	// read the current object afresh until the write goes through on what it was decided from.
	for i := 0; ; i++ {
		err := r.WriteStatus(ctx, &cur, start(&cur), true)
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || i == 10 {
			t.Fatalf("an intent decided from the current object: %v", err)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), &cur); err != nil {
			t.Fatal(err)
		}
		if cur.Status.QuorumRecovery != nil {
			t.Fatalf("a refused intent was recorded: %+v", cur.Status.QuorumRecovery)
		}
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), &cur); err != nil {
		t.Fatal(err)
	}
	if qr := cur.Status.QuorumRecovery; qr == nil || qr.InProgress == nil || qr.InProgress.Survivor != "c-0" {
		t.Fatalf("the intent was not recorded: %+v", qr)
	}
}

// A Service of the cluster's name that is not its own (a Helm release's client Service "etcd",
// the usual name of the cluster one adopts) is never patched: its selector would route its
// clients to Steward's members. Before the fix, ensureServices took it over.
func TestEnsureServicesLeavesOthersServicesAlone(t *testing.T) {
	ctx := context.Background()
	ec := unmanagedCluster(namespace(t))
	theirs := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ec.Namespace, Name: resources.ClientServiceName(ec.Name),
		Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app.kubernetes.io/name": "etcd"},
			Ports: []corev1.ServicePort{{Name: "client", Port: 2379}}}}
	if err := env.Client.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	r := &controller.EtcdClusterReconciler{Client: env.Client, APIReader: env.Client}
	taken, err := r.EnsureServicesTaken(ctx, ec)
	if err != nil {
		t.Fatal(err)
	}
	if len(taken) != 1 || taken[0] != theirs.Name {
		t.Fatalf("taken = %v, want [%s]", taken, theirs.Name)
	}
	var now corev1.Service
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(theirs), &now); err != nil {
		t.Fatal(err)
	}
	if now.Spec.Selector["app.kubernetes.io/name"] != "etcd" || len(now.Spec.Selector) != 1 || len(now.OwnerReferences) != 0 {
		t.Fatalf("their Service was changed: selector %v, owners %v", now.Spec.Selector, now.OwnerReferences)
	}
	var peer corev1.Service
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: resources.PeerServiceName(ec.Name)}, &peer); err != nil {
		t.Fatalf("the peer Service, which nobody else had, was not created: %v", err)
	}
}

// The operator caches only Services and PDBs with Steward's cluster label, so someone else's of a
// cluster's name is not in its cache. ensureServices still finds it, by a read past the cache, and
// leaves it alone; before that read it took the cache's "not found" at its word, and the create
// failed on every reconcile (a PDB the old cluster-wide cache showed was taken over, or deleted
// when the cluster's budget was turned off). A settled cluster's own objects are read from the cache.
func TestEnsureServicesFindsOthersPastTheCache(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ec := unmanagedCluster(namespace(t))
	theirSelector := map[string]string{"app.kubernetes.io/name": "etcd"}
	theirService := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ec.Namespace, Name: resources.ClientServiceName(ec.Name)},
		Spec: corev1.ServiceSpec{Selector: theirSelector, Ports: []corev1.ServicePort{{Name: "client", Port: 2379}}}}
	theirPDB := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ec.Namespace, Name: resources.PDBName(ec.Name)},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: theirSelector}}}
	for _, o := range []client.Object{theirService, theirPDB} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	opts, err := manager.CacheOptions(manager.Options{SyncPeriod: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	opts.Scheme = env.Client.Scheme()
	c, err := cache.New(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	cached, err := client.New(env.Config, client.Options{Scheme: env.Client.Scheme(), Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		t.Fatal(err)
	}
	live := &countingReader{Reader: env.Client}
	r := &controller.EtcdClusterReconciler{Client: cached, APIReader: live}
	upkeep := func(budget bool) {
		t.Helper()
		ec.Spec.PodDisruptionBudget = &stewardv1.PodDisruptionBudgetSpec{Enabled: ptr.To(budget)}
		taken, err := r.EnsureServicesTaken(ctx, ec)
		if err != nil || len(taken) != 1 || taken[0] != theirService.Name {
			t.Fatalf("taken = %v, %v; want [%s]", taken, err, theirService.Name)
		}
	}
	upkeep(true)
	upkeep(false) // the cluster's budget turned off: nothing of the name is deleted
	var svc corev1.Service
	var pdb policyv1.PodDisruptionBudget
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(theirService), &svc); err != nil || !maps.Equal(svc.Spec.Selector, theirSelector) ||
		len(svc.OwnerReferences) != 0 {
		t.Fatalf("their Service was changed: %v, selector %v, owners %v", err, svc.Spec.Selector, svc.OwnerReferences)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(theirPDB), &pdb); err != nil || !maps.Equal(pdb.Spec.Selector.MatchLabels, theirSelector) ||
		len(pdb.OwnerReferences) != 0 {
		t.Fatalf("their PDB was changed or deleted: %v, owners %v", err, pdb.OwnerReferences)
	}
	var inCache corev1.ServiceList
	for ctx.Err() == nil {
		if err := cached.List(ctx, &inCache, client.InNamespace(ec.Namespace)); err == nil && len(inCache.Items) == 1 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(inCache.Items) != 1 || inCache.Items[0].Name != resources.PeerServiceName(ec.Name) {
		t.Fatalf("the cache holds %d Services: want only the cluster's own peer Service", len(inCache.Items))
	}
	live.gets = 0
	upkeep(true)
	if live.gets != 2 {
		t.Errorf("an upkeep read past the cache %d times: want 2, the names someone else has (the peer Service is in the cache)", live.gets)
	}
}
