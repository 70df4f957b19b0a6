package controller_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/controller"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/etcd"
	"github.com/etcd-steward/steward/internal/etcdtest"
	"github.com/etcd-steward/steward/internal/health"
	"github.com/etcd-steward/steward/internal/plan"
)

// Adoption against a real running etcd (three processes on loopback) and the real manager. With no
// kubelet, Steward's first member joins etcd as a learner whose Pod never runs: enough to see the
// preflight pass on live reads, the source's members kept (never taken for orphans), and the abort
// hand the cluster back exactly as it was. The hand-over itself runs end to end in test/e2e.

func joinCluster(ns string, endpoints []string) *stewardv1.EtcdCluster {
	return &stewardv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "adopted", Namespace: ns},
		Spec: stewardv1.EtcdClusterSpec{Replicas: ptr.To[int32](3), MemberTemplate: stewardv1.MemberTemplate{Version: "3.6.16"},
			TLS:       &stewardv1.TLSSpec{Enabled: ptr.To(false)},
			Bootstrap: &stewardv1.BootstrapSpec{Join: &stewardv1.JoinSpec{Endpoints: endpoints}}},
	}
}

func sourceClient(t *testing.T, cl *etcdtest.Cluster) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: cl.ClientURLs(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// members lists the source's member list as "name:voter|learner", sorted, and its cluster ID.
func members(t *testing.T, c *clientv3.Client) ([]string, uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := c.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range r.Members {
		role := "voter"
		if m.IsLearner {
			role = "learner"
		}
		name := m.Name
		if name == "" {
			name = strings.Join(m.PeerURLs, ",")
		}
		out = append(out, name+":"+role)
	}
	slices.Sort(out)
	return out, r.Header.ClusterId
}

func TestAdoptionJoinsAndAborts(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	cl := etcdtest.Start(t, 3)
	src := sourceClient(t, cl)
	before, clusterID := members(t, src)

	ec := joinCluster(ns, cl.ClientURLs()[:1]) // one endpoint: the member list names the rest
	if err := env.Client.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	peer := fmt.Sprintf("http://adopted-0.adopted.%s.svc:2380", ns)
	eventually(t, "Steward's first member joins as a learner", func() error {
		now, _ := members(t, src)
		if want := append(slices.Clone(before), peer+":learner"); !slices.Equal(now, sortedCopy(want)) {
			return fmt.Errorf("member list %v", now)
		}
		return nil
	})
	eventually(t, "status.adoption: handing over, the preflight passed, the source recorded", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return err
		}
		a := ec.Status.Adoption
		switch {
		case a == nil:
			return fmt.Errorf("no status.adoption")
		case a.Phase != stewardv1.AdoptionHandingOver:
			return fmt.Errorf("phase %s: %s", a.Phase, a.Message)
		case a.ClusterID != fmt.Sprintf("%x", clusterID) || ec.Status.ClusterID != a.ClusterID:
			return fmt.Errorf("cluster ID %s (status %s), want %x", a.ClusterID, ec.Status.ClusterID, clusterID)
		case len(a.Checks) != 11 || slices.ContainsFunc(a.Checks, func(c stewardv1.AdoptionCheck) bool { return !c.Passed }):
			return fmt.Errorf("checks %+v", a.Checks)
		case len(a.SourceMembers) != 3 || slices.ContainsFunc(a.SourceMembers, func(s stewardv1.SourceMember) bool {
			return s.State != stewardv1.SourceServing
		}):
			return fmt.Errorf("source members %+v", a.SourceMembers)
		case !strings.HasPrefix(a.Version, "3.6."):
			return fmt.Errorf("version %q", a.Version)
		}
		return nil
	})
	// The learner never catches up (its Pod never runs): nothing of the source may go meanwhile.
	time.Sleep(3 * time.Second)
	if now, _ := members(t, src); len(now) != 4 {
		t.Fatalf("member list changed while the learner waits: %v", now)
	}

	patch := client.MergeFrom(ec.DeepCopy())
	ec.Spec.Bootstrap.Join.Abort = true
	if err := env.Client.Patch(ctx, ec, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the abort gives the source back as it was", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return err
		}
		releasePVCs(t, ns)
		var ms stewardv1.EtcdMemberList
		if err := env.Client.List(ctx, &ms, client.InNamespace(ns)); err != nil {
			return err
		}
		now, id := members(t, src)
		switch {
		case !slices.Equal(now, before) || id != clusterID:
			return fmt.Errorf("member list %v (cluster %x); %s: %s", now, id, ec.Status.Adoption.Phase, ec.Status.Adoption.Message)
		case len(ms.Items) > 0:
			return fmt.Errorf("%d EtcdMembers left", len(ms.Items))
		case ec.Status.Adoption.Phase != stewardv1.AdoptionAborted:
			return fmt.Errorf("phase %s: %s", ec.Status.Adoption.Phase, ec.Status.Adoption.Message)
		}
		return nil
	})
	// Aborted is final: nothing of the source is touched, even though no EtcdMember claims it.
	time.Sleep(3 * time.Second)
	if now, _ := members(t, src); !slices.Equal(now, before) {
		t.Fatalf("member list after the abort: %v", now)
	}
	if err := env.Client.Delete(ctx, ec); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the aborted cluster deleted", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec); err == nil {
			return fmt.Errorf("still there: finalizers %v", ec.Finalizers)
		}
		return nil
	})
	if now, _ := members(t, src); !slices.Equal(now, before) {
		t.Fatalf("member list after the deletion: %v", now)
	}
}

// releasePVCs does what kube-controller-manager's pvc-protection controller would: a deleted PVC
// no Pod uses loses its finalizer (envtest runs no controller-manager).
func releasePVCs(t *testing.T, ns string) {
	t.Helper()
	var pvcs corev1.PersistentVolumeClaimList
	if err := env.Client.List(context.Background(), &pvcs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range pvcs.Items {
		p := &pvcs.Items[i]
		if p.DeletionTimestamp != nil && len(p.Finalizers) > 0 {
			base := p.DeepCopy()
			p.Finalizers = nil
			_ = env.Client.Patch(context.Background(), p, client.MergeFrom(base))
		}
	}
}

func sortedCopy(s []string) []string { c := slices.Clone(s); slices.Sort(c); return c }

// A source with etcd authentication on is refused, with the check that failed, and nothing of it
// changes however long the cluster waits.
func TestAdoptionRefusedLeavesTheSourceAlone(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	cl := etcdtest.Start(t, 1)
	src := sourceClient(t, cl)
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := src.UserAdd(actx, "root", "secret"); err != nil {
		t.Fatal(err)
	}
	if _, err := src.UserGrantRole(actx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := src.AuthEnable(actx); err != nil {
		t.Fatal(err)
	}
	ec := joinCluster(ns, cl.ClientURLs())
	if err := env.Client.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	eventually(t, "refused on the Auth check", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return err
		}
		a := ec.Status.Adoption
		if a == nil || a.Phase != stewardv1.AdoptionRefused {
			return fmt.Errorf("adoption %+v", a)
		}
		for _, c := range a.Checks {
			if !c.Passed {
				if c.Name != "Auth" || !strings.Contains(c.Message, "authentication is enabled") {
					return fmt.Errorf("first failed check %+v", c)
				}
				return nil
			}
		}
		return fmt.Errorf("no failed check: %+v", a.Checks)
	})
	time.Sleep(3 * time.Second)
	var ms stewardv1.EtcdMemberList
	if err := env.Client.List(ctx, &ms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	root, err := clientv3.New(clientv3.Config{Endpoints: cl.ClientURLs(), Username: "root", Password: "secret", DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	now, _ := members(t, root)
	if len(ms.Items) != 0 || len(now) != 1 {
		t.Fatalf("refused, yet %d EtcdMembers exist and the member list is %v", len(ms.Items), now)
	}
}

// ScaleSource goes through the scale subresource (the operator may change a StatefulSet's replicas
// and nothing else), by one, and only from the replicas the plan saw.
func TestScaleSourceByOneFromWhatThePlanSaw(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	labels := map[string]string{"app.kubernetes.io/name": "etcd"}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "etcd"}}}}}}
	if err := env.Client.Create(ctx, sts); err != nil {
		t.Fatal(err)
	}
	ec := joinCluster(ns, []string{"http://etcd-0:2379"})
	ec.Spec.Bootstrap.Join.StatefulSetName = "etcd"
	r := &controller.EtcdClusterReconciler{Client: env.Client, APIReader: env.Client}
	replicas := func() int32 {
		t.Helper()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sts), sts); err != nil {
			t.Fatal(err)
		}
		return *sts.Spec.Replicas
	}
	if err := r.ScaleSource(ctx, ec, plan.Action{Kind: plan.ScaleSource, SourceReplicas: 1}); !errors.Is(err, controller.ErrRetry) {
		t.Fatalf("scaling 3 → 1 (the plan saw 2): %v, want a retry", err)
	}
	if got := replicas(); got != 3 {
		t.Fatalf("replicas %d after a refused scale", got)
	}
	if err := r.ScaleSource(ctx, ec, plan.Action{Kind: plan.ScaleSource, SourceReplicas: 2}); err != nil {
		t.Fatal(err)
	}
	if got := replicas(); got != 2 {
		t.Fatalf("replicas %d, want 2", got)
	}
}

// A source member's removal is irreversible, so it is made only on the spec it was decided from:
// an abort (or any spec change) written after the plan read the cluster wins. The e2e saw an
// abort written 1.8 s before a source member was removed anyway.
func TestSourceRemovalRechecksTheSpecLive(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	cl := etcdtest.Start(t, 3)
	src := sourceClient(t, cl)
	before, _ := members(t, src)
	ec := joinCluster(ns, cl.ClientURLs())
	ec.Spec.Paused = true // the running manager only watches
	if err := env.Client.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	planned := ec.DeepCopy()
	eventually(t, "abort written", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return err
		}
		patch := client.MergeFrom(ec.DeepCopy())
		ec.Spec.Bootstrap.Join.Abort = true
		return env.Client.Patch(ctx, ec, patch)
	})
	// A follower of the source, removable on the planned facts.
	r := &controller.EtcdClusterReconciler{Client: env.Client, APIReader: env.Client, Etcd: etcd.NewPool()}
	t.Cleanup(func() { r.Etcd.Forget(string(planned.UID)) })
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := src.Status(sctx, cl.Members[0].ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	var victim *etcdserverpb.Member
	list, err := src.MemberList(sctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Members {
		if m.ID != st.Leader {
			victim = m
			break
		}
	}
	name := plan.SourceName(health.Member{ID: victim.ID, Name: victim.Name})
	a := plan.Action{Kind: plan.RemoveMember, Member: name, MemberID: victim.ID, Reason: plan.ReasonHandingOver,
		Disruption: &disruption.Request{Kind: disruption.Remove, Victim: name}}
	if err := r.GatherAndApply(ctx, planned, a); !errors.Is(err, controller.ErrRetry) {
		t.Fatalf("removing %s on a spec since changed: %v, want a retry", victim.Name, err)
	}
	if now, _ := members(t, src); !slices.Equal(now, before) {
		t.Fatalf("member list %v, want %v", now, before)
	}
}

// A namespace being deleted takes the source with it: holding the EtcdCluster's teardown for a
// member-by-member abort could never finish (and nothing can be created in the namespace any
// more). The e2e left namespaces Terminating for 45 minutes before this.
func TestAdoptionTeardownInATerminatingNamespace(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	cl := etcdtest.Start(t, 3)
	ec := joinCluster(ns, cl.ClientURLs())
	if err := env.Client.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	eventually(t, "handing over", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return err
		}
		if a := ec.Status.Adoption; a == nil || a.Phase != stewardv1.AdoptionHandingOver {
			return fmt.Errorf("adoption %+v", a)
		}
		return nil
	})
	var namespace corev1.Namespace
	if err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, &namespace); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, &namespace); err != nil {
		t.Fatal(err)
	}
	// envtest runs no namespace controller: delete what it would, the source's Pods (its quorum)
	// among them.
	cl.Kill(cl.Members[1])
	cl.Kill(cl.Members[2])
	if err := env.Client.Delete(ctx, ec); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the EtcdCluster gone", func() error {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (finalizers %v, adoption %+v): %w", ec.Finalizers, ec.Status.Adoption, err)
	})
}
