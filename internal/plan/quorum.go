package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
)

// TriggerAutomatic is the recovery trigger recorded for spec.quorumLoss.policy Automatic.
const TriggerAutomatic = "Automatic"

// defaultRecoveryAfter is spec.quorumLoss.afterSeconds' default.
const defaultRecoveryAfter = 300 * time.Second

// quorumRecovery runs a quorum-loss recovery (issue 12, after the etcd-io operator's design, made
// safer): fence every other member, start the survivor once with --force-new-cluster, restart it
// without the flag, drop the other members (their PVCs kept, detached), and let the cluster regrow
// through the learner path. Each stage is recorded in status before it acts.
func (v *view) quorumRecovery() (Action, bool) {
	if p := v.recoveryInProgress(); p != nil {
		return v.continueRecovery(p), true
	}
	if _, _, ok := v.quorum(); ok || !v.formed() {
		return Action{}, false
	}
	trigger := v.recoveryTrigger()
	if trigger == "" {
		return Action{}, false
	}
	p := v.recoveryPlan(trigger)
	if p.Refused != "" {
		return wait(ReasonRecoveryRefused, "quorum recovery (%s) refused: %s", trigger, p.Refused), true
	}
	from := p.Survivor
	if p.RestoreFrom != "" {
		from = "backup " + p.RestoreFrom
	}
	a := act(StartRecovery, p.Survivor, ReasonRecoveringQuorum, "recovering quorum from %s (%s): %s", from, trigger, p.Loss)
	a.Recovery = &v1alpha1.QuorumRecoveryProgress{Survivor: p.Survivor, RestoreFrom: p.RestoreFrom, Stage: v1alpha1.RecoveryFencing,
		Since: metav1.NewTime(v.f.Now), Trigger: trigger, Revision: p.Revision, Discarded: p.Discarded}
	return a, true
}

func (v *view) recoveryInProgress() *v1alpha1.QuorumRecoveryProgress {
	if qr := v.f.Cluster.Status.QuorumRecovery; qr != nil {
		return qr.InProgress
	}
	return nil
}

// recoveryTrigger: the annotation's value, or Automatic once quorum has been lost long enough.
func (v *view) recoveryTrigger() string {
	if t := strings.TrimSpace(v.f.Cluster.Annotations[v1alpha1.AnnotationRecoverQuorum]); t != "" {
		return t
	}
	q := v.f.Cluster.Spec.QuorumLoss
	if q == nil || q.Policy != v1alpha1.QuorumLossAutomatic {
		return ""
	}
	after := defaultRecoveryAfter
	if q.AfterSeconds != nil {
		after = time.Duration(*q.AfterSeconds) * time.Second
	}
	if since := v.lostSince(); !since.IsZero() && !v.f.Now.Before(since.Add(after)) {
		return TriggerAutomatic
	}
	return ""
}

// lostSince is when quorum was first seen lost, as status recorded it; zero when not lost.
func (v *view) lostSince() time.Time {
	if _, _, ok := v.quorum(); ok {
		return time.Time{}
	}
	if qr := v.f.Cluster.Status.QuorumRecovery; qr != nil && qr.LostSince != nil {
		return qr.LostSince.Time
	}
	return v.f.Now
}

// recoveryPlan picks the survivor: a member with data whose etcd answers, the highest raft index
// first, the lowest ordinal on a tie; trigger "auto"/Automatic takes it, a member name insists.
func (v *view) recoveryPlan(trigger string) v1alpha1.QuorumRecoveryPlan {
	var p v1alpha1.QuorumRecoveryPlan
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
func (v *view) restorePlan(why string) v1alpha1.QuorumRecoveryPlan {
	var b *v1alpha1.BackupRef
	if s := v.f.Cluster.Status.Backup; s != nil {
		b = s.LastSuccessfulBackup
	}
	if b == nil {
		return v1alpha1.QuorumRecoveryPlan{Refused: why + ", and this cluster has no successful EtcdBackup; restore one into a " +
			"new cluster (spec.bootstrap.restore)"}
	}
	p := v1alpha1.QuorumRecoveryPlan{RestoreFrom: b.Name, Revision: b.Revision, Discarded: v.names()}
	taken := "at an unknown time"
	if b.Time != nil {
		taken = b.Time.UTC().Format(time.RFC3339)
	}
	p.Loss = fmt.Sprintf("%s; rebuilds the cluster from backup %s (revision %d, taken %s): every write after it is lost, "+
		"revisions jump past it (clients re-list); the members' PVCs are kept, detached, for forensics", why, b.Name, b.Revision, taken)
	return p
}

// canSurvive: a voter (it ran as one) with its data, whose etcd answers.
func (v *view) canSurvive(m *memberView) bool {
	return m.Phase == v1alpha1.MemberRunning && !m.Replacing && m.ID != "" && m.Pod.Exists && !m.Pod.Deleting &&
		m.PVC.Exists && !m.PVC.Deleting && m.ep != nil && m.ep.Reachable && m.ep.RaftIndex > 0
}

func (v *view) names() []string {
	var out []string
	for _, m := range v.active() {
		out = append(out, m.Name)
	}
	return out
}

// continueRecovery takes the next step of the recovery in progress.
func (v *view) continueRecovery(p *v1alpha1.QuorumRecoveryProgress) Action {
	var s *memberView
	for _, m := range v.members {
		if m.Name == p.Survivor {
			s = m
		}
	}
	if p.RestoreFrom != "" {
		return v.continueRestore(p)
	}
	if s == nil {
		return wait(ReasonRecoveringQuorum, "quorum recovery: the survivor %s is gone; restore from a backup", p.Survivor)
	}
	switch p.Stage {
	case v1alpha1.RecoveryFencing:
		return v.fence(p)
	case v1alpha1.RecoveryForceNewCluster:
		return v.forceNewCluster(s)
	case v1alpha1.RecoveryRestarting:
		return v.restartSurvivor(s)
	}
	return v.discard(p)
}

// fence: every other member's Pod is gone (not terminating) before the survivor forms a new cluster;
// etcd panics when members of the old cluster are still alive.
func (v *view) fence(p *v1alpha1.QuorumRecoveryProgress) Action {
	for _, m := range v.members {
		if m.Name == p.Survivor || !m.Pod.Exists {
			continue
		}
		if m.Pod.Deleting {
			return wait(ReasonRecoveringQuorum, "quorum recovery: fencing, waiting for %s's Pod to be gone", m.Name)
		}
		a, _ := v.disrupt(act(DeletePod, m.Name, ReasonFencing, "quorum recovery: fencing %s (deleting its Pod; its PVC stays)", m.Name),
			disruption.Fence)
		return a
	}
	return recoveryStep(p.Survivor, v1alpha1.RecoveryForceNewCluster, "quorum recovery: every other member is fenced; "+
		"starting %s with --force-new-cluster", p.Survivor)
}

// forceNewCluster: the survivor's Pod is recreated, once, with --force-new-cluster; when it serves
// as the only voter, the next stage restarts it without the flag.
func (v *view) forceNewCluster(s *memberView) Action {
	switch {
	case s.Pod.Exists && s.Pod.Deleting:
		return wait(ReasonRecoveringQuorum, "quorum recovery: waiting for %s's Pod to stop", s.Name)
	case s.Pod.Exists && !s.Pod.ForceNewCluster:
		a, _ := v.disrupt(act(DeletePod, s.Name, ReasonRecoveringQuorum, "quorum recovery: restarting %s to start it with --force-new-cluster", s.Name),
			disruption.Fence)
		return a
	case !s.Pod.Exists:
		a := act(CreatePod, s.Name, ReasonRecoveringQuorum, "quorum recovery: starting %s with --force-new-cluster", s.Name)
		a.ForceNewCluster = true
		return a
	case v.servesAlone(s):
		return recoveryStep(s.Name, v1alpha1.RecoveryRestarting, "quorum recovery: %s serves as a one-member cluster; "+
			"restarting it without --force-new-cluster", s.Name)
	}
	return wait(ReasonRecoveringQuorum, "quorum recovery: waiting for %s to serve as a one-member cluster", s.Name)
}

// restartSurvivor: the flag must not stay on the Pod (a container restart would force a new
// cluster again once members have joined), so the Pod is recreated without it.
func (v *view) restartSurvivor(s *memberView) Action {
	switch {
	case s.Pod.Exists && s.Pod.Deleting:
		return wait(ReasonRecoveringQuorum, "quorum recovery: waiting for %s's Pod to stop", s.Name)
	case s.Pod.Exists && s.Pod.ForceNewCluster:
		a, _ := v.disrupt(act(DeletePod, s.Name, ReasonRecoveringQuorum, "quorum recovery: restarting %s without --force-new-cluster", s.Name),
			disruption.Fence)
		return a
	case !s.Pod.Exists:
		return act(CreatePod, s.Name, ReasonRecoveringQuorum, "quorum recovery: starting %s without --force-new-cluster", s.Name)
	case v.servesAlone(s) && s.ep.ReadOK:
		return recoveryStep(s.Name, v1alpha1.RecoveryDiscarding, "quorum recovery: %s serves; dropping the other members", s.Name)
	}
	return wait(ReasonRecoveringQuorum, "quorum recovery: waiting for %s to serve again", s.Name)
}

func (v *view) servesAlone(s *memberView) bool {
	return s.voter() && v.voterCount() == 1 && s.ep != nil && s.ep.Healthy && len(v.f.Etcd.Members) == 1
}

// discard drops the other members one by one (their PVCs detached and kept), then finishes.
func (v *view) discard(p *v1alpha1.QuorumRecoveryProgress) Action {
	for _, m := range v.members {
		if slices.Contains(p.Discarded, m.Name) {
			return act(DiscardMember, m.Name, ReasonRecoveringQuorum, "quorum recovery: dropping %s (its PVC is kept, detached)", m.Name)
		}
	}
	return act(FinishRecovery, p.Survivor, ReasonQuorumRecovered, "quorum recovered from %s; the cluster regrows to %d members",
		p.Survivor, v.f.replicas())
}

// continueRestore: fence every member, drop them all, then clear the old cluster's identity so the
// seed bootstraps anew from the backup (bootstrap, which comes before this step, does that while
// the cluster has not formed); done once a voter of the new cluster serves.
func (v *view) continueRestore(p *v1alpha1.QuorumRecoveryProgress) Action {
	switch p.Stage {
	case v1alpha1.RecoveryFencing:
		for _, m := range v.members {
			if !m.Pod.Exists {
				continue
			}
			if m.Pod.Deleting {
				return wait(ReasonRecoveringQuorum, "quorum recovery: fencing, waiting for %s's Pod to be gone", m.Name)
			}
			a, _ := v.disrupt(act(DeletePod, m.Name, ReasonFencing, "quorum recovery: fencing %s (deleting its Pod)", m.Name), disruption.Fence)
			return a
		}
		return recoveryStep("", v1alpha1.RecoveryDiscarding, "quorum recovery: every member is fenced; dropping them to rebuild from backup %s", p.RestoreFrom)
	case v1alpha1.RecoveryDiscarding:
		for _, m := range v.members {
			return act(DiscardMember, m.Name, ReasonRecoveringQuorum, "quorum recovery: dropping %s (its PVC is kept, detached)", m.Name)
		}
		return recoveryStep("", v1alpha1.RecoveryReseeding, "quorum recovery: seeding a new cluster from backup %s", p.RestoreFrom)
	}
	for _, m := range v.members {
		if m.voter() && m.healthy() && m.ep.ReadOK {
			return act(FinishRecovery, m.Name, ReasonQuorumRecovered, "quorum recovered from backup %s; the cluster regrows to %d members",
				p.RestoreFrom, v.f.replicas())
		}
	}
	return wait(ReasonRecoveringQuorum, "quorum recovery: waiting for the seed restored from backup %s to serve", p.RestoreFrom)
}

func recoveryStep(survivor string, stage v1alpha1.QuorumRecoveryStage, format string, args ...any) Action {
	a := act(RecoveryStep, survivor, ReasonRecoveringQuorum, format, args...)
	a.Stage = stage
	return a
}

// ConditionQuorumRecovery is True while a quorum recovery runs; otherwise its reason says whether
// one is possible (the plan), refused, not needed, or done.
const ConditionQuorumRecovery = "QuorumRecovery"

// recoveryStatus is status.quorumRecovery's lostSince and plan (inProgress and last are the
// controller's records, kept as they are).
func (v *view) recoveryStatus() (since *metav1.Time, p *v1alpha1.QuorumRecoveryPlan) {
	if _, _, ok := v.quorum(); ok || !v.formed() || v.recoveryInProgress() != nil {
		return nil, nil
	}
	t := metav1.NewTime(v.lostSince())
	trigger := v.recoveryTrigger()
	if trigger == "" {
		trigger = "auto"
	}
	plan := v.recoveryPlan(trigger)
	return &t, &plan
}

func (v *view) recoveryCondition(p *v1alpha1.QuorumRecoveryPlan) metav1.Condition {
	annotation := v.f.Cluster.Annotations[v1alpha1.AnnotationRecoverQuorum]
	if ip := v.recoveryInProgress(); ip != nil {
		from := ip.Survivor
		if ip.RestoreFrom != "" {
			from = "backup " + ip.RestoreFrom
		}
		return cond(ConditionQuorumRecovery, true, ReasonRecoveringQuorum, "recovering from %s (%s), stage %s since %s",
			from, ip.Trigger, ip.Stage, ip.Since.UTC().Format(time.RFC3339))
	}
	if p == nil {
		if annotation != "" {
			return cond(ConditionQuorumRecovery, false, ReasonRecoveryIgnored, "%s=%s is ignored: quorum is healthy; remove it",
				v1alpha1.AnnotationRecoverQuorum, annotation)
		}
		if qr := v.f.Cluster.Status.QuorumRecovery; qr != nil && qr.Last != nil {
			from := qr.Last.Survivor
			if qr.Last.RestoreFrom != "" {
				from = "backup " + qr.Last.RestoreFrom
			}
			return cond(ConditionQuorumRecovery, false, ReasonQuorumRecovered, "last recovery %s from %s (revision %d, %s)",
				qr.Last.Time.UTC().Format(time.RFC3339), from, qr.Last.Revision, qr.Last.Trigger)
		}
		return cond(ConditionQuorumRecovery, false, ReasonQuorumHealthy, "quorum is healthy")
	}
	if p.Refused != "" {
		return cond(ConditionQuorumRecovery, false, ReasonRecoveryRefused, "quorum lost; no recovery possible: %s", p.Refused)
	}
	how := fmt.Sprintf("set the annotation %s=auto (or =<member>) to run it", v1alpha1.AnnotationRecoverQuorum)
	if q := v.f.Cluster.Spec.QuorumLoss; q != nil && q.Policy == v1alpha1.QuorumLossAutomatic {
		how = "spec.quorumLoss.policy Automatic runs it after afterSeconds"
	}
	if p.RestoreFrom != "" {
		return cond(ConditionQuorumRecovery, false, ReasonQuorumLost, "quorum lost; recovery plan: %s; %s", p.Loss, how)
	}
	return cond(ConditionQuorumRecovery, false, ReasonQuorumLost, "quorum lost; recovery plan: survivor %s, %s; %s", p.Survivor, p.Loss, how)
}
