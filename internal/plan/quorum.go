package plan

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/evidence"
)

// TriggerAutomatic is the recovery trigger recorded for spec.quorumLoss.policy Automatic.
const TriggerAutomatic = "Automatic"

// defaultRecoveryAfter is spec.quorumLoss.afterSeconds' default.
const defaultRecoveryAfter = 300 * time.Second

// quorumRecovery runs a quorum-loss recovery (issue 12, after the etcd-io operator's design, made
// safer): fence every other member, start the survivor once with --force-new-cluster, restart it
// without the flag, drop the other members (their PVCs kept, detached), and let the cluster regrow
// through the learner path. Each stage is recorded in status before it acts. It starts only on
// etcd's own evidence that quorum is lost (internal/evidence); a refused trigger passes to the
// next steps, which keep recreating Pods on their PVCs (that alone may bring quorum back).
func (v *view) quorumRecovery() (Action, bool) {
	if p := v.recoveryInProgress(); p != nil {
		return v.continueRecovery(p), true
	}
	if _, _, ok := v.quorum(); ok || !v.formed() {
		return Action{}, false
	}
	q := v.quorumEvidence()
	trigger := v.recoveryTrigger(q)
	if trigger == "" || v.evidenceRefusal(trigger, q) != "" {
		return Action{}, false
	}
	p := v.recoveryPlan(trigger)
	if p.Refused != "" {
		return Action{}, false
	}
	from := p.Survivor
	if p.RestoreFrom != "" {
		from = "backup " + p.RestoreFrom
	}
	a := act(StartRecovery, p.Survivor, ReasonRecoveringQuorum, "recovering quorum from %s (%s): %s", from, trigger, p.Loss)
	a.Recovery = &stewardv1.QuorumRecoveryProgress{Survivor: p.Survivor, RestoreFrom: p.RestoreFrom, Stage: stewardv1.RecoveryFencing,
		Since: metav1.NewTime(v.f.Now), Trigger: trigger, Revision: p.Revision, Discarded: p.Discarded,
		Evidence: q.Summary(v.order())}
	return a, true
}

func (v *view) recoveryInProgress() *stewardv1.QuorumRecoveryProgress {
	if qr := v.f.Cluster.Status.QuorumRecovery; qr != nil {
		return qr.InProgress
	}
	return nil
}

func (v *view) recoverAnnotation() string {
	return strings.TrimSpace(v.f.Cluster.Annotations[stewardv1.AnnotationRecoverQuorum])
}

// recoveryTrigger: the annotation's value, or Automatic once the running operator has seen etcd's
// evidence of loss for afterSeconds without a break. Nothing triggers while etcd shows quorum.
func (v *view) recoveryTrigger(q evidence.Quorum) string {
	if q.State == evidence.Held {
		return ""
	}
	if t := v.recoverAnnotation(); t != "" {
		return t
	}
	ql := v.f.Cluster.Spec.QuorumLoss
	if ql == nil || ql.Policy != stewardv1.QuorumLossAutomatic {
		return ""
	}
	after := defaultRecoveryAfter
	if ql.AfterSeconds != nil {
		after = time.Duration(*ql.AfterSeconds) * time.Second
	}
	if since, ok := v.lostSince(q); ok && !v.f.Now.Before(since.Add(after)) {
		return TriggerAutomatic
	}
	return ""
}

// lostSince is since when this operator process has seen the evidence of loss without a break:
// status' record when this very process wrote it, now otherwise (a restarted operator, or a new
// leader, has watched nothing yet). ok is false while the evidence does not show the loss.
func (v *view) lostSince(q evidence.Quorum) (since time.Time, ok bool) {
	if q.State != evidence.Lost {
		return time.Time{}, false
	}
	if qr := v.f.Cluster.Status.QuorumRecovery; qr != nil && qr.LostSince != nil && qr.Observer == v.f.Observer {
		return qr.LostSince.Time, true
	}
	return v.f.Now, true
}

// evidenceRefusal says why a trigger may not run on this evidence: Automatic needs the loss shown;
// the annotation needs it shown too, or the human's confirmation naming this cluster's ID.
func (v *view) evidenceRefusal(trigger string, q evidence.Quorum) string {
	switch {
	case q.State == evidence.Lost:
		return ""
	case q.State == evidence.Held:
		return "etcd shows quorum: " + q.Proof
	case trigger != TriggerAutomatic && v.confirmed():
		return ""
	}
	return fmt.Sprintf("%s; Steward recovers only on etcd's evidence that quorum is lost, never on members it cannot reach. "+
		"If they are gone for good, confirm with the annotation %s=%s beside %s", q.Summary(v.order()),
		stewardv1.AnnotationRecoverQuorumConfirm, v.clusterIDOrPlaceholder(), stewardv1.AnnotationRecoverQuorum)
}

// confirmed: the human's confirmation names this cluster's etcd ID.
func (v *view) confirmed() bool {
	id := v.f.Cluster.Status.ClusterID
	return id != "" && strings.TrimSpace(v.f.Cluster.Annotations[stewardv1.AnnotationRecoverQuorumConfirm]) == id
}

func (v *view) clusterIDOrPlaceholder() string {
	if id := v.f.Cluster.Status.ClusterID; id != "" {
		return id
	}
	return "<status.clusterID>"
}

// dropRecoverAnnotation says why the recover-quorum annotation is removed now ("" keeps it): it
// is refused or not needed, and left in place it would fire on the next blip.
func (v *view) dropRecoverAnnotation(q evidence.Quorum) string {
	t := v.recoverAnnotation()
	if t == "" || v.recoveryInProgress() != nil {
		return ""
	}
	if _, _, ok := v.quorum(); ok || !v.formed() || q.State == evidence.Held {
		return fmt.Sprintf("%s=%s is not needed: quorum is healthy", stewardv1.AnnotationRecoverQuorum, t)
	}
	if why := v.evidenceRefusal(t, q); why != "" {
		return fmt.Sprintf("%s=%s is refused: %s", stewardv1.AnnotationRecoverQuorum, t, why)
	}
	if p := v.recoveryPlan(t); p.Refused != "" {
		return fmt.Sprintf("%s=%s is refused: %s", stewardv1.AnnotationRecoverQuorum, t, p.Refused)
	}
	return ""
}

// recoveryPlan picks the survivor: a member with data whose etcd answers, the highest raft index
// first, the lowest ordinal on a tie; trigger "auto"/Automatic takes it, a member name insists.
func (v *view) recoveryPlan(trigger string) stewardv1.QuorumRecoveryPlan {
	var p stewardv1.QuorumRecoveryPlan
	if v.f.memory() {
		return v.restorePlan("storage is Memory: a survivor's data lives only in its running Pod, and starting it with " +
			"--force-new-cluster means restarting it")
	}
	var best *memberView
	for _, m := range v.active() {
		if !v.canSurvive(m) {
			continue
		}
		if best == nil || m.ep.RaftIndex > best.ep.RaftIndex {
			best = m
		}
	}
	named := trigger != "auto" && trigger != TriggerAutomatic
	if named {
		best = nil
		for _, m := range v.active() {
			if m.Name == trigger {
				best = m
			}
		}
		switch {
		case best == nil:
			p.Refused = fmt.Sprintf("no member is named %q; use auto or one of %s", trigger, strings.Join(v.names(), ", "))
			return p
		case !v.canSurvive(best):
			p.Refused = fmt.Sprintf("%s is not a voter whose etcd answers with its data (Pod running, PVC present)", trigger)
			return p
		}
	}
	if best == nil {
		return v.restorePlan("no member with data answers: no survivor")
	}
	p.Survivor, p.RaftIndex, p.Revision = best.Name, best.ep.RaftIndex, best.ep.Revision
	var ahead []string
	for _, m := range v.active() {
		if m == best {
			continue
		}
		p.Discarded = append(p.Discarded, m.Name)
		if m.ep != nil && m.ep.Reachable && m.ep.RaftIndex > best.ep.RaftIndex {
			ahead = append(ahead, fmt.Sprintf("%s (raft index %d)", m.Name, m.ep.RaftIndex))
		}
	}
	p.Loss = fmt.Sprintf("keeps %s's data (raft index %d, revision %d); writes only %s applied are lost; "+
		"the other members' PVCs are kept, detached, for forensics", best.Name, best.ep.RaftIndex, best.ep.Revision,
		strings.Join(p.Discarded, ", "))
	if len(ahead) > 0 {
		p.Loss += "; " + strings.Join(ahead, ", ") + " applied more than the survivor: their newer writes are lost"
	}
	return p
}

// restorePlan offers the newest successful backup of this cluster when no member can be a survivor:
// every member is dropped (PVCs kept, detached) and a new seed is restored from it, with the
// revision bump of a restore. Without one, nothing can be recovered here.
func (v *view) restorePlan(why string) stewardv1.QuorumRecoveryPlan {
	if held := v.dataHolders(); len(held) > 0 {
		return stewardv1.QuorumRecoveryPlan{Discarded: v.names(), Refused: why + "; " + strings.Join(held, ", ") + " keep their PVCs " +
			"and may hold writes newer than any backup: Steward rebuilds from a backup only when no member has data, and " +
			"recreates their Pods on their PVCs meanwhile (delete those PVCs to choose the backup)"}
	}
	var b *stewardv1.BackupRef
	if s := v.f.Cluster.Status.Backup; s != nil {
		b = s.LastSuccessfulBackup
	}
	if b == nil {
		return stewardv1.QuorumRecoveryPlan{Refused: why + ", and this cluster has no successful EtcdBackup; restore one into a " +
			"new cluster (spec.bootstrap.restore)"}
	}
	p := stewardv1.QuorumRecoveryPlan{RestoreFrom: b.Name, Revision: b.Revision, Discarded: v.names()}
	taken := "at an unknown time"
	if b.Time != nil {
		taken = b.Time.UTC().Format(time.RFC3339)
	}
	p.Loss = fmt.Sprintf("%s; rebuilds the cluster from backup %s (revision %d, taken %s): every write after it is lost, "+
		"revisions jump past it (clients re-list); the members' PVCs are kept, detached, for forensics", why, b.Name, b.Revision, taken)
	return p
}

// dataHolders are the members whose PVC still exists: silent or not, their data may be the newest.
func (v *view) dataHolders() []string {
	if v.f.memory() {
		return nil
	}
	var out []string
	for _, m := range v.active() {
		if m.PVC.Exists && !m.PVC.Deleting {
			out = append(out, m.Name)
		}
	}
	return out
}

// canSurvive: a voter (it ran as one) with its data, whose etcd answers.
func (v *view) canSurvive(m *memberView) bool {
	return m.Phase == stewardv1.MemberRunning && !m.Replacing && m.ID != "" && m.Pod.Exists && !m.Pod.Deleting &&
		m.PVC.Exists && !m.PVC.Deleting && m.ep != nil && m.ep.Reachable && m.ep.RaftIndex > 0
}

func (v *view) names() []string {
	var out []string
	for _, m := range v.active() {
		out = append(out, m.Name)
	}
	return out
}

// ConditionQuorumRecovery is True while a quorum recovery runs; otherwise its reason says whether
// one is possible (the plan), refused, not needed, or done.
const ConditionQuorumRecovery = "QuorumRecovery"

// recoveryStatus is status.quorumRecovery's lostSince, observer and plan (inProgress and last are
// the controller's records, kept as they are). The plan is shown while etcd does not show quorum,
// whether or not the evidence is complete enough to run it.
func (v *view) recoveryStatus(q evidence.Quorum) (since *metav1.Time, observer string, p *stewardv1.QuorumRecoveryPlan) {
	if _, _, ok := v.quorum(); ok || !v.formed() || v.recoveryInProgress() != nil || q.State == evidence.Held || v.f.Adopting() {
		// An adopting cluster's quorum is the source's: Steward plans no recovery of it.
		return nil, "", nil
	}
	if t, ok := v.lostSince(q); ok {
		since, observer = ptrTime(t), v.f.Observer
	}
	trigger := v.recoveryTrigger(q)
	if trigger == "" {
		trigger = "auto"
	}
	plan := v.recoveryPlan(trigger)
	return since, observer, &plan
}

func ptrTime(t time.Time) *metav1.Time {
	m := metav1.NewTime(t)
	return &m
}

func (v *view) recoveryCondition(p *stewardv1.QuorumRecoveryPlan, q evidence.Quorum) metav1.Condition {
	annotation := v.recoverAnnotation()
	if ip := v.recoveryInProgress(); ip != nil {
		from := ip.Survivor
		if ip.RestoreFrom != "" {
			from = "backup " + ip.RestoreFrom
		}
		return cond(ConditionQuorumRecovery, true, ReasonRecoveringQuorum, "recovering from %s (%s), stage %s since %s",
			from, ip.Trigger, ip.Stage, ip.Since.UTC().Format(time.RFC3339))
	}
	if p == nil {
		return v.quorumHealthyCondition(annotation, q)
	}
	if annotation != "" {
		if why := v.evidenceRefusal(annotation, q); why != "" {
			return cond(ConditionQuorumRecovery, false, ReasonQuorumRecoveryRefused, "%s=%s refused: %s", stewardv1.AnnotationRecoverQuorum, annotation, why)
		}
	}
	what := "survivor " + p.Survivor + ", " + p.Loss
	switch {
	case p.Refused != "":
		what = "none could run now: " + p.Refused
	case p.RestoreFrom != "":
		what = p.Loss
	}
	if q.State != evidence.Lost {
		return cond(ConditionQuorumRecovery, false, ReasonMembersUnreachable, "%s; no recovery runs on silence (Automatic waits for "+
			"evidence); if those members are gone for good, %s=auto and %s=%s run the plan: %s", q.Summary(v.order()),
			stewardv1.AnnotationRecoverQuorum, stewardv1.AnnotationRecoverQuorumConfirm, v.clusterIDOrPlaceholder(), what)
	}
	if p.Refused != "" {
		return cond(ConditionQuorumRecovery, false, ReasonQuorumRecoveryRefused, "quorum lost; no recovery possible: %s", p.Refused)
	}
	how := fmt.Sprintf("set the annotation %s=auto (or =<member>) to run it", stewardv1.AnnotationRecoverQuorum)
	if ql := v.f.Cluster.Spec.QuorumLoss; ql != nil && ql.Policy == stewardv1.QuorumLossAutomatic {
		how = "spec.quorumLoss.policy Automatic runs it once this operator has seen the loss for afterSeconds"
	}
	return cond(ConditionQuorumRecovery, false, ReasonQuorumLost, "%s; recovery plan: %s; %s", q.Summary(v.order()), what, how)
}

// quorumHealthyCondition: no recovery is needed; what the annotation, the evidence and the last
// recovery say.
func (v *view) quorumHealthyCondition(annotation string, q evidence.Quorum) metav1.Condition {
	_, _, ok := v.quorum()
	switch {
	case annotation != "":
		return cond(ConditionQuorumRecovery, false, ReasonQuorumRecoveryNotNeeded, "%s=%s is ignored: quorum is healthy",
			stewardv1.AnnotationRecoverQuorum, annotation)
	case !ok && v.formed() && q.State == evidence.Held:
		return cond(ConditionQuorumRecovery, false, ReasonMembersUnreachable, "%s; no recovery is needed", q.Summary(v.order()))
	}
	if qr := v.f.Cluster.Status.QuorumRecovery; qr != nil && qr.Last != nil {
		if qr.Last.Outcome == stewardv1.RecoveryAborted {
			return cond(ConditionQuorumRecovery, false, ReasonQuorumRecoveryAborted, "last recovery aborted %s: %s",
				qr.Last.Time.UTC().Format(time.RFC3339), qr.Last.Message)
		}
		from := qr.Last.Survivor
		if qr.Last.RestoreFrom != "" {
			from = "backup " + qr.Last.RestoreFrom
		}
		return cond(ConditionQuorumRecovery, false, ReasonQuorumRecovered, "last recovery %s from %s (revision %d, %s)",
			qr.Last.Time.UTC().Format(time.RFC3339), from, qr.Last.Revision, qr.Last.Trigger)
	}
	return cond(ConditionQuorumRecovery, false, ReasonQuorumHealthy, "quorum is healthy")
}
