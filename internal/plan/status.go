package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/evidence"
	"github.com/etcd-steward/steward/internal/health"
)

// fillStatus derives what status should say from the view and the chosen action.
func (v *view) fillStatus(d *Decision, found notes) {
	t := v.target
	d.Target = &t
	d.Changes = map[string]Change{}
	d.DataVersions = v.memberDataVersions()
	d.Adoption = v.adoptionStatus(d.Action, d.Next)
	for _, m := range v.active() {
		d.Changes[m.Name] = m.change
		if v.outdated(m) {
			d.Outdated = append(d.Outdated, m.Name)
		} else if v.updated(m) {
			d.UpdatedMembers++
		}
		d.Members = append(d.Members, v.memberStatus(m))
		if m.readyVoter() {
			d.ReadyMembers++
		}
	}
	for _, m := range v.byRollOrder(v.resizeMembers()) {
		d.Order = append(d.Order, m.Name)
		d.InPlace = append(d.InPlace, m.Name)
	}
	for _, m := range v.rollOrder() {
		d.Order = append(d.Order, m.Name)
	}
	d.Gate = v.gate()
	d.VersionWarning = v.versionWarning()
	d.AdoptionRefused = found.adoptRefused
	d.Step = v.nextStep(d.Action)
	d.DeadlineExceeded = v.deadlineExceeded(d.Action, d.Step)
	d.Rollout = v.rolloutStatus(d, found)
	q := v.quorumEvidence()
	d.LostSince, d.LostObserver, d.RecoveryPlan = v.recoveryStatus(q)
	d.DropRecoverAnnotation = v.dropRecoverAnnotation(q)
	d.NodeLoss = v.nodeLossRecords()
	d.Conditions = []metav1.Condition{v.availableCondition(q), v.progressing(d), v.degraded(d), v.rollingUpdate(d, found),
		v.recoveryCondition(d.RecoveryPlan, q), v.placementCondition()}
}

func (v *view) memberStatus(m *memberView) stewardv1.MemberStatus {
	s := stewardv1.MemberStatus{Name: m.Name, ID: m.ID, Role: stewardv1.RoleUnknown, Updated: v.updated(m)}
	if m.inEtcd() {
		s.ID = m.recordedID()
	}
	switch {
	case m.learner():
		s.Role = stewardv1.RoleLearner
	case m.leader:
		s.Role = stewardv1.RoleLeader
	case m.voter():
		s.Role = stewardv1.RoleFollower
	}
	s.Ready = m.readyVoter()
	if m.Pod.Exists {
		s.Node, s.Zone = m.Pod.Node, m.Pod.Zone
	}
	if m.ep != nil {
		s.Version = m.ep.Version
	}
	if m.ep != nil && m.ep.Reachable && m.ep.DBSize > 0 {
		q := quota(m)
		s.DBSize = resource.NewQuantity(m.ep.DBSize, resource.BinarySI)
		s.DBSizeInUse = resource.NewQuantity(m.ep.DBSizeInUse, resource.BinarySI)
		s.Quota = resource.NewQuantity(q, resource.BinarySI)
		s.QuotaUsedPercent = ptr.To(int32(min(m.ep.DBSize*100/q, 1000)))
	}
	for _, a := range v.f.Etcd.Alarms {
		if m.live != nil && a.MemberID == m.live.ID && !slices.Contains(s.Alarms, a.Type) {
			s.Alarms = append(s.Alarms, a.Type)
		}
	}
	s.Defragmentation = m.Defrag.DeepCopy()
	return s
}

// outdated: the member still needs something to reach the target, or is on its way there: a
// change to make, a Pod not built from the target yet, or storage still growing (a resize restart
// may still follow).
func (v *view) outdated(m *memberView) bool {
	return m.change != 0 || (m.Pod.Exists && !v.podRunsTarget(m)) || v.storageGrowing(m)
}

// updated: the member is a voter whose running Pod was built from the target template and whose
// volume has the target size; a template recorded on the member alone does not count (it is
// recorded before its Pod starts). Printer columns and `kubectl wait` users read this.
func (v *view) updated(m *memberView) bool {
	return !v.outdated(m) && m.Phase == stewardv1.MemberRunning && m.Pod.Exists && !m.Pod.Deleting && !m.Pod.Failed
}

// podRunsTarget: the Pod was built from a template that needs no roll to reach the target. A Pod
// that does not say (built by an older Steward) stands for the member's recorded template.
func (v *view) podRunsTarget(m *memberView) bool {
	t := m.Pod.Template
	if t == nil {
		t = &m.Template
	}
	return !Compare(*t, v.target, v.f.medium()).Has(ChangeRoll)
}

// storageGrowing: the PVC was asked for more than its filesystem has yet.
func (v *view) storageGrowing(m *memberView) bool {
	p := m.PVC
	if v.f.memory() || !p.Exists {
		return false
	}
	return p.FileSystemResizePending || p.Requested.Cmp(p.Capacity) > 0 ||
		(v.target.Storage.Size != nil && !p.Capacity.IsZero() && p.Capacity.Cmp(*v.target.Storage.Size) < 0)
}

func (v *view) rolloutStatus(d *Decision, found notes) *stewardv1.RolloutStatus {
	if len(d.Outdated) == 0 && !v.rollingWasTrue() {
		return nil
	}
	r := &stewardv1.RolloutStatus{}
	switch d.Action.Reason {
	case ReasonRollingMember, ReasonMovingLeader, ReasonPatchingPodMetadata, ReasonResizingInPlace:
		if d.Action.Kind != CreateMember { // an add-first member is no member being rolled
			r.Member = d.Action.Member
		}
	}
	r.InPlace = d.InPlace
	for _, m := range v.members {
		if v.onlyPodBehind(m) {
			r.Pass = PassStewardUpgrade
			break
		}
	}
	for _, n := range d.Order {
		if n != r.Member {
			r.Pending = append(r.Pending, n)
		}
	}
	switch {
	case found.rollBlocked != "":
		r.WaitingFor = found.rollBlocked
	case !d.Action.Acts():
		r.WaitingFor = d.Action.Message
	}
	return r
}

func (v *view) rollingWasTrue() bool {
	return meta.IsStatusConditionTrue(v.f.Cluster.Status.Conditions, ConditionRollingUpdate)
}

func cond(t string, ok bool, r Reason, format string, args ...any) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: t, Status: s, Reason: string(r), Message: fmt.Sprintf(format, args...)}
}

func (v *view) availableCondition(q evidence.Quorum) metav1.Condition {
	healthy, voters, ok := v.quorum()
	switch {
	case !v.formed():
		return cond(ConditionAvailable, false, ReasonBootstrapping, "the cluster has not formed yet")
	case v.f.replicas() == 0 && !ok:
		return cond(ConditionAvailable, false, ReasonDormant, "spec.replicas is 0: no member runs; PVCs keep the data")
	case ok && len(v.f.Etcd.Alarms) > 0:
		return cond(ConditionAvailable, true, ReasonQuorumHealthy, "%d of %d voters healthy; an alarm is active "+
			"(see Degraded)", healthy, voters)
	case ok:
		return cond(ConditionAvailable, true, ReasonQuorumHealthy, "%d of %d voters healthy", healthy, voters)
	case q.State == evidence.Held:
		// etcd serves; the operator only cannot see enough of it.
		return cond(ConditionAvailable, true, ReasonMembersUnreachable, "%s; the operator sees %d of %d voters healthy",
			q.Summary(v.order()), healthy, q.Voters)
	case q.State == evidence.Unknown:
		c := cond(ConditionAvailable, false, ReasonMembersUnreachable, "%s", q.Summary(v.order()))
		c.Status = metav1.ConditionUnknown
		return c
	case !v.f.Etcd.MemberListKnown():
		return cond(ConditionAvailable, false, ReasonQuorumLost, "%s; the member list cannot be read: %s", q.Summary(v.order()),
			v.f.Etcd.MemberListErr)
	}
	return cond(ConditionAvailable, false, ReasonQuorumLost, "%d of %d voters healthy, below quorum %d", healthy, voters, voters/2+1)
}

func (v *view) progressing(d *Decision) metav1.Condition {
	a := d.Action
	switch {
	case a.Reason == ReasonPaused:
		return cond(ConditionProgressing, false, ReasonPaused, "%s", a.Message)
	case d.DeadlineExceeded:
		return cond(ConditionProgressing, false, ReasonProgressDeadlineExceeded, "the step in progress exceeded progressDeadlineSeconds "+
			"(%s); still trying while safe: %s", v.f.progressDeadline(), a.Message)
	case a.Kind == Nothing || stalled[a.Reason]:
		return cond(ConditionProgressing, false, a.Reason, "%s", a.Message)
	case a.Reason == ReasonWaitingForHealth && d.Gate.Check == health.CheckAlarm:
		// Only the user ends an alarm: nothing progresses until then.
		return cond(ConditionProgressing, false, ReasonAlarm, "%s", a.Message)
	}
	return cond(ConditionProgressing, true, a.Reason, "%s", a.Message)
}

// stalled are waits that only the user or the outside world can end: nothing is progressing.
var stalled = map[Reason]bool{ReasonBlocked: true, ReasonForeignPVC: true, ReasonStorageNotExpandable: true, ReasonQuorumLost: true,
	ReasonMembersUnreachable: true, ReasonPodStuckTerminating: true, ReasonClusterIdentityMismatch: true, ReasonWaitingForClientRestart: true,
	ReasonCorruptionNeedsHuman: true, ReasonStewardImageUnknown: true}

// degraded names every member that is not a healthy voter, and why.
func (v *view) degraded(d *Decision) metav1.Condition {
	if v.f.replicas() == 0 || !v.formed() {
		return cond(ConditionDegraded, false, ReasonAllMembersHealthy, "no member is expected to run")
	}
	var reason Reason
	var msgs []string
	add := func(r Reason, m, why string) {
		if reason == "" {
			reason = r
		}
		msgs = append(msgs, m+": "+why)
	}
	// An alarm first: it is why the cluster refuses writes, while its members are not down.
	if alarm := v.f.Etcd.AlarmMessage(); alarm != "" {
		reason, msgs = ReasonAlarm, []string{alarm}
	}
	// A CORRUPT alarm Steward cannot resolve from the hashes is the worst state short of quorum loss
	// (writes refused until a human picks the right copy): its reason leads, with the evidence.
	if d.Action.Reason == ReasonCorruptionNeedsHuman {
		reason, msgs = ReasonCorruptionNeedsHuman, append(msgs, d.Action.Message)
	}
	for _, m := range v.active() {
		l := v.loss(m)
		switch {
		case l.Kind != evidence.NoLoss:
			add(lossReason(l), m.Name, firstNonEmpty(l.Waiting(v.f.Now), l.Why+"; replacing it on another node"))
		case m.released():
			add(ReasonReplacingElsewhere, m.Name, "removed from etcd and being replaced under a new name ("+m.ReplacedElsewhere+")")
		case m.Phase == stewardv1.MemberPending && !m.inEtcd():
			// Not created in etcd yet: progress, not damage.
		case !m.Pod.Exists:
			add(ReasonMemberPodMissing, m.Name, "Pod missing")
		case m.Pod.Failed:
			add(ReasonMemberPodFailed, m.Name, "Pod Failed (evicted or rejected by its node); it is recreated")
		case m.Pod.Deleting && v.olderThan(m.Pod.DeletingSince, v.lim.StuckTerminating):
			add(ReasonPodStuckTerminating, m.Name, fmt.Sprintf("Pod terminating for %s; its node may be lost",
				v.f.Now.Sub(m.Pod.DeletingSince).Round(time.Second)))
		case m.Pod.Exists && m.Pod.VersionRefused != "":
			add(ReasonVersionStepRefused, m.Name, "etcd refused to start on its data: "+m.Pod.VersionRefused)
		case v.oomLooping(m):
			add(ReasonMemberOOMKilled, m.Name, fmt.Sprintf("OOM-killed %d times; raise resources.limits.memory", m.Pod.RestartCount))
		case v.crashLooping(m):
			add(ReasonMemberCrashLooping, m.Name, fmt.Sprintf("restarted %d times", m.Pod.RestartCount))
		case m.Pod.Unschedulable:
			add(ReasonMemberUnschedulable, m.Name, "Pod cannot be scheduled")
		case !m.Pod.Ready:
			add(ReasonMemberUnhealthy, m.Name, "Pod not ready")
		case !m.healthy():
			add(ReasonMemberUnhealthy, m.Name, "etcd endpoint unhealthy")
		}
	}
	for _, o := range v.orphans {
		add(ReasonMemberUnhealthy, orphanName(o.ID), "in etcd but not managed by Steward")
	}
	if e := v.f.DefragScheduleError; e != "" {
		add(ReasonInvalidDefragmentationSchedule, "spec.maintenance.defragmentation.schedule", e+"; scheduled defragmentation is off until it is fixed")
	}
	for _, m := range v.active() {
		if d := m.Defrag; d != nil && d.ConsecutiveFailures >= DefragFailuresDegraded && d.Last != nil {
			add(ReasonDefragmentationFailing, m.Name, fmt.Sprintf("defragmentation failed %d times in a row, last: %s",
				d.ConsecutiveFailures, d.Last.Message))
		}
	}
	if reason == "" {
		return cond(ConditionDegraded, false, ReasonAllMembersHealthy, "every member is healthy")
	}
	return cond(ConditionDegraded, true, reason, "%s", strings.Join(msgs, "; "))
}

// rollingUpdate stays True until every member runs the target and, after a roll, the gate passed.
func (v *view) rollingUpdate(d *Decision, found notes) metav1.Condition {
	a := d.Action
	if len(d.Outdated) == 0 && found.adoptRefused != "" {
		return cond(ConditionRollingUpdate, true, ReasonVersionStepRefused, "every member runs the target; the spec is not adopted yet: %s",
			found.adoptRefused)
	}
	if len(d.Outdated) == 0 {
		if v.rollingWasTrue() && !d.Gate.Passed() {
			return cond(ConditionRollingUpdate, true, ReasonWaitingForHealth, "every member is updated; %s", d.Gate)
		}
		return cond(ConditionRollingUpdate, false, ReasonUpToDate, "every member runs the observed template")
	}
	outdated := strings.Join(d.Outdated, ", ")
	if found.adoptRefused != "" {
		outdated += "; " + found.adoptRefused
	}
	switch {
	case a.Reason == ReasonPaused:
		return cond(ConditionRollingUpdate, true, ReasonPaused, "paused; outdated: %s", outdated)
	case v.f.strategy() == stewardv1.OnDelete && len(d.Order) > 0:
		return cond(ConditionRollingUpdate, true, ReasonWaitingForDeletion, "updateStrategy OnDelete: delete the Pods of %s "+
			"to rebuild them on the new template", strings.Join(d.Order, ", "))
	case found.rollBlocked != "":
		return cond(ConditionRollingUpdate, true, ReasonBlocked, "%s", found.rollBlocked)
	case a.Reason == ReasonRollingMember || a.Reason == ReasonMovingLeader || a.Reason == ReasonPatchingPodMetadata ||
		a.Reason == ReasonResizingInPlace:
		return cond(ConditionRollingUpdate, true, ReasonRollingMember, "%s; outdated: %s", a.Message, outdated)
	}
	return cond(ConditionRollingUpdate, true, ReasonWaitingForHealth, "%s; outdated: %s", a.Message, outdated)
}

// lossReason is the Degraded reason for a member's node-loss verdict.
func lossReason(l evidence.NodeLoss) Reason {
	if l.Kind == evidence.NodeDeletedHeard || l.Kind == evidence.Unproven {
		return ReasonWaitingForNodeLoss
	}
	return ReasonMemberNodeLost
}
