package kubectletcd

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func TestStatusText(t *testing.T) {
	h := newHarness(t, nil, allFixtures()...)
	if err := h.run(t, "status", "demo", "-n", "db"); err != nil {
		t.Fatal(err)
	}
	golden(t, "status.golden", h.out.Bytes())
}

func TestStatusJSON(t *testing.T) {
	h := newHarness(t, nil, allFixtures()...)
	if err := h.run(t, "status", "demo", "-o", "json"); err != nil {
		t.Fatal(err)
	}
	golden(t, "status-json.golden", h.out.Bytes())
	var s Status
	if err := json.Unmarshal(h.out.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if s.Leader != "demo-1" || len(s.Members) != 3 || s.Backup.LastSuccessful == nil || s.Backup.LastSuccessful.Size == 0 {
		t.Fatalf("parsed status: leader %q, %d members, backup %+v", s.Leader, len(s.Members), s.Backup.LastSuccessful)
	}
}

func TestStatusYAML(t *testing.T) {
	h := newHarness(t, nil, allFixtures()...)
	if err := h.run(t, "status", "demo", "-o", "yaml"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.out.String(), "leader: demo-1\n") {
		t.Fatalf("yaml output lacks the leader:\n%s", h.out)
	}
	if err := h.run(t, "status", "demo", "-o", "xml"); err == nil || !strings.Contains(err.Error(), "use json or yaml") {
		t.Fatalf("-o xml: %v", err)
	}
}

// quorumLost is the fixture after two members' PVCs were lost: status says so and carries the
// operator's recovery plan.
func quorumLost() *stewardv1.EtcdCluster {
	ec := fixtureCluster()
	ec.Status.ReadyMembers = 1
	for i := range ec.Status.Members {
		m := &ec.Status.Members[i]
		if m.Name != "demo-0" {
			m.Ready, m.Role = false, stewardv1.RoleUnknown
		} else {
			m.Role = stewardv1.RoleFollower
		}
	}
	ec.Status.Conditions[0] = metav1.Condition{Type: "Available", Status: metav1.ConditionFalse, Reason: "QuorumLost",
		Message: "1 of 3 voters healthy, below quorum 2", LastTransitionTime: at(-10 * time.Minute)}
	ec.Status.QuorumRecovery = &stewardv1.QuorumRecoveryStatus{LostSince: ptr.To(at(-10 * time.Minute)),
		Plan: &stewardv1.QuorumRecoveryPlan{Survivor: "demo-0", RaftIndex: 90211, Revision: 48800,
			Discarded: []string{"demo-1", "demo-2"}, Loss: "nothing: no other member applied more than demo-0"}}
	return ec
}

func TestStatusQuorumLost(t *testing.T) {
	objs := append([]client.Object{quorumLost()}, allFixtures()[1:]...)
	h := newHarness(t, nil, objs...)
	if err := h.run(t, "status", "demo"); err != nil {
		t.Fatal(err)
	}
	golden(t, "status-quorum-lost.golden", h.out.Bytes())

	// Commands that must reach etcd refuse at once, with what status says.
	for _, args := range [][]string{{"move-leader", "demo"}, {"etcdctl", "demo", "--", "endpoint", "status"}, {"backup", "demo"}, {"defrag", "demo"}} {
		err := h.run(t, args...)
		if !errors.Is(err, errNoQuorum) || !strings.Contains(err.Error(), "1 of 3 voters healthy, below quorum 2") ||
			!strings.Contains(err.Error(), "recover-quorum demo --dry-run") {
			t.Errorf("%v: %v, want a no-quorum error naming the plan", args, err)
		}
	}

	h.out.Reset()
	if err := h.run(t, "recover-quorum", "demo", "--dry-run"); err != nil {
		t.Fatal(err)
	}
	golden(t, "recover-quorum.golden", h.out.Bytes())
	if len(h.patches) != 0 {
		t.Fatalf("--dry-run patched: %q", h.patches)
	}
	// The fake client cannot patch an object holding a uint64 (raftIndex): a plan without it.
	ec := quorumLost()
	ec.Status.QuorumRecovery.Plan.RaftIndex = 0
	h = newHarness(t, nil, append([]client.Object{ec}, allFixtures()[1:]...)...)
	if err := h.run(t, "recover-quorum", "demo", "--survivor", "demo-0"); err != nil {
		t.Fatal(err)
	}
	ec, _ = getCluster(context.Background(), h.env, "demo")
	if v := ec.Annotations[stewardv1.AnnotationRecoverQuorum]; v != "demo-0" {
		t.Fatalf("recover-quorum annotation %q, want demo-0", v)
	}
}

// The operator cannot reach two members: status says so, and recover-quorum asks for the human's
// confirmation before it sets the annotation, then names the cluster ID in it.
func TestRecoverQuorumMembersUnreachable(t *testing.T) {
	ec := quorumLost()
	ec.Status.Conditions[0] = metav1.Condition{Type: "Available", Status: metav1.ConditionUnknown, Reason: "MembersUnreachable",
		Message:            "quorum unknown: 1 of 3 voters show they cannot take part in one; the operator cannot reach demo-1, demo-2 (timeout)",
		LastTransitionTime: at(-time.Minute)}
	ec.Status.QuorumRecovery.LostSince, ec.Status.QuorumRecovery.Plan.RaftIndex = nil, 0
	h := newHarness(t, nil, append([]client.Object{ec}, allFixtures()[1:]...)...)
	if err := h.run(t, "status", "demo"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.out.String(), "MEMBERS UNREACHABLE") {
		t.Errorf("status does not say the members are unreachable:\n%s", h.out.String())
	}
	err := h.run(t, "recover-quorum", "demo")
	if err == nil || !strings.Contains(err.Error(), "--confirm-unreachable-gone") {
		t.Fatalf("recover-quorum without confirmation: %v", err)
	}
	if len(h.patches) != 0 {
		t.Fatalf("patched without confirmation: %q", h.patches)
	}
	if err := h.run(t, "recover-quorum", "demo", "--confirm-unreachable-gone"); err != nil {
		t.Fatal(err)
	}
	got, _ := getCluster(context.Background(), h.env, "demo")
	if got.Annotations[stewardv1.AnnotationRecoverQuorum] != "auto" ||
		got.Annotations[stewardv1.AnnotationRecoverQuorumConfirm] != ec.Status.ClusterID || ec.Status.ClusterID == "" {
		t.Fatalf("annotations %v, want auto confirmed with cluster ID %q", got.Annotations, ec.Status.ClusterID)
	}
}

func TestNotFound(t *testing.T) {
	h := newHarness(t, nil, allFixtures()...)
	for _, cmd := range []string{"status", "pause", "resume", "defrag", "backup", "move-leader", "report", "recover-quorum"} {
		err := h.run(t, cmd, "x", "-n", "y")
		if err == nil || err.Error() != `etcdcluster "x" not found in namespace "y"` {
			t.Errorf("%s x -n y: %v", cmd, err)
		}
	}
}

func TestForbidden(t *testing.T) {
	forbid := &interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*stewardv1.EtcdCluster); ok {
				return apierrors.NewForbidden(schema.GroupResource{Group: group, Resource: "etcdclusters"}, key.Name,
					errors.New(`User "dev" cannot get resource "etcdclusters"`))
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*stewardv1.EtcdBackupList); ok {
				return apierrors.NewForbidden(schema.GroupResource{Group: group, Resource: "etcdbackups"}, "", errors.New("no"))
			}
			return c.List(ctx, list, opts...)
		},
	}
	h := newHarness(t, forbid, allFixtures()...)
	err := h.run(t, "status", "demo")
	if err == nil || !strings.HasPrefix(err.Error(), `forbidden: you cannot get etcdclusters.etcd.steward.dev in namespace "db" (ask for RBAC verb "get" on resource "etcdclusters.etcd.steward.dev")`) {
		t.Fatalf("got %v", err)
	}

	onlyBackups := &interceptor.Funcs{List: forbid.List}
	h = newHarness(t, onlyBackups, allFixtures()...)
	err = h.run(t, "status", "demo")
	if err == nil || !strings.Contains(err.Error(), `you cannot list etcdbackups.etcd.steward.dev in namespace "db"`) {
		t.Fatalf("got %v", err)
	}
}

func TestAgeAndSize(t *testing.T) {
	for d, want := range map[time.Duration]string{30 * time.Second: "30s ago", -3 * time.Hour: "in 3h", 49 * time.Hour: "2d ago", 5 * time.Minute: "5m ago"} {
		if got := age(now, now.Add(-d)); got != want {
			t.Errorf("age(%s) = %q, want %q", d, got, want)
		}
	}
	for n, want := range map[int64]string{0: "-", 512: "512B", 25 << 20: "25.0MiB", 3 << 30: "3.0GiB"} {
		if got := size(n); got != want {
			t.Errorf("size(%d) = %q, want %q", n, got, want)
		}
	}
}

// A downgrade in progress shows its stage, its backup and what it waits for.
func TestStatusDowngrade(t *testing.T) {
	ec := allFixtures()[0].(*stewardv1.EtcdCluster).DeepCopy()
	ec.Status.Downgrade = &stewardv1.DowngradeStatus{From: "3.7.3", Target: "3.6.16", Stage: stewardv1.DowngradeEnabled,
		StartedAt: at(-2 * time.Minute), Backup: "demo-before-downgrade-3-6-1796000000",
		Message: "etcd's downgrade to 3.6.16 is enabled; the members roll once every one reports storage version 3.6.0"}
	h := newHarness(t, nil, append([]client.Object{ec}, allFixtures()[1:]...)...)
	if err := h.run(t, "status", "demo"); err != nil {
		t.Fatal(err)
	}
	want := "Downgrade:     3.7.3 -> 3.6.16: Enabled (started 2m ago); backup demo-before-downgrade-3-6-1796000000; etcd's downgrade"
	if !strings.Contains(h.out.String(), want) {
		t.Errorf("status lacks %q:\n%s", want, h.out.String())
	}
}
