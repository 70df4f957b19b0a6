package plan

import (
	"fmt"
	"math/rand"
	"strings"
)

// A path back to healthy (issue 10, defect 3): from every state a scenario reaches, the planner must
// be able to bring the cluster back once the outside world stops breaking it. The check forks the
// world after each step, heals what the test broke that a real operator cannot fix (a crashing
// process, an unschedulable Pod, a stalled volume), lets the planner run alone, and requires it to
// converge. A planner that can sit in a state with no way out fails here even if no invariant is
// ever violated along the way.

// fork deep-copies the world; the copy shares nothing mutable with the original.
func (w *world) fork() *world {
	c := *w
	c.rng = rand.New(rand.NewSource(int64(w.step)))
	c.cluster = w.cluster.DeepCopy()
	c.members = nil
	for _, m := range w.members {
		cm := *m
		cm.template = *m.template.DeepCopy()
		if m.pod != nil {
			p := *m.pod
			p.template = *m.pod.template.DeepCopy()
			cm.pod = &p
		}
		if m.pvc != nil {
			v := *m.pvc
			v.requested, v.capacity = m.pvc.requested.DeepCopy(), m.pvc.capacity.DeepCopy()
			cm.pvc = &v
		}
		c.members = append(c.members, &cm)
	}
	c.etcd = nil
	for _, e := range w.etcd {
		ce := *e
		c.etcd = append(c.etcd, &ce)
	}
	c.faults = map[string]bool{}
	for k, v := range w.faults {
		c.faults[k] = v
	}
	c.unschedulable = map[string]bool{}
	if w.adopt != nil {
		a := *w.adopt
		a.sources = map[string]*wSource{}
		for k, s := range w.adopt.sources {
			cs := *s
			a.sources[k] = &cs
		}
		c.adopt = &a
	}
	c.trace, c.events, c.errs, c.check, c.liveness, c.stop = nil, nil, nil, nil, false, nil
	c.seq, c.recording = nil, false
	return &c
}

// heal stops the outside world from breaking members: processes no longer crash, Pods schedule,
// volumes grow, the operator no longer dies mid-step, and its reads are no longer stale. Failed Pods stay Failed: only the
// planner can get rid of them. Scenarios that end blocked on the user by design (a single member
// without allowDowntime, a StorageClass that cannot expand) run without the check (see stuck).
func (w *world) heal() {
	w.crashRate, w.growPaused, w.lag, w.etcdLag = 0, false, 0, 0
	w.refuseJoin = "" // the source admits Steward's members
	w.unschedulable = map[string]bool{}
	for _, m := range w.members {
		// A Pod of a member already out of etcd keeps failing: etcd refuses a removed member.
		if p := m.pod; p != nil && w.entry(m) != nil {
			p.crashing, p.oom, p.unschedulable, p.unready = false, false, false, false
		}
	}
}

// pathBackToHealthy forks, heals and runs the planner alone; it reports why the fork did not
// converge, or "" when it did.
func (w *world) pathBackToHealthy() string {
	f := w.fork()
	f.heal()
	f.t = w.t
	d := f.run(400, nil)
	if len(f.errs) > 0 {
		return "violations on the way back: " + strings.Join(f.errs, "; ")
	}
	if d.Action.Kind != Nothing {
		return fmt.Sprintf("no path back to healthy: after 400 steps it still says %s (%s)\n%s", d.Action,
			d.Action.Message, f.tail(12))
	}
	if p := f.convergedProblem(); p != "" {
		return "the way back ends unhealthy: " + p
	}
	return ""
}

// convergedProblem is assertConverged without failing the test: "" when the world is where the
// spec wants it.
func (f *world) convergedProblem() string {
	n := int(*f.cluster.Spec.Replicas)
	if n == 0 {
		return ""
	}
	if f.adopt != nil && f.cluster.Spec.Bootstrap.Join.Abort {
		return f.abortedProblem()
	}
	if len(f.members) != n || len(f.etcd) != n {
		return fmt.Sprintf("%d members, %d in etcd; want %d", len(f.members), len(f.etcd), n)
	}
	for _, m := range f.members {
		if e := f.entry(m); e == nil || e.learner || !f.available(e) || m.phase != "Running" {
			return m.name + " is not an available voter"
		}
	}
	return ""
}
