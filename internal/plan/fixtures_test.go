package plan

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/disruption"
	"github.com/etcd-steward/steward/internal/health"
)

// healthyFacts returns the facts of a converged, healthy cluster of n members; c-0 leads.
func healthyFacts(t *testing.T, n int32, med stewardv1.StorageMedium) Facts {
	t.Helper()
	w := formedWorld(t, n, med)
	return w.facts()
}

func (f *Facts) m(name string) *Member {
	for i := range f.Members {
		if f.Members[i].Name == name {
			return &f.Members[i]
		}
	}
	panic("no member " + name)
}

func (f *Facts) ep(name string) *health.Endpoint {
	for i := range f.Etcd.Endpoints {
		if f.Etcd.Endpoints[i].Member == name {
			return &f.Etcd.Endpoints[i]
		}
	}
	panic("no endpoint " + name)
}

func (f *Facts) live(name string) *health.Member {
	for i := range f.Etcd.Members {
		if f.Etcd.Members[i].Name == name {
			return &f.Etcd.Members[i]
		}
	}
	panic("no live member " + name)
}

// dropLive removes a member from the live list and its endpoint (it left etcd).
func (f *Facts) dropLive(name string) {
	id := f.live(name).ID
	var ms []health.Member
	for _, m := range f.Etcd.Members {
		if m.ID != id {
			ms = append(ms, m)
		}
	}
	f.Etcd.Members = ms
	var eps []health.Endpoint
	for _, e := range f.Etcd.Endpoints {
		if e.Member != name {
			eps = append(eps, e)
		}
	}
	f.Etcd.Endpoints = eps
}

// down makes a member's Pod gone (and its endpoint silent).
func (f *Facts) podGone(name string) {
	f.m(name).Pod = Pod{}
	f.silence(name)
}

// leaderless makes a member answer without a leader and fail linearizable reads: it is cut off
// from a quorum, or none is left.
func (f *Facts) leaderless(name string) {
	e := f.ep(name)
	e.Healthy, e.LeaderID, e.ReadOK = false, 0, false
}

func (f *Facts) silence(name string) {
	e := f.ep(name)
	*e = health.Endpoint{Member: name}
}

// lead makes the named member the leader in every endpoint's eyes.
func (f *Facts) lead(name string) {
	id := f.live(name).ID
	for i := range f.Etcd.Endpoints {
		f.Etcd.Endpoints[i].LeaderID = id
	}
}

// addLearner lists a new learner for member name (which must exist in f.Members).
func (f *Facts) addLearner(name string, caughtUp bool) {
	m := f.m(name)
	id := uint64(0x99)
	m.ID = "99"
	f.Etcd.Members = append(f.Etcd.Members, health.Member{ID: id, Name: name, PeerURLs: []string{m.PeerURL}, IsLearner: true})
	applied := f.ep("c-0").AppliedIndex
	if !caughtUp {
		applied = 1
	}
	f.Etcd.Endpoints = append(f.Etcd.Endpoints, health.Endpoint{Member: name, Reachable: true, Healthy: true,
		MemberID: id, LeaderID: f.ep("c-0").LeaderID, AppliedIndex: applied})
}

// newMember appends a member object in the given phase with no Pod, PVC or etcd entry.
func (f *Facts) newMember(ordinal int32, phase stewardv1.MemberPhase) *Member {
	name := memberName(f, ordinal)
	f.Members = append(f.Members, Member{Name: name, Ordinal: ordinal, PeerURL: peerURL(name), Phase: phase,
		Template: *f.Cluster.Status.Observed.DeepCopy()})
	return &f.Members[len(f.Members)-1]
}

// retarget changes both the spec and the target (already adopted).
func (f *Facts) retarget(change func(t *stewardv1.MemberTemplate)) {
	change(&f.Cluster.Spec.MemberTemplate)
	change(f.Cluster.Status.Observed)
}

func (f *Facts) setReplicas(n int32) { f.Cluster.Spec.Replicas = &n }

func (f *Facts) memberPhase(name string, p stewardv1.MemberPhase) { f.m(name).Phase = p }

func cpu(q string) func(t *stewardv1.MemberTemplate) {
	return func(t *stewardv1.MemberTemplate) {
		t.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
}

// want is what a case expects of the decision's action.
type want struct {
	kind       Kind
	member     string
	reason     Reason
	target     string          // MoveLeader
	disruption disruption.Kind // "" when the action must carry none
	message    string          // a substring of the message
}

// stepAgo makes the step in progress, and the phase of every member not Running, d old.
func stepAgo(f *Facts, d time.Duration) {
	f.Cluster.Status.LastStep = &stewardv1.StepRecord{Action: "Wait", Since: metav1.NewTime(f.Now.Add(-d))}
	for i := range f.Members {
		if f.Members[i].Phase != stewardv1.MemberRunning {
			f.Members[i].PhaseSince = f.Now.Add(-d)
		}
	}
}

// crashing makes a member crash-loop now, as the kubelet reports it: unready for longer than the
// window, the last exit a minute ago, backing off, its endpoint silent.
func (f *Facts) crashing(name string, restarts int32, reason string) {
	p := &f.m(name).Pod
	p.Ready, p.RestartCount, p.LastTerminationReason = false, restarts, reason
	p.NotReadySince, p.LastTerminatedAt, p.BackOff = f.Now.Add(-DefaultCrashLoopWindow-time.Minute), f.Now.Add(-time.Minute), true
	f.silence(name)
}
