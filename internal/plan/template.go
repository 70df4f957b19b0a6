package plan

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/versionguard"
)

// Compare classifies how a member's recorded template differs from the target. The comparison is
// structural (equality.Semantic: quantities by value, nil and empty alike); no hash is trusted.
//
//   - storage.retentionPolicy touches no running member and is ignored.
//
//   - podMetadata is patched in place, so a difference there alone is ChangeMetadata.
//
//   - on PVC storage, storage.size is an expansion of the PVC, not a roll; whether it is needed is
//     read from the PVC itself (see expansionNeeded), not from the template. On memory storage the
//     size is the tmpfs limit in the Pod spec, so it rolls.
//
//   - a change of CPU or memory alone is a resize of the running Pod (see resizable).
//
// Everything else reaches the Pod spec or etcd's flags and needs a roll.
func Compare(member, target stewardv1.MemberTemplate, medium stewardv1.StorageMedium) Change {
	m, t := rollable(member, medium), rollable(target, medium)
	var c Change
	switch {
	case equality.Semantic.DeepEqual(m, t):
	case resizable(m, t):
		c |= ChangeResize
	default:
		c |= ChangeRoll
	}
	if !equality.Semantic.DeepEqual(member.PodMetadata, target.PodMetadata) {
		c |= ChangeMetadata
	}
	return c
}

// rollable returns the part of a template whose change needs a restart or a replacement.
func rollable(t stewardv1.MemberTemplate, medium stewardv1.StorageMedium) stewardv1.MemberTemplate {
	t = *t.DeepCopy()
	t.Storage.RetentionPolicy = ""
	t.PodMetadata = stewardv1.PodMetadata{}
	if medium != stewardv1.StorageMediumMemory {
		t.Storage.Size = nil
	}
	return t
}

// expansionNeeded says whether a PVC is smaller than the target size.
func expansionNeeded(pvc PVC, target stewardv1.MemberTemplate, medium stewardv1.StorageMedium) bool {
	if medium == stewardv1.StorageMediumMemory || !pvc.Exists || target.Storage.Size == nil {
		return false
	}
	return pvc.Requested.Cmp(*target.Storage.Size) < 0
}

// specTemplate is the member template of the user's intent.
func (f *Facts) specTemplate() stewardv1.MemberTemplate { return f.Cluster.Spec.MemberTemplate }

// specAdopted reports whether status.observed already equals the spec (retentionPolicy included:
// observed should say what the user asked for, even where no member is touched).
func (f *Facts) specAdopted() bool {
	o := f.Cluster.Status.Observed
	return o != nil && equality.Semantic.DeepEqual(*o, f.specTemplate())
}

// versionRefusal says why the spec's version may not be adopted yet, or "" when it may. Every
// member must be able to step to it directly, so a second edit (3.5 → 3.6 → 3.7) waits until every
// member runs 3.6, however quickly the user typed. "Runs" is what each member's etcd reports and
// what its Pod was built from, not only the template recorded on the member: a template is
// recorded before its Pod starts, and a Pod list seen late can hide an old Pod still running; and
// the cluster version etcd reports, which it raises only once every member runs the newer minor.
// A minor up also needs the patch etcd's upgrade guide asks for (versionguard.Minimums); a minor
// down goes through etcd's downgrade protocol first (downgrade.go); and the spec's extraArgs must
// be flags the version knows.
func (v *view) versionRefusal() string {
	want := v.f.specTemplate().Version
	if unknown := versionguard.UnknownArgs(want, v.f.specTemplate().Options.ExtraArgs); len(unknown) > 0 {
		return fmt.Sprintf("spec.options.extraArgs has %s, which etcd %s does not know (etcd %s --help): remove it from "+
			"extraArgs first", strings.Join(unknown, ", "), want, versionguard.Minor(want))
	}
	if why := v.downgradeRefusal(); why != "" {
		return why
	}
	var lines []versionLine
	for _, m := range v.members {
		if m.Deleting {
			continue
		}
		for _, run := range v.runningVersions(m) {
			lines = append(lines, versionLine{m.Name, run})
		}
	}
	if cv := v.f.Etcd.ClusterVersion; cv != "" {
		lines = append(lines, versionLine{"the cluster", runningVersion{version: storageFull(cv), source: "speaks cluster version"}})
	}
	for _, l := range lines {
		s := ClassifyVersion(l.version, want)
		switch {
		case s == StepDowngrade && v.downgradeAllows(l.runningVersion, want):
		case s == StepDowngrade && versionguard.CheckDowngrade(l.version, want) != "":
			return fmt.Sprintf("spec.version %s is refused for now: %s %s %s; %s", want, l.name, l.source, l.version,
				versionguard.CheckDowngrade(l.version, want))
		case s == StepDowngrade && versionguard.IsDowngrade(l.version, want):
			return fmt.Sprintf("spec.version %s waits for etcd's downgrade protocol: %s %s %s (enabled first, "+
				"then every member's storage version lowered)", want, l.name, l.source, l.version)
		case !s.Allowed():
			return fmt.Sprintf("spec.version %s is refused for now: %s %s %s (%s); etcd upgrades one minor "+
				"version at a time and cannot be downgraded, so the current rollout finishes first",
				want, l.name, l.source, l.version, s)
		case s == StepMinorUp && l.server:
			if why := versionguard.CheckUpgrade(l.version, want); why != "" {
				return fmt.Sprintf("spec.version %s is refused: %s %s %s; %s", want, l.name, l.source, l.version, why)
			}
		}
	}
	return ""
}

// versionLine is a running version and whose it is.
type versionLine struct {
	name string
	runningVersion
}

// runningVersion is one version a member may be running, and where it was read; server: it is an
// etcd server version (its patch level means something), not a storage or cluster version.
type runningVersion struct {
	version, source string
	server          bool
}

// runningVersions are every version a member may be running: its recorded template, the template its
// Pod was built from, the server version its etcd reports, and what its data holds the next etcd to
// (which is all that is left while neither Pod nor endpoint exists). A Pod whose etcd the data check
// refused for its version never ran it: its template, and the record written before it, say nothing.
func (v *view) runningVersions(m *memberView) []runningVersion {
	var out []runningVersion
	if !m.Pod.Exists || m.Pod.VersionRefused == "" {
		out = append(out, runningVersion{m.Template.Version, "is recorded at", true})
		if t := m.Pod.Template; m.Pod.Exists && t != nil {
			out = append(out, runningVersion{t.Version, "has a Pod built for", true})
		}
	}
	if m.ep != nil && m.ep.Reachable && m.ep.Version != "" {
		out = append(out, runningVersion{m.ep.Version, "runs", true})
	}
	return append(out, dataVersions(m.dataVersion())...)
}

// versionWarning reports versions that cannot be parsed: accepted, but unchecked.
func (v *view) versionWarning() string {
	want := v.f.specTemplate().Version
	if _, ok := parseVersion(want); !ok {
		return fmt.Sprintf("version %q is not X.Y.Z: accepted, but its upgrade step cannot be checked", want)
	}
	for _, m := range v.members {
		if _, ok := parseVersion(m.Template.Version); !ok && m.Template.Version != "" {
			return fmt.Sprintf("%s runs version %q, which is not X.Y.Z: its upgrade step cannot be checked",
				m.Name, m.Template.Version)
		}
	}
	return ""
}

// safePoint reports whether the target may move now: no step of the operator is in flight (no
// membership change, no Pod on its way out). A member that merely failed does not count: adopting
// then is what lets a corrected spec repair a member broken by the previous spec (the etcd-io
// workflow's misconfigured-member case), and the repair then builds from the latest intent.
func (v *view) safePoint() bool {
	for _, m := range v.members {
		if m.Deleting || m.inFlightPhase() || (m.Pod.Exists && m.Pod.Deleting) {
			return false
		}
	}
	for _, l := range v.f.Etcd.Members {
		if l.IsLearner {
			return false
		}
	}
	return true
}

// resizable says whether two rollable templates differ only in the etcd container's CPU and memory,
// in a way Kubernetes resizes a running Pod: the same resources requested and limited (values
// change, keys neither appear nor go), the same QoS class (the API refuses a resize that changes
// it), and no memory limit lowered: Steward cannot prove the member's use stays under a lower
// limit, and an OOM kill is a worse disruption than a planned restart.
func resizable(m, t stewardv1.MemberTemplate) bool {
	mr, tr := m.Resources, t.Resources
	m.Resources, t.Resources = corev1.ResourceRequirements{}, corev1.ResourceRequirements{}
	if !equality.Semantic.DeepEqual(m, t) || len(mr.Claims)+len(tr.Claims) > 0 {
		return false
	}
	for _, pair := range [][2]corev1.ResourceList{{mr.Requests, tr.Requests}, {mr.Limits, tr.Limits}} {
		if !sameCPUMemoryKeys(pair[0], pair[1]) {
			return false
		}
	}
	if old, ok := mr.Limits[corev1.ResourceMemory]; ok && tr.Limits.Memory().Cmp(old) < 0 {
		return false
	}
	return qos(mr) == qos(tr)
}

func sameCPUMemoryKeys(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok || (k != corev1.ResourceCPU && k != corev1.ResourceMemory) {
			return false
		}
	}
	return true
}

// qos is the Pod QoS class a single container's resources give (the Pod has one container that
// requests anything).
func qos(r corev1.ResourceRequirements) corev1.PodQOSClass {
	if len(r.Requests) == 0 && len(r.Limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	for _, k := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		l, ok := r.Limits[k]
		if !ok {
			return corev1.PodQOSBurstable
		}
		// A request left out defaults to the limit.
		if req, ok := r.Requests[k]; ok && req.Cmp(l) != 0 {
			return corev1.PodQOSBurstable
		}
	}
	return corev1.PodQOSGuaranteed
}
