package kubectletcd

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// recentBackups is how many of the latest EtcdBackups the status shows.
const recentBackups = 3

// BuildStatus assembles the view from the objects alone: no etcd is reached, so it works on a
// cluster that lost quorum, where it matters most.
func BuildStatus(ec *stewardv1.EtcdCluster, members []stewardv1.EtcdMember, backups []stewardv1.EtcdBackup) Status {
	st := ec.Status
	s := Status{
		Cluster: ec.Name, Namespace: ec.Namespace, Version: ec.Spec.Version, ClusterID: st.ClusterID,
		Paused: ec.Spec.Paused, Available: "Unknown", Desired: 3, Replicas: st.Replicas,
		ReadyMembers: st.ReadyMembers, UpdatedMembers: st.UpdatedMembers, Template: st.CurrentTemplate,
		Alarms: []AlarmView{}, Conds: []ConditionView{}, Members: []MemberView{},
	}
	if ec.Spec.Replicas != nil {
		s.Desired = *ec.Spec.Replicas
	}
	if c := findCondition(st.Conditions, "Available"); c != nil {
		s.Available = string(c.Status)
		s.QuorumLost = c.Reason == "QuorumLost"
		s.MembersUnreachable = c.Reason == "MembersUnreachable"
	}
	for _, c := range st.Conditions {
		s.Conds = append(s.Conds, conditionView(c))
	}
	if r := st.Rollout; r != nil && (r.Pass != "" || r.Member != "" || len(r.Pending) > 0 || r.WaitingFor != "") {
		s.Rollout = &RolloutView{Pass: r.Pass, Member: r.Member, Pending: r.Pending, InPlace: r.InPlace, WaitingFor: r.WaitingFor}
	}
	if l := st.LastStep; l != nil {
		s.Step = &StepView{Action: l.Action, Member: l.Member, Since: l.Since}
	}
	byName := map[string]*stewardv1.EtcdMember{}
	for i := range members {
		byName[members[i].Name] = &members[i]
	}
	for _, m := range st.Members {
		mv := memberView(m, byName[m.Name])
		if mv.Role == string(stewardv1.RoleLeader) {
			s.Leader = m.Name
		}
		for _, a := range m.Alarms {
			s.Alarms = append(s.Alarms, AlarmView{Member: m.Name, Alarm: a})
		}
		s.Members = append(s.Members, mv)
		delete(byName, m.Name)
	}
	// Members status does not list yet (a Pending one, say) still belong on the screen.
	var rest []string
	for n := range byName {
		rest = append(rest, n)
	}
	slices.Sort(rest)
	for _, n := range rest {
		m := byName[n]
		s.Members = append(s.Members, memberView(stewardv1.MemberStatus{Name: n, Role: m.Status.Role, Ready: m.Status.Ready,
			Version: m.Status.Version, ID: m.Status.ID, Defragmentation: m.Status.Defragmentation}, m))
	}
	s.TLS = tlsView(ec)
	s.Backup = backupView(st.Backup, backups)
	if q := st.QuorumRecovery; q != nil || s.QuorumLost || s.MembersUnreachable {
		qv := &QuorumView{Policy: stewardv1.QuorumLossManual, Requested: ec.Annotations[stewardv1.AnnotationRecoverQuorum]}
		if ec.Spec.QuorumLoss != nil && ec.Spec.QuorumLoss.Policy != "" {
			qv.Policy = ec.Spec.QuorumLoss.Policy
		}
		if q != nil {
			qv.LostSince, qv.Plan, qv.InProgress, qv.Last = q.LostSince, q.Plan, q.InProgress, q.Last
		}
		s.Quorum = qv
	}
	if r := st.Restore; r != nil {
		s.Restore = &RestoreView{Source: r.Source, Revision: r.Revision, RestoredAt: r.RestoredAt}
	}
	s.Adoption = st.Adoption.DeepCopy()
	s.Downgrade = st.Downgrade.DeepCopy()
	return s
}

func memberView(m stewardv1.MemberStatus, em *stewardv1.EtcdMember) MemberView {
	mv := MemberView{Name: m.Name, ID: m.ID, Role: cmp.Or(string(m.Role), string(stewardv1.RoleUnknown)), Ready: m.Ready,
		Version: m.Version, Updated: m.Updated, QuotaUsedPercent: m.QuotaUsedPercent, Alarms: m.Alarms}
	if m.DBSize != nil {
		mv.DBSize = m.DBSize.Value()
	}
	if m.DBSizeInUse != nil {
		mv.DBSizeInUse = m.DBSizeInUse.Value()
	}
	if m.Quota != nil {
		mv.Quota = m.Quota.Value()
	}
	d := m.Defragmentation
	if em != nil {
		mv.Phase = string(em.Status.Phase)
		for _, c := range em.Status.Conditions {
			mv.Conditions = append(mv.Conditions, conditionView(c))
		}
		if d == nil {
			d = em.Status.Defragmentation
		}
	}
	if d != nil {
		mv.Defragmenting = d.StartedAt
		if l := d.Last; l != nil {
			mv.Defrag = &DefragView{Time: l.Time, Outcome: string(l.Outcome), Trigger: string(l.Trigger)}
			if l.SizeBefore != nil {
				mv.Defrag.SizeBefore = l.SizeBefore.Value()
			}
			if l.SizeAfter != nil {
				mv.Defrag.SizeAfter = l.SizeAfter.Value()
			}
		}
	}
	return mv
}

func conditionView(c metav1.Condition) ConditionView {
	v := ConditionView{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message}
	if !c.LastTransitionTime.IsZero() {
		t := c.LastTransitionTime
		v.Since = &t
	}
	return v
}

func tlsView(ec *stewardv1.EtcdCluster) TLSView {
	v := TLSView{Enabled: ec.TLSEnabled()}
	t := ec.Status.TLS
	if t == nil {
		return v
	}
	v.CANotAfter, v.Rotation = t.CANotAfter, t.Rotation
	if d := t.DropOldCA; d != nil {
		v.DropOldCA = &DropOldCAView{After: d.After, Message: d.Message}
	}
	for _, c := range t.Certificates {
		cv := CertView{Name: c.Name, NotAfter: c.NotAfter, RenewAt: c.RenewAt, Served: c.Served}
		v.Certificates = append(v.Certificates, cv)
		if c.Name != "ca" && (v.NextExpiry == nil || c.NotAfter.Before(&v.NextExpiry.NotAfter)) {
			next := cv
			v.NextExpiry = &next
		}
	}
	return v
}

func backupView(sum *stewardv1.BackupSummary, backups []stewardv1.EtcdBackup) BackupView {
	var v BackupView
	if sum != nil {
		v.Continuous = sum.Continuous
	}
	if sum != nil && sum.LastSuccessfulBackup != nil {
		r := sum.LastSuccessfulBackup
		v.LastSuccessful = &BackupItem{Name: r.Name, Phase: string(stewardv1.BackupSucceeded), Time: r.Time, Revision: r.Revision}
	}
	sorted := slices.Clone(backups)
	slices.SortFunc(sorted, func(a, b stewardv1.EtcdBackup) int {
		return cmp.Or(b.CreationTimestamp.Compare(a.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	for _, b := range sorted {
		it := backupItem(b)
		if v.LastSuccessful == nil && b.Status.Phase == stewardv1.BackupSucceeded {
			last := it
			v.LastSuccessful = &last
		}
		if v.LastSuccessful != nil && v.LastSuccessful.Name == b.Name {
			v.LastSuccessful.Size, v.LastSuccessful.Verified = it.Size, it.Verified
		}
		if len(v.Recent) < recentBackups {
			v.Recent = append(v.Recent, it)
		}
	}
	return v
}

func backupItem(b stewardv1.EtcdBackup) BackupItem {
	it := BackupItem{Name: b.Name, Phase: string(b.Status.Phase), Revision: b.Status.Revision, Size: b.Status.Size,
		Message: b.Status.Message}
	switch {
	case b.Status.CompletionTime != nil:
		it.Time = b.Status.CompletionTime
	case b.Status.StartTime != nil:
		it.Time = b.Status.StartTime
	default:
		t := b.CreationTimestamp
		it.Time = &t
	}
	if vr := b.Status.Verification; vr != nil {
		it.Verified = &vr.Verified
	}
	if it.Phase == "" {
		it.Phase = string(stewardv1.BackupPending)
	}
	return it
}

// age says how long ago t was, coarsely: status is read by people.
func age(now time.Time, t time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		return "in " + coarse(-d)
	}
	return coarse(d) + " ago"
}

func coarse(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	case d >= 2*time.Hour:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d >= 2*time.Minute:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return strconv.FormatInt(int64(d/time.Second), 10) + "s"
}
