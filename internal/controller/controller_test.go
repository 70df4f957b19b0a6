package controller_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/manager"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/resources"
	"github.com/etcd-steward/steward/internal/testenv"
)

// These tests run the real manager against a real kube-apiserver with no nodes: Pods are created
// but never run. They cover what the controller does before etcd answers: bootstrap creates one
// seed and nothing more, the Services and PDB, status, and deletion with the retention policy.
// Everything after the seed runs is covered end to end on the local Kubernetes (test/e2e).

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	if env, err = testenv.Start(testenv.WithWebhooks()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var o manager.Options
	o.EtcdImageRepository, o.HealthProbeAddr, o.MetricsAddr, o.SyncPeriod = "repo/etcd", "0", "0", time.Hour
	o.MaxConcurrentReconciles = 4
	// Member Pods start through the data check, which the Steward image carries; without it none is.
	o.OperatorImage = "steward:test"
	// The eviction webhook, with envtest's certificate; a short bound for TestEvictionWebhook.
	o.EvictionWebhook, o.EvictionBound, o.WebhookCertSecret = true, evictionBound, ""
	o.WebhookPort, o.WebhookCertDir = env.Webhook.LocalServingPort, env.Webhook.LocalServingCertDir
	mgr, err := manager.New(env.Config, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
	}
	_ = env.Stop()
	os.Exit(code)
}

func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ctl-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// eventually polls cond until it returns nil, failing with its last error.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = cond(); err == nil {
			return
		}
	}
	t.Fatalf("%s: %v", what, err)
}

func TestBootstrapCreatesOnlyTheSeed(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ec := &stewardv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: stewardv1.EtcdClusterSpec{Replicas: ptr.To[int32](3), MemberTemplate: stewardv1.MemberTemplate{
			Version: "3.6.16", PodMetadata: stewardv1.PodMetadata{Labels: map[string]string{"team": "a"}}}},
	}
	if err := env.Client.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	eventually(t, "seed Pod created", func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-0"}, pod)
	})
	args := strings.Join(pod.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--initial-cluster-state=new", "--initial-cluster=db-0=https://db-0.db." + ns + ".svc:2380"} {
		if !strings.Contains(args, want) {
			t.Errorf("seed args lack %s: %s", want, args)
		}
	}
	if pod.Spec.Containers[0].Image != "repo/etcd:v3.6.16" || pod.Labels["team"] != "a" {
		t.Errorf("seed Pod image %s labels %v", pod.Spec.Containers[0].Image, pod.Labels)
	}
	var pvc corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-db-0"}, &pvc); err != nil {
		t.Fatalf("seed PVC: %v", err)
	}
	checkSeedTLS(t, ns, pod)

	// With no kubelet the seed never runs, so the cluster must not grow past it, and say why.
	eventually(t, "status says it waits for the seed", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return err
		}
		c := meta.FindStatusCondition(ec.Status.Conditions, "Available")
		if ec.Status.Observed == nil || c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("observed=%v available=%+v", ec.Status.Observed != nil, c)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	var members stewardv1.EtcdMemberList
	if err := env.Client.List(ctx, &members, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(members.Items) != 1 || len(pods.Items) != 1 {
		t.Fatalf("%d members and %d Pods while the seed has not formed the cluster; want 1 and 1", len(members.Items), len(pods.Items))
	}
	if m := members.Items[0]; !slices.Contains(m.Finalizers, "etcd.steward.dev/member") || !metav1.IsControlledBy(&m, ec) {
		t.Errorf("member finalizers %v, owners %v", m.Finalizers, m.OwnerReferences)
	}

	var peer, cl corev1.Service
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &peer); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-client"}, &cl); err != nil {
		t.Fatal(err)
	}
	if peer.Spec.ClusterIP != corev1.ClusterIPNone || cl.Spec.Selector[stewardv1.LabelVoter] != "true" {
		t.Errorf("peer Service clusterIP %q, client selector %v", peer.Spec.ClusterIP, cl.Spec.Selector)
	}
	var pdb policyv1.PodDisruptionBudget
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &pdb); err != nil {
		t.Fatal(err)
	}
	if pdb.Spec.MinAvailable.IntVal != 2 {
		t.Errorf("PDB minAvailable = %v, want 2", pdb.Spec.MinAvailable)
	}
	// Four voter Pods for spec.replicas 3 (an add-first surge): the budget keeps 3, one eviction.
	for i := range 4 {
		labels := resources.SelectorLabels("db")
		labels[stewardv1.LabelVoter] = "true"
		labels[stewardv1.LabelMember] = fmt.Sprintf("surge-%d", i)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("surge-%d", i), Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}, NodeName: "nowhere"}}
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = env.Client.Delete(ctx, p) }()
	}
	// The seed's own Pod may carry the voter label too: the budget keeps one less than all of them.
	eventually(t, "PDB minAvailable one less than the voter Pods (4 or more for spec.replicas 3)", func() error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &pdb); err != nil {
			return err
		}
		var voters corev1.PodList
		sel := resources.SelectorLabels("db")
		sel[stewardv1.LabelVoter] = "true"
		if err := env.Client.List(ctx, &voters, client.InNamespace(ns), client.MatchingLabels(sel)); err != nil {
			return err
		}
		if len(voters.Items) < 4 {
			return fmt.Errorf("%d voter Pods", len(voters.Items))
		}
		if want := int32(len(voters.Items) - 1); pdb.Spec.MinAvailable.IntVal != want {
			return fmt.Errorf("minAvailable %v with %d voter Pods, want %d", pdb.Spec.MinAvailable, len(voters.Items), want)
		}
		return nil
	})

	// Disabling the budget removes it.
	patch := client.MergeFrom(ec.DeepCopy())
	ec.Spec.PodDisruptionBudget = &stewardv1.PodDisruptionBudgetSpec{Enabled: ptr.To(false)}
	if err := env.Client.Patch(ctx, ec, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "PDB deleted", func() error {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &pdb)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%w)", err)
	})
}

func TestDeletionFollowsRetentionPolicy(t *testing.T) {
	ctx := context.Background()
	for _, policy := range []stewardv1.RetentionPolicy{"", stewardv1.RetentionDelete} {
		t.Run("policy "+string(policy), func(t *testing.T) {
			ns := namespace(t)
			ec := &stewardv1.EtcdCluster{
				ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
				Spec: stewardv1.EtcdClusterSpec{MemberTemplate: stewardv1.MemberTemplate{Version: "3.6.16",
					Storage: stewardv1.StorageSpec{RetentionPolicy: policy}}},
			}
			if err := env.Client.Create(ctx, ec); err != nil {
				t.Fatal(err)
			}
			pvcKey := client.ObjectKey{Namespace: ns, Name: "data-db-0"}
			eventually(t, "seed PVC", func() error { return env.Client.Get(ctx, pvcKey, &corev1.PersistentVolumeClaim{}) })
			if err := env.Client.Delete(ctx, ec); err != nil {
				t.Fatal(err)
			}
			eventually(t, "cluster gone (no stuck finalizer)", func() error {
				err := env.Client.Get(ctx, client.ObjectKeyFromObject(ec), &stewardv1.EtcdCluster{})
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("still there (%w)", err)
			})
			// envtest runs no garbage collector, so members stay; their finalizer must be released.
			eventually(t, "member finalizer released", func() error {
				var m stewardv1.EtcdMember
				if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-0"}, &m); err != nil {
					return client.IgnoreNotFound(err)
				}
				if len(m.Finalizers) > 0 {
					return fmt.Errorf("finalizers %v", m.Finalizers)
				}
				return nil
			})
			var pvc corev1.PersistentVolumeClaim
			err := env.Client.Get(ctx, pvcKey, &pvc)
			deleted := apierrors.IsNotFound(err) || (err == nil && pvc.DeletionTimestamp != nil)
			if policy == stewardv1.RetentionDelete && !deleted {
				t.Errorf("retentionPolicy Delete kept the PVC (%v)", err)
			}
			if policy != stewardv1.RetentionDelete && deleted {
				t.Error("the default retention deleted data")
			}
		})
	}
}

// checkSeedTLS: TLS is on by default, so the seed's Secret exists before its Pod, holds server and
// peer leaves that validate for the member under the cluster CA, and the Pod records that CA as
// the trust it starts with. The application client Secret is there too.
func checkSeedTLS(t *testing.T, ns string, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	get := func(name string) *corev1.Secret {
		var s corev1.Secret
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
			t.Fatalf("Secret %s: %v", name, err)
		}
		return &s
	}
	ca, err := pki.LoadCA(get("db-ca").Data[pki.KeyCA], get("db-ca").Data[pki.KeyCAKey])
	if err != nil {
		t.Fatal(err)
	}
	member := get("db-0-tls")
	names := pki.MemberNames{Cluster: "db", Namespace: ns, Member: "db-0"}
	for _, c := range []struct {
		cert, key string
		usage     pki.Usage
	}{{resources.KeyServerCert, resources.KeyServerKey, pki.Server}, {resources.KeyPeerCert, resources.KeyPeerKey, pki.Peer}} {
		m := pki.Material{Cert: member.Data[c.cert], Key: member.Data[c.key], CA: member.Data[resources.KeyPeerCA]}
		if err := pki.Validate(m, pki.ExpectMember(c.usage, names), time.Now()); err != nil {
			t.Errorf("%s: %v", c.cert, err)
		}
	}
	if got, want := pod.Annotations[stewardv1.AnnotationTrust], pki.Fingerprint(ca.Cert); got != want {
		t.Errorf("seed Pod trusts %q, want the cluster CA %s", got, want)
	}
	app := get("db-client-tls")
	m := pki.Material{Cert: app.Data[pki.KeyCert], Key: app.Data[pki.KeyKey], CA: app.Data[pki.KeyCA]}
	if err := pki.Validate(m, pki.Expect{Usage: pki.Client}, time.Now()); err != nil || app.Type != corev1.SecretTypeTLS {
		t.Errorf("application client Secret (%s): %v", app.Type, err)
	}
}
