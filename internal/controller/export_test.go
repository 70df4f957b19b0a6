package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/authplan"
	"github.com/etcd-steward/steward/internal/etcd"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/plan"
)

// Test hooks for the external test package: the controller's real apply and effects, on facts the
// test sets up in a real API server.

// GatherAndApply gathers like a reconcile and applies the given action.
func (r *EtcdClusterReconciler) GatherAndApply(ctx context.Context, ec *stewardv1.EtcdCluster, a plan.Action) error {
	o, err := r.gather(ctx, ec)
	if err != nil {
		return err
	}
	return r.apply(ctx, ec, o, a)
}

// DeletePodJudged deletes a member's Pod through the raw effect, as judged from the given Pod
// object (the one the reconcile read, possibly stale).
func (r *EtcdClusterReconciler) DeletePodJudged(ctx context.Context, ec *stewardv1.EtcdCluster, judged *corev1.Pod) error {
	o := &observed{pods: map[string]*corev1.Pod{judged.Name: judged}}
	return effects{r: r, o: o, ec: ec}.DeletePod(ctx, judged.Name)
}

// DrainJudged drains a member's Pod through the raw effect, with short waits.
func (r *EtcdClusterReconciler) DrainJudged(ctx context.Context, ec *stewardv1.EtcdCluster, judged *corev1.Pod, timeout, grace time.Duration) error {
	drainTimeout, drainGrace = timeout, grace
	o := &observed{pods: map[string]*corev1.Pod{judged.Name: judged}}
	return effects{r: r, o: o, ec: ec}.Drain(ctx, judged.Name)
}

// Undrain puts a drained Pod back into the client Service.
func (r *EtcdClusterReconciler) Undrain(ctx context.Context, p *corev1.Pod) error {
	return r.undrain(ctx, p)
}

// MemberEvent records an event about one member, as reconciles do.
func (r *EtcdClusterReconciler) MemberEvent(ec *stewardv1.EtcdCluster, member, reason, note string) {
	r.memberEvent(ec, member, corev1.EventTypeNormal, reason, "%s", note)
}

// EnsureServices is the reconcile's upkeep of the Services and the PDB.
func (r *EtcdClusterReconciler) EnsureServices(ctx context.Context, ec *stewardv1.EtcdCluster) error {
	_, err := r.ensureServices(ctx, ec)
	return err
}

// EnsureServicesTaken is EnsureServices with the names of Services it left alone.
func (r *EtcdClusterReconciler) EnsureServicesTaken(ctx context.Context, ec *stewardv1.EtcdCluster) ([]string, error) {
	return r.ensureServices(ctx, ec)
}

// WriteStatus is the reconcile's status write; locked for an intent (RecoveryIntent).
func (r *EtcdClusterReconciler) WriteStatus(ctx context.Context, base, ec *stewardv1.EtcdCluster, locked bool) error {
	return r.writeStatus(ctx, base, ec, locked)
}

// ImageHold is the reconcile's verdict on the Steward image for the plan (Facts.ImageHold).
func (r *EtcdClusterReconciler) ImageHold(ctx context.Context) string {
	return r.imageHold(ctx)
}

// RestartContainerJudged restarts a member's etcd container in place through the raw effect, as
// judged from the given Pod object.
func (r *EtcdClusterReconciler) RestartContainerJudged(ctx context.Context, ec *stewardv1.EtcdCluster, judged *corev1.Pod) error {
	o := &observed{pods: map[string]*corev1.Pod{judged.Name: judged}}
	return effects{r: r, o: o, ec: ec}.RestartContainer(ctx, judged.Name)
}

// SyncMemberStatus is the reconcile's EtcdMember status write, for these members.
func (r *EtcdClusterReconciler) SyncMemberStatus(ctx context.Context, members []*stewardv1.EtcdMember, d plan.Decision) error {
	o := &observed{members: map[string]*stewardv1.EtcdMember{}}
	for _, m := range members {
		o.members[m.Name] = m
	}
	return r.syncMemberStatus(ctx, o, d)
}

// NodeFactsFor runs the node reads of a reconcile over the given members, Pods and PVCs.
func (r *EtcdClusterReconciler) NodeFactsFor(ctx context.Context, members []plan.Member, pods map[string]*corev1.Pod,
	pvcs map[string]*corev1.PersistentVolumeClaim) []plan.Member {
	r.nodeFacts(ctx, r.reader(), members, pods, pvcs)
	return members
}

// PrepareEvictionJudged carries out a planned PrepareEviction's effects, as the Disrupter does
// once its check passed: the drain (with short waits), then the mark on the Pod.
func (r *EtcdClusterReconciler) PrepareEvictionJudged(ctx context.Context, ec *stewardv1.EtcdCluster, judged *corev1.Pod) error {
	drainTimeout, drainGrace = 100*time.Millisecond, 0
	o := &observed{pods: map[string]*corev1.Pod{judged.Name: judged}}
	if err := (effects{r: r, o: o, ec: ec}).Drain(ctx, judged.Name); err != nil {
		return err
	}
	return effects{r: r, o: o, ec: ec}.PrepareEviction(ctx, judged.Name)
}

// ScaleSource is the ScaleSource action's effect.
func (r *EtcdClusterReconciler) ScaleSource(ctx context.Context, ec *stewardv1.EtcdCluster, a plan.Action) error {
	return r.scaleSource(ctx, ec, a)
}

// ErrRetry is the "not yet, plan again" answer of an effect.
var ErrRetry = errRetry

// DowngradeBackup is the plan's fact of the backup status.downgrade names.
func (r *EtcdClusterReconciler) DowngradeBackup(ctx context.Context, ec *stewardv1.EtcdCluster) (*plan.BackupFact, error) {
	return r.downgradeBackup(ctx, ec)
}

// AuthRound is one reconcile's etcd authentication work on the given etcd client, as Reconcile
// does it once the planner reaches the auth step: facts, the decision, the step, status.auth.
func (r *EtcdClusterReconciler) AuthRound(ctx context.Context, ec *stewardv1.EtcdCluster, cl *etcd.Client) (authplan.Step, error) {
	f := r.authFacts(ctx, ec, &observed{client: cl})
	s := authplan.Decide(f)
	var err error
	if !s.Done() && s.Kind != authplan.Wait && s.Kind != authplan.Refuse {
		err = r.authenticate(ctx, ec, &observed{client: cl}, s)
	}
	setAuthStatus(ec, f, s)
	return s, err
}

// AuthRoundWithoutQuorum is AuthRound in a reconcile whose member list failed.
func (r *EtcdClusterReconciler) AuthRoundWithoutQuorum(ctx context.Context, ec *stewardv1.EtcdCluster, cl *etcd.Client) authplan.Step {
	o := &observed{client: cl}
	o.facts.Etcd.MemberListErr = "context deadline exceeded"
	f := r.authFacts(ctx, ec, o)
	s := authplan.Decide(f)
	setAuthStatus(ec, f, s)
	return s
}

// AuthApply carries out one given auth step (a step repeated, as after a crash).
func (r *EtcdClusterReconciler) AuthApply(ctx context.Context, ec *stewardv1.EtcdCluster, cl *etcd.Client, s authplan.Step) error {
	return r.authenticate(ctx, ec, &observed{client: cl}, s)
}

// WriteCRL is writeCRL with the cluster's CA as prepareTLS would have read it (nil: none yet).
func (r *EtcdClusterReconciler) WriteCRL(ctx context.Context, ec *stewardv1.EtcdCluster, ca *pki.CA) (bool, error) {
	s, err := r.writeCRL(ctx, ec, &tlsObserved{ca: ca})
	return s.current, err
}

// UserCertificates is userCertificates with the facts it reads: the cluster's CA and the next one
// (rotation), the shared client Secret as read, the users etcd has, and whether the revocation list
// Secret is current.
func (r *EtcdClusterReconciler) UserCertificates(ctx context.Context, ec *stewardv1.EtcdCluster, ca, next *pki.CA,
	app *corev1.Secret, etcdUsers []string, crlCurrent bool) error {
	o := &observed{crl: crlState{current: crlCurrent}}
	o.auth.Etcd.Users = map[string][]string{}
	for _, u := range etcdUsers {
		o.auth.Etcd.Users[u] = nil
	}
	return r.userCertificates(ctx, ec, o, &tlsObserved{ca: ca, next: next, appSecret: app})
}

// BackupCertificate is backupCertificate with the CA, the next CA and the shared client Secret.
func (r *EtcdClusterReconciler) BackupCertificate(ctx context.Context, ec *stewardv1.EtcdCluster, ca, next *pki.CA, app *corev1.Secret) error {
	return r.backupCertificate(ctx, ec, &tlsObserved{ca: ca, next: next, appSecret: app})
}

// Password reads a declared user's password as the auth step does.
func (r *EtcdClusterReconciler) Password(ctx context.Context, ec *stewardv1.EtcdCluster, u stewardv1.AuthUser) ([]byte, error) {
	return r.password(ctx, ec, u)
}
