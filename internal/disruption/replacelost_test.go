package disruption

import (
	"context"
	"errors"
	"testing"
)

// lostMember: c-2 of 3 is down with its node, and etcd shows it (Lost).
func lostMember(c *Cluster) {
	c.Members[2].Healthy, c.Members[2].PodReady, c.Members[2].Lost = false, false, true
}

func TestCheckReplaceLost(t *testing.T) {
	tests := []struct {
		name   string
		n      int
		mutate func(c *Cluster)
		victim string
		want   *Refusal
	}{
		{name: "a lost follower of 3, the others healthy", n: 3, mutate: lostMember, victim: "c-2"},
		{name: "a lost follower of 5", n: 5, mutate: func(c *Cluster) { c.Members[4].Healthy, c.Members[4].Lost = false, true }, victim: "c-4"},
		{name: "etcd's evidence is gone (the member is back)", n: 3, victim: "c-2", want: ErrLossNotShown},
		{name: "evidence gone while it is down for another reason", n: 3, victim: "c-2", want: ErrLossNotShown,
			mutate: func(c *Cluster) { c.Members[2].Healthy = false }},
		{name: "another member is not ready: no margin", n: 3, victim: "c-2", want: ErrOtherNotReady,
			mutate: func(c *Cluster) { lostMember(c); c.Members[1].Healthy = false }},
		{name: "two lost of 5: one at a time, the second waits", n: 5, victim: "c-4", want: ErrOtherNotReady,
			mutate: func(c *Cluster) {
				c.Members[3].Healthy, c.Members[3].Lost = false, true
				c.Members[4].Healthy, c.Members[4].Lost = false, true
			}},
		{name: "a learner is joining", n: 3, victim: "c-2", want: ErrLearnerPresent,
			mutate: func(c *Cluster) {
				lostMember(c)
				c.Members = append(c.Members, Member{Name: "c-3", ID: 9, Learner: true})
			}},
		{name: "the member list is unreadable", n: 3, victim: "c-2", want: ErrMemberListUnknown,
			mutate: func(c *Cluster) { lostMember(c); c.MemberListKnown = false }},
		{name: "the only member", n: 1, victim: "c-0", want: ErrLastMember,
			mutate: func(c *Cluster) { c.Members[0].Lost, c.Members[0].Leader = true, false }},
		{name: "two members: quorum would be at risk", n: 2, victim: "c-1", want: ErrQuorum,
			mutate: func(c *Cluster) { c.Members[1].Healthy, c.Members[1].Lost = false, true }},
		{name: "the leader (a stale view): hand over first", n: 3, victim: "c-0", want: ErrLeader,
			mutate: func(c *Cluster) { c.Members[0].Lost = true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cluster(tt.n)
			if tt.mutate != nil {
				tt.mutate(&c)
			}
			err := Check(c, Request{Kind: ReplaceLost, Victim: tt.victim})
			if tt.want == nil && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %s", err, tt.want.Reason)
			}
		})
	}
}

// The Disrupter removes a lost member only when the fresh read still shows it lost: the member's
// node came back between the plan and the act, and nothing is removed.
func TestDisrupterReplaceLostRechecksTheFreshRead(t *testing.T) {
	planned := cluster(3)
	lostMember(&planned)
	fresh := cluster(3)
	e := &recordingEffects{fresh: &fresh}
	err := New(e).Do(context.Background(), planned, Request{Kind: ReplaceLost, Victim: "c-2"})
	if !errors.Is(err, ErrLossNotShown) || len(e.calls) != 0 {
		t.Fatalf("err %v, calls %v: want LossNotShown and nothing done", err, e.calls)
	}
	stillLost := cluster(3)
	lostMember(&stillLost)
	e = &recordingEffects{fresh: &stillLost}
	if err := New(e).Do(context.Background(), planned, Request{Kind: ReplaceLost, Victim: "c-2"}); err != nil {
		t.Fatal(err)
	}
	// Taken out of the client Service first, like any voter: should its node answer again, its
	// Pod must not receive clients.
	if len(e.calls) != 2 || e.calls[0] != "drain c-2" || e.calls[1] != "remove c-2" {
		t.Fatalf("calls %v, want the drain, then the removal", e.calls)
	}
}

type recordingEffects struct {
	fresh *Cluster
	calls []string
}

func (e *recordingEffects) Refresh(context.Context) (Cluster, error) { return *e.fresh, nil }
func (e *recordingEffects) DeletePod(_ context.Context, m string) error {
	e.calls = append(e.calls, "delete pod "+m)
	return nil
}
func (e *recordingEffects) RemoveMember(_ context.Context, m string, _ uint64) error {
	e.calls = append(e.calls, "remove "+m)
	return nil
}
func (e *recordingEffects) DeletePVC(_ context.Context, m string) error {
	e.calls = append(e.calls, "delete pvc "+m)
	return nil
}
func (e *recordingEffects) Defragment(_ context.Context, m string) error {
	e.calls = append(e.calls, "defrag "+m)
	return nil
}
func (e *recordingEffects) RestartContainer(_ context.Context, m string) error {
	e.calls = append(e.calls, "restart "+m)
	return nil
}
func (e *recordingEffects) Drain(_ context.Context, m string) error {
	e.calls = append(e.calls, "drain "+m)
	return nil
}
func (e *recordingEffects) PrepareEviction(_ context.Context, m string) error {
	e.calls = append(e.calls, "prepare eviction "+m)
	return nil
}
