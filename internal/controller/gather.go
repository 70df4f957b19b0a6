package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/etcd-steward/steward/internal/authplan"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/datacheck"
	"github.com/etcd-steward/steward/internal/etcd"
	"github.com/etcd-steward/steward/internal/eviction"
	"github.com/etcd-steward/steward/internal/health"
	"github.com/etcd-steward/steward/internal/plan"
	"github.com/etcd-steward/steward/internal/resources"
)

// observed is everything one reconcile read, kept so actions can use the objects it names.
type observed struct {
	facts   plan.Facts
	members map[string]*stewardv1.EtcdMember
	pods    map[string]*corev1.Pod
	pvcs    map[string]*corev1.PersistentVolumeClaim
	client  *etcd.Client // nil when no member has an address yet
	// clusterID is etcd's cluster ID from the member list, "" when it could not be read.
	clusterID string
	// endpoints maps member name to its client URL (by Pod IP).
	endpoints map[string]string
	// tls is nil for a plaintext cluster.
	tls *tlsObserved
	// restore is the snapshot a cluster that never formed is seeded from (spec.bootstrap.restore).
	restore *restoreSource
	// auth is what etcd authentication's planner decided from (empty without spec.auth).
	auth authplan.Facts
	// crl is the revocation list Secret as writeCRL left it.
	crl crlState
}

// gather reads the cluster's members, Pods and PVCs from the cache and etcd's state live.
func (r *EtcdClusterReconciler) gather(ctx context.Context, ec *stewardv1.EtcdCluster) (*observed, error) {
	return r.gatherFrom(ctx, r.Client, ec)
}

// gatherFrom is gather over a given reader: the cache for planning, the API server itself for the
// Disrupter's second look before it disrupts a member (a cache that has not seen a Pod deletion
// yet must not let a second one through).
func (r *EtcdClusterReconciler) gatherFrom(ctx context.Context, kube client.Reader, ec *stewardv1.EtcdCluster) (*observed, error) {
	o := &observed{members: map[string]*stewardv1.EtcdMember{}, pods: map[string]*corev1.Pod{},
		pvcs: map[string]*corev1.PersistentVolumeClaim{}, endpoints: map[string]string{}}
	sel := client.MatchingLabels{stewardv1.LabelCluster: ec.Name}
	ns := client.InNamespace(ec.Namespace)

	var members stewardv1.EtcdMemberList
	if err := kube.List(ctx, &members, ns); err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, ns, sel); err != nil {
		return nil, err
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := kube.List(ctx, &pvcs, ns, sel); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		o.pods[pods.Items[i].Name] = &pods.Items[i]
	}
	for i := range pvcs.Items {
		o.pvcs[pvcs.Items[i].Name] = &pvcs.Items[i]
	}
	resizable := r.resizable(ctx, kube, ec)
	// Live, whatever kube is: the cache holds only PVCs labelled with a cluster, and a detached PVC
	// has lost that label (the cache never sees it, and a new member took its ordinal and mounted
	// the old member's volume: e2e TestManagedNodeUpgrade).
	reserved, err := reservedOrdinals(ctx, r.reader(), ec)
	if err != nil {
		return nil, err
	}

	f := plan.Facts{Cluster: ec, Now: r.now(), DefragScheduleError: defragScheduleError(ec), ReservedOrdinals: reserved,
		PodRevision: resources.PodRevision, CRL: resources.ServesCRL(ec), Observer: r.observer()}
	for i := range members.Items {
		m := &members.Items[i]
		if m.Spec.ClusterName != ec.Name {
			continue
		}
		o.members[m.Name] = m
		pm := plan.Member{
			Name: m.Name, Ordinal: m.Spec.Ordinal, Phase: m.Status.Phase, ID: m.Status.ID, Replacing: m.Status.Replacing,
			ReplacedElsewhere: m.Status.ReplacedElsewhere,
			PeerURL:           resources.PeerURL(ec, m.Name),
			Deleting:          m.DeletionTimestamp != nil, Template: m.Spec.Template,
			Pod: r.podFacts(ec, m, o.pods[m.Name]), PVC: pvcFacts(o.pvcs[resources.PVCName(m.Name)], ec, resizable),
		}
		if p := o.pods[m.Name]; p != nil && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			o.endpoints[m.Name] = fmt.Sprintf("%s://%s:%d", resources.Scheme(ec), p.Status.PodIP, resources.ClientPort)
		}
		if m.Status.PhaseSince != nil {
			pm.PhaseSince = m.Status.PhaseSince.Time
		}
		pm.Defrag = m.Status.Defragmentation.DeepCopy()
		pm.DataVersion = m.Status.DataVersion.DeepCopy()
		pm.DefragScheduled = defragScheduled(ec, m, f.Now)
		pm.DefragRequested = defragRequested(ec, m, f.Now)
		f.Members = append(f.Members, pm)
	}
	slices.SortFunc(f.Members, func(a, b plan.Member) int { return int(a.Ordinal - b.Ordinal) })
	f.Etcd = r.etcdFacts(ctx, ec, o)
	f.EtcdClusterID = o.clusterID
	r.nodeZones(ctx, f.Members)
	// What the members' nodes say is evidence (internal/evidence): of a quorum in doubt, and with
	// etcd's leader's view of each member, of a node loss (the view read only when a node shows one).
	// Live reads, whatever kube is: Steward caches neither Nodes nor PersistentVolumes (its RBAC
	// grants no list or watch of PVs, so a cached read would wait for a cache that never syncs).
	r.nodeFacts(ctx, r.reader(), f.Members, o.pods, o.pvcs)
	if plan.PeerViewNeeded(f.Members) {
		r.peerViews(ctx, o, &f)
	}
	if f.ContinuousDurable, err = r.continuousDurable(ctx, ec); err != nil {
		return nil, err
	}
	o.facts = f
	return o, nil
}

// podFacts adds to podFacts whether the Pod can reach the target by a container restart on a new
// image (resources.ImageOnly), judged from the template the Pod was built from.
func (r *EtcdClusterReconciler) podFacts(ec *stewardv1.EtcdCluster, m *stewardv1.EtcdMember, p *corev1.Pod) plan.Pod {
	out := podFacts(p)
	// Rendering two Pods is only worth it for a Pod that needs a roll to reach the target.
	if out.Template != nil && ec.Status.Observed != nil &&
		plan.Compare(*out.Template, *ec.Status.Observed, ec.Spec.Storage.Medium).Has(plan.ChangeRoll) {
		out.ImageOnly = resources.ImageOnly(resources.Member{Cluster: ec, Name: m.Name, Voter: true},
			out.Template, ec.Status.Observed, r.EtcdImageRepository)
	}
	return out
}

func podFacts(p *corev1.Pod) plan.Pod {
	if p == nil {
		return plan.Pod{}
	}
	out := plan.Pod{Exists: true, Phase: p.Status.Phase, Deleting: p.DeletionTimestamp != nil,
		ForceNewCluster: p.Annotations[stewardv1.AnnotationForceNewCluster] == "true",
		Failed:          p.Status.Phase == corev1.PodFailed, Template: resources.PodTemplate(p), Resize: resizeFacts(p),
		Revision: resources.PodRevisionOf(p), ServesCRL: resources.PodServesCRL(p), Generation: p.Generation, RestartedFrom: p.Annotations[stewardv1.AnnotationRestartedFrom],
		EvictionRequested: eviction.RequestedAt(p), EvictionPrepared: eviction.Marked(p),
		Node: p.Spec.NodeName}
	if p.DeletionTimestamp != nil {
		out.DeletingSince = p.DeletionTimestamp.Time
	}
	out.NotReadySince = p.CreationTimestamp.Time // until a Ready condition says otherwise
	for _, c := range p.Status.Conditions {
		switch {
		case c.Type == corev1.PodReady:
			out.Ready = c.Status == corev1.ConditionTrue
			out.ReadyObservedGeneration = c.ObservedGeneration
			out.NotReadySince = c.LastTransitionTime.Time
			if out.Ready {
				out.NotReadySince = time.Time{}
			}
		case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable:
			out.Unschedulable = true
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != "etcd" {
			continue
		}
		out.RestartCount, out.ContainerID, out.ContainerReady = cs.RestartCount, cs.ContainerID, cs.Ready
		out.BackOff = cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff"
		out.Stopped = cs.State.Running == nil
		if t := cs.LastTerminationState.Terminated; t != nil {
			out.LastTerminationReason, out.LastTerminatedAt = t.Reason, t.FinishedAt.Time
			out.DataLost = datacheck.DataLost(t.ExitCode, t.Message)
			out.VersionRefused = datacheck.RefusedVersion(t.ExitCode, t.Message)
		}
		if t := cs.State.Terminated; t != nil && out.DataLost == "" && out.VersionRefused == "" {
			out.DataLost = datacheck.DataLost(t.ExitCode, t.Message)
			out.VersionRefused = datacheck.RefusedVersion(t.ExitCode, t.Message)
		}
		out.JoinRefused = joinRefused(cs)
	}
	return out
}

// joinRefused is the data check's JoinRefused verdict of the etcd container's last exit while it is
// not running now: a container running again is trying again (its peers may admit it now).
func joinRefused(cs corev1.ContainerStatus) string {
	if cs.State.Running != nil {
		return ""
	}
	if t := cs.State.Terminated; t != nil {
		return datacheck.RefusedJoin(t.ExitCode, t.Message)
	}
	if t := cs.LastTerminationState.Terminated; t != nil {
		return datacheck.RefusedJoin(t.ExitCode, t.Message)
	}
	return ""
}

// etcdContainerID is the kubelet's ID of the Pod's etcd container now; "" before it reports one.
func etcdContainerID(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "etcd" {
			return cs.ContainerID
		}
	}
	return ""
}

func pvcFacts(p *corev1.PersistentVolumeClaim, ec *stewardv1.EtcdCluster, resizable bool) plan.PVC {
	if p == nil {
		return plan.PVC{}
	}
	out := plan.PVC{Exists: true, Deleting: p.DeletionTimestamp != nil, Resizable: resizable,
		Requested: p.Spec.Resources.Requests[corev1.ResourceStorage],
		Capacity:  p.Status.Capacity[corev1.ResourceStorage],
		Foreign:   p.Annotations[stewardv1.AnnotationClusterUID] != string(ec.UID)}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PersistentVolumeClaimFileSystemResizePending && c.Status == corev1.ConditionTrue {
			out.FileSystemResizePending = true
		}
	}
	return out
}

// resizable says whether the cluster's StorageClass allows volume expansion; unknown counts as no,
// so Steward never patches a PVC the class would refuse.
func (r *EtcdClusterReconciler) resizable(ctx context.Context, kube client.Reader, ec *stewardv1.EtcdCluster) bool {
	name := ""
	if ec.Spec.Storage.StorageClassName != nil {
		name = *ec.Spec.Storage.StorageClassName
	}
	var classes storagev1.StorageClassList
	if err := kube.List(ctx, &classes); err != nil {
		return false
	}
	for _, sc := range classes.Items {
		isDefault := sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true"
		if sc.Name == name || (name == "" && isDefault) {
			return sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion
		}
	}
	return false
}

// etcdFacts reads the member list and every member's status, and a linearizable read through each
// voter; under a CORRUPT alarm, every voter's hash too. Failures are facts (the plan decides what they mean), never reconcile errors.
func (r *EtcdClusterReconciler) etcdFacts(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed) health.Facts {
	var f health.Facts
	seeds := joinSeeds(ec)
	if len(o.endpoints) == 0 && len(seeds) == 0 {
		f.MemberListErr = "no member has an address yet"
		return f
	}
	// Cluster-wide calls go to voters; before any is recorded (bootstrap), to whoever has an address.
	var voters, all []string
	answers := false // one of voters has its etcd running
	for name, ep := range o.endpoints {
		all = append(all, ep)
		if m := o.members[name]; m != nil && m.Status.Phase == stewardv1.MemberRunning {
			voters = append(voters, ep)
			answers = answers || etcdMayAnswer(o.pods[name])
		}
	}
	if len(voters) == 0 && len(seeds) == 0 {
		voters = all
		for name := range o.endpoints {
			answers = answers || etcdMayAnswer(o.pods[name])
		}
	}
	// While adopting, the source's endpoints too: before Steward's first member votes they are
	// the only way in, and the joining member is a learner, to which etcd refuses cluster calls
	// (a promotion sent to it fails: "rpc not supported for learner").
	voters = append(voters, seeds...)
	slices.Sort(voters)
	c, err := r.Etcd.Get(string(ec.UID), voters, ec.TLSEnabled())
	if err != nil {
		f.MemberListErr = err.Error()
		return f
	}
	o.client = c
	// The member list and each member's status and quorum read go out together: without quorum
	// each waits out its timeout, and one after the other they held every reconcile of a quorum
	// recovery, and the chokepoint's second read before each of its steps, for 10 to 15 s.
	var list []etcd.Member
	var clusterID uint64
	listed := make(chan error, 1)
	if answers || len(seeds) > 0 {
		go func() {
			var err error
			list, clusterID, err = c.MemberList(ctx)
			listed <- err
		}()
	} else {
		// Not asked: a Pod has its address while its init container runs and keeps it while
		// etcd waits for a restart, and a call to it would wait out its timeout.
		listed <- errNoVoterRunning
	}
	names, probes := probeAll(ctx, c, o.endpoints, nil, o.pods)
	if err := <-listed; err != nil {
		f.MemberListErr = err.Error()
	} else {
		o.clusterID = etcd.IDString(clusterID)
		sourceEndpoints(ec, o, list)
		// While adopting, the list names the source members: they are probed now.
		more, moreProbes := probeAll(ctx, c, o.endpoints, names, o.pods)
		names, probes = append(names, more...), append(probes, moreProbes...)
	}
	for name, ep := range o.endpoints {
		if o.members[name] == nil {
			all = append(all, ep) // a source member's
		}
	}
	c.Retain(all) // drop connections to Pods that went or moved
	for _, m := range list {
		f.Members = append(f.Members, health.Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, IsLearner: m.IsLearner})
	}
	f.Endpoints = endpointFacts(names, probes)
	for _, p := range probes {
		f.Alarms = addAlarms(f.Alarms, p.status.Alarms)
	}
	f.Hashes = corruptionHashes(ctx, c, f, o.endpoints)
	f.ClusterVersion = clusterVersion(ctx, ec, c, f, o.endpoints)
	return f
}

// probe is one member's status and, for a voter that answered, whether a quorum read through it
// succeeds.
type probe struct {
	status etcd.EndpointStatus
	readOK bool
}

// endpointFacts are the probes' results as health facts, by member name.
func endpointFacts(names []string, probes []probe) []health.Endpoint {
	var out []health.Endpoint
	for i, p := range probes {
		s := p.status
		out = append(out, health.Endpoint{Member: names[i], Reachable: s.Err == nil, Err: errText(s.Err), Healthy: s.Healthy(), MemberID: s.MemberID, ClusterID: s.ClusterID,
			LeaderID: s.Leader, AppliedIndex: s.AppliedIndex, Version: s.Version, StorageVersion: s.StorageVersion, Errors: s.Errors,
			DowngradeEnabled: s.DowngradeEnabled, DowngradeTarget: s.DowngradeTarget,
			DBSize: s.DBSize, DBSizeInUse: s.DBSizeInUse, DBSizeQuota: s.DBSizeQuota, Revision: s.Revision, RaftIndex: s.RaftIndex,
			ReadOK: p.readOK})
	}
	slices.SortFunc(out, func(a, b health.Endpoint) int { return strings.Compare(a.Member, b.Member) })
	return out
}

// errEtcdNotRunning is the status of a member whose etcd container is not running: not dialled.
var errEtcdNotRunning = errors.New("its etcd container is not running")

// errNoVoterRunning is why the member list was not read: no voter's etcd container is running.
var errNoVoterRunning = errors.New("not asked: no voter's etcd container is running")

// etcdMayAnswer says whether a member's etcd can answer a call: its Pod's etcd container runs. With
// no Pod (a source member of an adoption, outside Kubernetes' view) it is asked.
func etcdMayAnswer(p *corev1.Pod) bool {
	if p == nil {
		return true
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "etcd" {
			return cs.State.Running != nil
		}
	}
	return false
}

// probeAll probes every endpoint not in skip, concurrently, and returns the names probed with
// their results in the same order. A member whose etcd container is not running (pods) is not
// dialled: its result is errEtcdNotRunning at once.
func probeAll(ctx context.Context, c *etcd.Client, endpoints map[string]string, skip []string, pods map[string]*corev1.Pod) ([]string, []probe) {
	var names []string
	for name := range endpoints {
		if !slices.Contains(skip, name) {
			names = append(names, name)
		}
	}
	out := make([]probe, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		if !etcdMayAnswer(pods[name]) {
			out[i].status = etcd.EndpointStatus{Endpoint: endpoints[name], Err: errEtcdNotRunning}
			continue
		}
		wg.Go(func() {
			s := c.Status(ctx, endpoints[name])
			out[i].status = s
			out[i].readOK = s.Err == nil && !s.IsLearner && c.LinearizableRead(ctx, endpoints[name]) == nil
		})
	}
	wg.Wait()
	return names, out
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// now is the reconcile's clock; tests replace Clock.
func (r *EtcdClusterReconciler) now() time.Time {
	if r.Clock != nil {
		return r.Clock()
	}
	return time.Now()
}

// clusterVersion asks a voter that answered its /version for the cluster version, only while a
// version step may be decided (the spec's version is not adopted yet, or a downgrade is on): the
// one-minor rule and the downgrade read it. "" when none answered.
func clusterVersion(ctx context.Context, ec *stewardv1.EtcdCluster, c *etcd.Client, f health.Facts, endpoints map[string]string) string {
	o := ec.Status.Observed
	versionStep := o == nil || o.Version != ec.Spec.Version
	if d := ec.Status.Downgrade; !versionStep && (d == nil || !d.Stage.Active()) {
		return ""
	}
	for _, e := range f.Endpoints {
		if !e.Healthy || endpoints[e.Member] == "" {
			continue
		}
		if v, err := c.Versions(ctx, endpoints[e.Member]); err == nil && v.Cluster != "" {
			return v.Cluster
		}
	}
	return ""
}
