package disruption

import (
	"context"
	"fmt"
)

// Effects are the side effects a disruption may have. The controller implements them with its
// Kubernetes and etcd clients; only a Disrupter calls them.
type Effects interface {
	// DeletePod deletes the member's Pod.
	DeletePod(ctx context.Context, member string) error
	// RemoveMember calls etcd's MemberRemove for the member's live ID.
	RemoveMember(ctx context.Context, member string, id uint64) error
	// DeletePVC deletes the member's PersistentVolumeClaim.
	DeletePVC(ctx context.Context, member string) error
	// Defragment asks the member's etcd to defragment its backend and waits until it is done.
	Defragment(ctx context.Context, member string) error
	// RestartContainer changes the image of the member's etcd container in its running Pod to the
	// target template's, which has the kubelet restart it in place.
	RestartContainer(ctx context.Context, member string) error
	// PrepareEviction marks the member's Pod prepared for the eviction Kubernetes was asked for
	// (it has left the client Service by then): the eviction webhook lets the eviction through.
	PrepareEviction(ctx context.Context, member string) error
}

// Refresher is implemented by Effects that can read the cluster again, live, past any cache.
// Before it acts the Disrupter checks once more on a fresh read: the facts the plan used come
// partly from an informer cache that may not have seen a Pod deletion yet, and may be seconds old;
// a member that went down in between must stop the step.
type Refresher interface {
	Refresh(ctx context.Context) (Cluster, error)
}

// Drainer is implemented by Effects that can take a member out of client traffic: clients of the
// client Service stop being sent to it (new connections go to the others) before it stops serving,
// instead of timing out against a Pod that is gone. Draining disrupts nothing (the member keeps
// serving whoever is connected) and is undone by the next reconcile if the disruption does not
// follow; it runs only after the checks passed, right before the effect.
type Drainer interface {
	Drain(ctx context.Context, member string) error
}

// Disrupter is the only way to disrupt a member. Each call re-runs Check on the facts it is given
// (read in the same reconcile, just before) and calls the effect only if Check passes.
type Disrupter struct {
	effects Effects
}

// New returns a Disrupter over the given effects.
func New(e Effects) *Disrupter { return &Disrupter{effects: e} }

// Do checks the request against the cluster and, if allowed, performs it. A refusal is returned
// unchanged (a *Refusal); an effect's failure is wrapped with what was attempted.
func (d *Disrupter) Do(ctx context.Context, c Cluster, r Request) error {
	if err := Check(c, r); err != nil {
		return err
	}
	c, err := d.lookAgain(ctx, c, r)
	if err != nil {
		return err
	}
	v, _ := c.member(r.Victim)
	if dr, ok := d.effects.(Drainer); ok && v.Voter && v.PodExists && !v.PodDeleting && drains(r.Kind) {
		if err := dr.Drain(ctx, v.Name); err != nil {
			return fmt.Errorf("%s of %s: taking it out of the client Service: %w", r.Kind, r.Victim, err)
		}
		// The drain waited up to seconds for the client Service and the proxies: the last look is
		// taken after it, right before the effect. A member that stopped answering meanwhile (CI
		// saw one frozen while a drain waited) stops the step; the drain is undone by the next
		// reconcile.
		if c, err = d.lookAgain(ctx, c, r); err != nil {
			return err
		}
		v, _ = c.member(r.Victim)
	}
	if r.Kind == Restart && v.PodDeleting {
		// Planned on a cache that had not seen this Pod's deletion: the restart is under way.
		return &Refusal{Reason: ReasonAlreadyTerminating, Request: r, Member: v.Name,
			Detail: "its Pod is already terminating: the restart is under way"}
	}
	switch r.Kind {
	case Restart, Dormant, Fence:
		err = d.effects.DeletePod(ctx, v.Name)
	case Remove, Replace, ReplaceLost:
		if !v.Voter && !v.Learner {
			return nil // already gone: MemberRemove happened before a crash (invariant 5)
		}
		err = d.effects.RemoveMember(ctx, v.Name, v.ID)
	case DeleteData:
		err = d.effects.DeletePVC(ctx, v.Name)
	case Defragment:
		err = d.effects.Defragment(ctx, v.Name)
	case RestartContainer:
		err = d.effects.RestartContainer(ctx, v.Name)
	case Evict:
		err = d.effects.PrepareEviction(ctx, v.Name)
	}
	if err != nil {
		return fmt.Errorf("%s of %s: %w", r.Kind, r.Victim, err)
	}
	return nil
}

// lookAgain reads the cluster again past any cache, when the effects can, and checks the request on
// that read; it returns the cluster the request was last checked on.
func (d *Disrupter) lookAgain(ctx context.Context, c Cluster, r Request) (Cluster, error) {
	rf, ok := d.effects.(Refresher)
	if !ok {
		return c, nil
	}
	fresh, err := rf.Refresh(ctx)
	if err != nil {
		return c, fmt.Errorf("%s of %s: reading the cluster again: %w", r.Kind, r.Victim, err)
	}
	if err := Check(fresh, r); err != nil {
		return c, err
	}
	return fresh, nil
}

// DeletePod restarts a member (or, on a cluster scaled to zero, takes it dormant).
func (d *Disrupter) DeletePod(ctx context.Context, c Cluster, member string) error {
	k := Restart
	if c.Dormant {
		k = Dormant
	}
	return d.Do(ctx, c, Request{Kind: k, Victim: member})
}

// RemoveMember removes a member from etcd: a scale-down, or the first half of a replacement.
func (d *Disrupter) RemoveMember(ctx context.Context, c Cluster, member string) error {
	return d.Do(ctx, c, Request{Kind: Remove, Victim: member})
}

// ReplaceMember removes a member from etcd so a fresh member can take its place.
func (d *Disrupter) ReplaceMember(ctx context.Context, c Cluster, member string) error {
	return d.Do(ctx, c, Request{Kind: Replace, Victim: member})
}

// DeletePVC deletes the data of a member that has left etcd.
func (d *Disrupter) DeletePVC(ctx context.Context, c Cluster, member string) error {
	return d.Do(ctx, c, Request{Kind: DeleteData, Victim: member})
}

// drains says which disruptions stop a serving voter, so its clients go elsewhere first. Fence is
// quorum recovery (nobody is served), Dormant stops the whole cluster, DeleteData follows a
// removal (the member left etcd already).
func drains(k Kind) bool {
	return k == Restart || k == RestartContainer || k == Remove || k == Replace || k == ReplaceLost || k == Defragment ||
		k == Evict
}
