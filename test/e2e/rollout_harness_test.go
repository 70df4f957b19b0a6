//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/test/e2e/framework"
)

// rollWatch runs everything a rollout test observes: client traffic through the client Service,
// the disruption monitor, and a poller of the leader as status reports it.
type rollWatch struct {
	t        *testing.T
	ns, name string
	traffic  *framework.Traffic
	monitor  *framework.Monitor
	pods     *framework.PodTimes
	changed  time.Time // when the test changed the spec
	// addFirst is spec.replicas of a memory cluster, whose members the roll replaces add-first
	// (0 otherwise): finish asserts the voters kept, and a removed member's name coming back
	// later is another member, not a restart.
	addFirst int

	mu        sync.Mutex
	leaders   []string    // distinct consecutive leaders seen
	leaderAts []time.Time // when each of leaders was first seen
	// fewestVoters and mostMembers: status's members as the poller saw them (voters: etcd's
	// member list shows them leader or follower).
	fewestVoters, mostMembers int
	stop                      chan struct{}
	done                      chan struct{}
}

func watchRoll(t *testing.T, ns, name string, replicas int32) *rollWatch {
	return watchRollOf(t, ns, name, func() []string { return memberNames(name, replicas) })
}

// watchRollFor is watchRoll for a cluster of either medium: memory members are replaced add-first
// under new names (the monitor follows etcd's voters), PVC members keep theirs.
func watchRollFor(t *testing.T, ns, name string, replicas int32, md stewardv1.StorageMedium) *rollWatch {
	if md == stewardv1.StorageMediumMemory {
		w := watchRollOf(t, ns, name, voters(ns, name))
		w.addFirst = int(replicas)
		return w
	}
	return watchRoll(t, ns, name, replicas)
}

// watchRollOf is watchRoll for a cluster whose members change names (a replacement takes a new
// ordinal): expected says which members there should be.
func watchRollOf(t *testing.T, ns, name string, expected func() []string) *rollWatch {
	w := &rollWatch{t: t, ns: ns, name: name, stop: make(chan struct{}), done: make(chan struct{}), fewestVoters: 1 << 30}
	// 30% of the iterations on 4 shared keys (overwrite, read, delete, compare-and-swap) for
	// the linearizability check; the rest write-once keys for the lost-write check.
	w.traffic = framework.StartTraffic(clientFor(t, ns, name), framework.TrafficConfig{Prefix: "/roll/", Contended: 0.3})
	w.monitor = monitor(t, ns, name, expected)
	pods, err := f.WatchPodTimes(ns, stewardv1.LabelCluster+"="+name, stewardv1.LabelVoter)
	if err != nil {
		t.Fatal(err)
	}
	w.pods = pods
	t.Cleanup(pods.Stop)
	go w.pollLeader()
	t.Cleanup(w.halt)
	// Steady state first, so latency during the roll has something to be compared with.
	time.Sleep(5 * time.Second)
	return w
}

// pollLeader samples each status the operator writes (a watch): the leaders in order, the fewest
// voters and the most members.
func (w *rollWatch) pollLeader() {
	defer close(w.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-w.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	f.WatchCluster(ctx, w.ns, w.name, w.sample)
}

func (w *rollWatch) sample(ec *stewardv1.EtcdCluster) {
	voters := 0
	for _, m := range ec.Status.Members {
		if m.Role == stewardv1.RoleLeader || m.Role == stewardv1.RoleFollower {
			voters++
		}
		if m.Role == stewardv1.RoleLeader {
			w.mu.Lock()
			if n := len(w.leaders); n == 0 || w.leaders[n-1] != m.Name {
				w.leaders = append(w.leaders, m.Name)
				w.leaderAts = append(w.leaderAts, time.Now())
			}
			w.mu.Unlock()
		}
	}
	w.mu.Lock()
	if voters > 0 { // a status written before etcd's member list was read shows none
		w.fewestVoters = min(w.fewestVoters, voters)
	}
	w.mostMembers = max(w.mostMembers, len(ec.Status.Members))
	w.mu.Unlock()
}

// checkHandoff asserts that leadership left lead before its Pod was deleted: through the operator's
// MoveLeader, or through an election of etcd's own (a loaded host makes them) that status showed
// before the deletion. Status lags etcd, so a leader change it showed before the deletion happened
// before it; an operator deleting the leader's Pod leaves status showing lead until then.
func (w *rollWatch) checkHandoff(lead string) {
	t := w.t
	t.Helper()
	moves := eventsWith(t, w.ns, w.name, "MoveLeader")
	if len(moves) > 0 && strings.Contains(moves[0], "from "+lead) {
		return
	}
	var deleted time.Time
	for _, r := range w.pods.Restarts() {
		if r.Member == lead && !r.InPlace {
			deleted = r.Deleting
			break
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, l := range w.leaders {
		if l != lead && !deleted.IsZero() && w.leaderAts[i].Before(deleted) && slices.Contains(w.leaders[:i], lead) {
			t.Logf("no MoveLeader from %s: an election moved leadership to %s %.1fs before its Pod's deletion (leaders %v)",
				lead, l, deleted.Sub(w.leaderAts[i]).Seconds(), w.leaders)
			return
		}
	}
	t.Errorf("no leadership handoff from %s before rolling it: MoveLeader events %v, leaders %v", lead, moves, w.leaders)
}

// electedLast: an election, not Steward (no MoveLeader from lead), moved leadership from lead to
// last during the roll, and last went last. On a loaded machine a leader can lose an election on
// its own (CI: leaders [web-0 web-2 web-0], no MoveLeader); the plan then keeps the new leader
// for last, as it should.
func (w *rollWatch) electedLast(lead, last string) bool {
	for _, m := range eventsWith(w.t, w.ns, w.name, "MoveLeader") {
		if strings.Contains(m, "from "+lead) {
			return false
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	i := slices.Index(w.leaders, lead)
	if i < 0 || !slices.Contains(w.leaders[i+1:], last) {
		return false
	}
	w.t.Logf("an election moved leadership from %s to %s during the roll (leaders %v): %s went last", lead, last, w.leaders, last)
	return true
}

func (w *rollWatch) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
		<-w.done
	}
}

// checkAddFirst asserts an add-first roll of replicas members: etcd never had fewer voters, and
// never more than one member beyond replicas existed.
func (w *rollWatch) checkAddFirst(replicas int) {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Logf("MEASURE add-first roll: fewest voters %d, most members %d (spec.replicas %d)", w.fewestVoters, w.mostMembers, replicas)
	if w.fewestVoters < replicas || w.mostMembers > replicas+1 {
		w.t.Errorf("status showed %d voters at the fewest and %d members at the most; an add-first roll of %d keeps "+
			"%d voters and adds one member at a time", w.fewestVoters, w.mostMembers, replicas, replicas)
	}
}

// change applies a spec change and remembers when.
func (w *rollWatch) change(mutate func(*stewardv1.EtcdCluster)) {
	w.changed = time.Now()
	update(w.t, w.ns, w.name, mutate)
}

// finish stops everything, asserts the invariants every roll must keep and logs the figures.
func (w *rollWatch) finish(label string, maxUnavailable int) {
	t := w.t
	t.Helper()
	h := w.traffic.Stop()
	w.halt()
	assertMaxUnavailable(t, w.monitor, maxUnavailable)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lost, err := w.traffic.VerifyNoLostWrites(ctx, clientFor(t, w.ns, w.name), h)
	if err != nil {
		t.Fatalf("reading back the traffic's writes: %v", err)
	}
	if len(lost) > 0 {
		t.Errorf("%d acknowledged writes lost, first %+v", len(lost), lost[0])
	}
	if stale := h.StaleReads(); len(stale) > 0 {
		t.Errorf("%d stale reads, first %+v", len(stale), stale[0])
	}
	framework.AssertLinearizable(t, h, f.Artifacts, label)
	w.mu.Lock()
	if w.mostMembers == 0 {
		t.Errorf("the status watch saw no version of %s with members: the voter and leader figures below mean nothing", w.name)
	}
	w.mu.Unlock()
	before, during := split(h, w.changed)
	t.Logf("MEASURE %s: roll %.1fs; leaders %v; handoffs %d", label, time.Since(w.changed).Seconds(),
		w.leaders, len(eventsWith(t, w.ns, w.name, "MoveLeader")))
	restarts := w.pods.Restarts()
	if w.addFirst > 0 {
		w.checkAddFirst(w.addFirst)
		t.Logf("MEASURE %s: %d members removed, each after its successor joined", label, len(restarts))
	} else {
		var worst time.Duration
		for _, r := range restarts {
			worst = max(worst, r.Unavailable())
		}
		t.Logf("MEASURE %s: %d member restarts, longest unavailable %.2fs\n%s", label, len(restarts), worst.Seconds(),
			framework.Summary(restarts))
		w.mu.Lock()
		t.Logf("MEASURE %s: fewest voters %d, most members %d (status, every version written)", label, w.fewestVoters, w.mostMembers)
		w.mu.Unlock()
	}
	t.Logf("MEASURE %s steady: %s", label, before.Summary())
	t.Logf("MEASURE %s during roll: %s", label, during.Summary())
}

func split(h framework.History, at time.Time) (before, after framework.History) {
	for _, o := range h {
		if o.Start.Before(at) {
			before = append(before, o)
		} else {
			after = append(after, o)
		}
	}
	return before, after
}

// eventsWith returns the cluster's events of one reason, oldest first, as "message" strings.
func eventsWith(t *testing.T, ns, name, reason string) []string {
	t.Helper()
	var list corev1.EventList
	if err := f.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return framework.EventTime(&list.Items[i]).Before(framework.EventTime(&list.Items[j]))
	})
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.InvolvedObject.Kind == "EtcdCluster" && e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

// rolledOrder returns the members in the order the operator disrupted them, read from its events of
// one reason ("restarting X onto the new template", "replacing X …", "removing X from etcd").
func rolledOrder(t *testing.T, ns, name, reason string) []string {
	t.Helper()
	var order []string
	for _, msg := range eventsWith(t, ns, name, reason) {
		words := strings.Fields(msg)
		if len(words) >= 2 && (strings.HasSuffix(msg, "onto the new template") || strings.HasSuffix(msg, "from etcd")) {
			order = append(order, words[1])
		}
	}
	return order
}

// podsOn reports, for each member Pod, whether check holds, and fails naming those where not.
func podsOn(t *testing.T, ns, name string, n int, what string, check func(*corev1.Pod) bool) {
	t.Helper()
	pods := memberPods(t, ns, name)
	if len(pods) != n {
		t.Fatalf("%d Pods, want %d", len(pods), n)
	}
	var bad []string
	for _, p := range pods {
		if !check(p) {
			bad = append(bad, p.Name)
		}
	}
	slices.Sort(bad)
	if len(bad) > 0 {
		t.Errorf("Pods not %s: %v", what, bad)
	}
}

// assertPodsUntouched waits a few seconds (long enough for several reconciles) and fails if any
// member Pod was recreated or restarted since before was taken with uids.
func assertPodsUntouched(t *testing.T, ns, name string, before map[string]string, why string) {
	t.Helper()
	time.Sleep(5 * time.Second)
	if after := uids(t, ns, name); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("%s: Pods changed %v -> %v", why, before, after)
	}
}

func uids(t *testing.T, ns, name string) map[string]string {
	out := map[string]string{}
	for n, p := range memberPods(t, ns, name) {
		out[n] = fmt.Sprintf("%s/%d", p.UID, restarts(p))
	}
	return out
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}
