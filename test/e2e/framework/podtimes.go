package framework

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// PodTimes watches a cluster's member Pods and timestamps, at the test's clock with millisecond
// precision (Kubernetes' own timestamps have whole seconds), each step of a member's restart:
// the old Pod's deletion seen, the old Pod gone, the new Pod created, etcd's container running,
// Ready. It also records when each member left the client Service (its voter label dropped).
type PodTimes struct {
	mu     sync.Mutex
	pods   map[string]*podTrack // by UID
	cancel context.CancelFunc
	done   chan struct{}
}

type podTrack struct {
	member                                          string
	added, unlisted, deleting, gone, running, ready time.Time
	// in-place restarts: Ready lost while the Pod stays (a container restarted on a new image).
	wasReady             bool
	drainedAt, unreadyAt time.Time
	inPlace              []inPlaceRestart
}

type inPlaceRestart struct{ drained, unready, ready time.Time }

// MemberRestart is one member's restart, each step as an offset from Deleting.
type MemberRestart struct {
	Member string
	// Deleting: the old Pod's deletionTimestamp seen (etcd got SIGTERM).
	Deleting time.Time
	// Unlisted: the old Pod left the client Service before deletion (0 when it did not).
	Unlisted, Gone, Created, Running, Ready time.Duration
	// InPlace: the container restarted in its Pod (Deleting is then when it went unready).
	InPlace bool
}

// Unavailable is how long the member served no client: from its deletion until its new Pod is
// Ready.
func (r MemberRestart) Unavailable() time.Duration { return r.Ready }

func (r MemberRestart) String() string {
	if r.InPlace {
		return fmt.Sprintf("%s: in place; out of Service %s before unready; unready → Ready %s", r.Member, ms(r.Unlisted), ms(r.Ready))
	}
	return fmt.Sprintf("%s: out of Service %s before delete; deleted → gone %s → created %s → running %s → Ready %s",
		r.Member, ms(r.Unlisted), ms(r.Gone), ms(r.Created), ms(r.Running), ms(r.Ready))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// WatchPodTimes starts recording Pods matching labelSelector in ns; voterLabel is the label the
// client Service selects on ("" when nothing drains Pods: a StatefulSet).
func (f *Framework) WatchPodTimes(ns, labelSelector, voterLabel string) (*PodTimes, error) {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := f.Clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: labelSelector})
	if err != nil {
		cancel()
		return nil, err
	}
	pt := &PodTimes{pods: map[string]*podTrack{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(pt.done)
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				pt.observe(ev.Type, p, voterLabel, time.Now())
			}
		}
	}()
	return pt, nil
}

func (pt *PodTimes) observe(t watch.EventType, p *corev1.Pod, voterLabel string, now time.Time) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	tr := pt.pods[string(p.UID)]
	if tr == nil {
		tr = &podTrack{member: p.Labels[stewardv1.LabelMember]}
		if tr.member == "" {
			tr.member = p.Name // a StatefulSet's Pods keep their names
		}
		if t == watch.Added && p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "" {
			tr.added = now // created while we watched
		}
		pt.pods[string(p.UID)] = tr
	}
	set := func(at *time.Time, cond bool) {
		if cond && at.IsZero() {
			*at = now
		}
	}
	set(&tr.unlisted, voterLabel != "" && p.Labels[voterLabel] != "true" && p.DeletionTimestamp == nil && !tr.ready.IsZero())
	set(&tr.deleting, p.DeletionTimestamp != nil)
	set(&tr.gone, t == watch.Deleted)
	for _, c := range p.Status.ContainerStatuses {
		set(&tr.running, c.Name == "etcd" && c.State.Running != nil)
	}
	ready := false
	for _, c := range p.Status.Conditions {
		ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
	}
	set(&tr.ready, ready)
	if p.DeletionTimestamp == nil {
		draining := voterLabel != "" && p.Labels[voterLabel] == "draining"
		switch {
		case draining && tr.drainedAt.IsZero():
			tr.drainedAt = now
		}
		switch {
		case tr.wasReady && !ready:
			tr.unreadyAt = now
		case !tr.wasReady && ready && !tr.unreadyAt.IsZero():
			tr.inPlace = append(tr.inPlace, inPlaceRestart{drained: tr.drainedAt, unready: tr.unreadyAt, ready: now})
			tr.unreadyAt, tr.drainedAt = time.Time{}, time.Time{}
		}
		tr.wasReady = ready
	}
}

// Stop ends the watch.
func (pt *PodTimes) Stop() {
	pt.cancel()
	<-pt.done
}

// Restarts pairs each deleted Pod with the next Pod of the same member, in deletion order.
func (pt *PodTimes) Restarts() []MemberRestart {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	var olds []*podTrack
	for _, tr := range pt.pods {
		if !tr.deleting.IsZero() {
			olds = append(olds, tr)
		}
	}
	sort.Slice(olds, func(i, j int) bool { return olds[i].deleting.Before(olds[j].deleting) })
	var out []MemberRestart
	for _, tr := range pt.pods {
		for _, r := range tr.inPlace {
			mr := MemberRestart{Member: tr.member, Deleting: r.unready, InPlace: true, Gone: -1, Created: -1, Running: -1,
				Ready: r.ready.Sub(r.unready)}
			if !r.drained.IsZero() && r.unready.Sub(r.drained) < 5*time.Second { // not a drain for a defragmentation
				mr.Unlisted = r.unready.Sub(r.drained)
			}
			out = append(out, mr)
		}
	}
	for _, old := range olds {
		var next *podTrack
		for _, tr := range pt.pods {
			if tr.member == old.member && !tr.added.IsZero() && !tr.added.Before(old.deleting) &&
				(next == nil || tr.added.Before(next.added)) {
				next = tr
			}
		}
		r := MemberRestart{Member: old.member, Deleting: old.deleting, Gone: since(old.gone, old.deleting)}
		if !old.unlisted.IsZero() {
			r.Unlisted = old.deleting.Sub(old.unlisted)
		}
		if next != nil {
			r.Created, r.Running, r.Ready = since(next.added, old.deleting), since(next.running, old.deleting), since(next.ready, old.deleting)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Deleting.Before(out[j].Deleting) })
	return out
}

func since(t, from time.Time) time.Duration {
	if t.IsZero() {
		return -1
	}
	return t.Sub(from)
}

// Summary is one line per restart, then the gaps between one member Ready and the next deletion
// (the recovery gate's share).
func Summary(rs []MemberRestart) string {
	var b strings.Builder
	for i, r := range rs {
		b.WriteString(r.String())
		if i+1 < len(rs) && r.Ready >= 0 {
			fmt.Fprintf(&b, "; Ready → next deletion %s", ms(rs[i+1].Deleting.Sub(r.Deleting.Add(r.Ready))))
		}
		b.WriteString("\n")
	}
	return b.String()
}
