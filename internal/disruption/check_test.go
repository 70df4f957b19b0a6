package disruption

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// cluster returns n healthy voters c-0..c-n-1 on PVC storage; c-0 leads.
func cluster(n int) Cluster {
	c := Cluster{MemberListKnown: true}
	for i := 0; i < n; i++ {
		c.Members = append(c.Members, Member{
			Name: fmt.Sprintf("c-%d", i), ID: uint64(i + 1), Voter: true, Leader: i == 0, Healthy: true,
			PodExists: true, PodReady: true,
		})
	}
	return c
}

func TestCheck(t *testing.T) {
	memory := func(c *Cluster) { c.Medium = stewardv1.StorageMediumMemory }
	tests := []struct {
		name   string
		n      int
		mutate func(c *Cluster)
		req    Request
		want   *Refusal // nil: allowed
		about  string   // the member the refusal names
	}{
		// Allowed.
		{name: "restart a follower of 3", n: 3, req: Request{Restart, "c-2"}},
		{name: "restart a follower of 5", n: 5, req: Request{Restart, "c-4"}},
		{name: "prepare a follower of 3 for its eviction", n: 3, req: Request{Evict, "c-2"}},
		{name: "prepare a memory follower for its eviction", n: 3, mutate: memory, req: Request{Evict, "c-1"}},
		{name: "a second member is not prepared while one is", n: 3, req: Request{Evict, "c-2"},
			mutate: func(c *Cluster) { c.Members[1].Evicting = true }, want: ErrOtherDisrupted, about: "c-1"},
		{name: "no restart while a member is prepared for its eviction", n: 3, req: Request{Restart, "c-2"},
			mutate: func(c *Cluster) { c.Members[1].Evicting = true }, want: ErrOtherDisrupted, about: "c-1"},
		{name: "the leader is not prepared for its eviction", n: 3, req: Request{Evict, "c-0"},
			want: ErrLeader, about: "c-0"},
		{name: "no preparation while another member is not ready", n: 3, req: Request{Evict, "c-2"},
			mutate: func(c *Cluster) { c.Members[1].PodReady = false }, want: ErrOtherNotReady, about: "c-1"},
		{name: "remove a follower of 3", n: 3, req: Request{Remove, "c-2"}},
		{name: "remove a follower of 2 (scale 2->1)", n: 2, req: Request{Remove, "c-1"}},
		{name: "remove a memory follower of 3 (replace)", n: 3, mutate: memory, req: Request{Remove, "c-1"}},
		{name: "restart the unready victim itself", n: 3, req: Request{Restart, "c-2"},
			mutate: func(c *Cluster) { c.Members[2].PodReady = false; c.Members[2].Healthy = false }},
		{name: "remove a victim whose Pod is gone", n: 3, mutate: func(c *Cluster) {
			memory(c)
			c.Members[1].PodExists = false
			c.Members[1].Healthy = false
		}, req: Request{Remove, "c-1"}},
		{name: "remove a stuck learner while another voter is down", n: 3, req: Request{Remove, "c-3"},
			mutate: func(c *Cluster) {
				c.Members = append(c.Members, Member{Name: "c-3", ID: 9, Learner: true, InFlight: true})
				c.Members[1].Healthy = false
			}},
		{name: "delete the Pod of a member not in etcd", n: 3, req: Request{Restart, "c-3"},
			mutate: func(c *Cluster) { c.Members = append(c.Members, Member{Name: "c-3", PodExists: true}) }},
		{name: "a pending object without a Pod does not block", n: 3, req: Request{Restart, "c-2"},
			mutate: func(c *Cluster) { c.Members = append(c.Members, Member{Name: "c-3"}) }},
		{name: "single PVC member with opt-in", n: 1, req: Request{Restart, "c-0"},
			mutate: func(c *Cluster) { c.AllowDowntime = true }},
		{name: "delete data of a removed member", n: 3, req: Request{DeleteData, "c-3"},
			mutate: func(c *Cluster) { c.Members = append(c.Members, Member{Name: "c-3"}) }},
		{name: "dormant follower Pod", n: 3, req: Request{Dormant, "c-2"},
			mutate: func(c *Cluster) { c.Dormant = true }},
		{name: "dormant leader Pod last", n: 3, req: Request{Dormant, "c-0"}, mutate: func(c *Cluster) {
			c.Dormant = true
			c.MemberListKnown = false
			c.Members[1].PodExists, c.Members[2].PodExists = false, false
		}},
		{name: "dormant needs no member list", n: 3, req: Request{Dormant, "c-1"},
			mutate: func(c *Cluster) { c.Dormant = true; c.MemberListKnown = false }},
		{name: "seed of a cluster that never formed", n: 1, req: Request{Restart, "c-0"}, mutate: func(c *Cluster) {
			c.NeverFormed, c.MemberListKnown = true, false
			c.Members[0].Voter, c.Members[0].Leader, c.Members[0].Healthy = false, false, false
		}},

		{name: "defragment a follower of 3", n: 3, req: Request{Defragment, "c-2"}},
		{name: "defragment a memory follower (its data stays)", n: 3, mutate: memory, req: Request{Defragment, "c-1"}},
		{name: "defragment a learner", n: 3, req: Request{Defragment, "c-3"},
			mutate: func(c *Cluster) {
				c.Members = append(c.Members, Member{Name: "c-3", ID: 9, Learner: true, PodExists: true})
			}},
		{name: "defragment the only member with opt-in", n: 1, req: Request{Defragment, "c-0"},
			mutate: func(c *Cluster) { c.AllowDowntime = true }},
		{name: "defragment the only memory member with opt-in", n: 1, req: Request{Defragment, "c-0"},
			mutate: func(c *Cluster) { memory(c); c.AllowDowntime = true }},

		{name: "fence any member during a recovery", n: 3, req: Request{Fence, "c-0"},
			mutate: func(c *Cluster) { c.Recovering = true; c.MemberListKnown = false }},
		{name: "fence the survivor itself (its restart with --force-new-cluster)", n: 3, req: Request{Fence, "c-1"},
			mutate: func(c *Cluster) { c.Recovering = true; c.MemberListKnown = false }},

		// Refused.
		{name: "fence without a recovery", n: 3, req: Request{Fence, "c-2"}, want: ErrNoRecovery, about: "c-2",
			mutate: func(c *Cluster) { c.MemberListKnown = false }},
		{name: "defragment the leader", n: 3, req: Request{Defragment, "c-0"}, want: ErrLeader, about: "c-0"},
		{name: "defragment while another is down", n: 3, req: Request{Defragment, "c-2"}, want: ErrOtherNotReady,
			about: "c-1", mutate: func(c *Cluster) { c.Members[1].Healthy = false }},
		{name: "defragment while another is defragmenting", n: 5, req: Request{Defragment, "c-2"}, want: ErrOtherDisrupted,
			about: "c-1", mutate: func(c *Cluster) { c.Members[1].InFlight = true }},
		{name: "defragment one of 2 voters", n: 2, req: Request{Defragment, "c-1"}, want: ErrQuorum},
		{name: "defragment the only member without opt-in", n: 1, req: Request{Defragment, "c-0"}, want: ErrSingleMember},
		{name: "defragment a member not in etcd", n: 3, req: Request{Defragment, "c-3"}, want: ErrNotMember,
			mutate: func(c *Cluster) { c.Members = append(c.Members, Member{Name: "c-3", PodExists: true}) }},
		{name: "defragment without the member list", n: 3, req: Request{Defragment, "c-2"}, want: ErrMemberListUnknown,
			mutate: func(c *Cluster) { c.MemberListKnown = false }},
		{name: "never formed is no licence to remove", n: 1, req: Request{Remove, "c-0"}, want: ErrMemberListUnknown,
			mutate: func(c *Cluster) {
				c.NeverFormed, c.MemberListKnown = true, false
				c.Members[0].Voter, c.Members[0].Leader = false, false
			}},
		{name: "a listed member is judged as usual even before a cluster ID", n: 3, req: Request{Restart, "c-0"},
			want: ErrMemberListUnknown, mutate: func(c *Cluster) { c.NeverFormed, c.MemberListKnown = true, false }},
		{name: "unknown victim", n: 3, req: Request{Restart, "nope"}, want: ErrUnknownVictim},
		{name: "unknown kind", n: 3, req: Request{"Explode", "c-1"}, want: &Refusal{Reason: ReasonUnknownDisruption}},
		{name: "member list unknown", n: 3, req: Request{Restart, "c-2"}, want: ErrMemberListUnknown,
			mutate: func(c *Cluster) { c.MemberListKnown = false }},
		{name: "the leader", n: 3, req: Request{Restart, "c-0"}, want: ErrLeader, about: "c-0"},
		{name: "remove the leader", n: 5, req: Request{Remove, "c-0"}, want: ErrLeader, about: "c-0"},
		{name: "another Pod missing", n: 3, req: Request{Restart, "c-2"}, want: ErrOtherDisrupted, about: "c-1",
			mutate: func(c *Cluster) { c.Members[1].PodExists = false }},
		{name: "another Pod terminating", n: 5, req: Request{Restart, "c-4"}, want: ErrOtherDisrupted, about: "c-1",
			mutate: func(c *Cluster) { c.Members[1].PodDeleting = true }},
		{name: "another member mid-step", n: 3, req: Request{Remove, "c-2"}, want: ErrOtherDisrupted, about: "c-1",
			mutate: func(c *Cluster) { c.Members[1].InFlight = true }},
		{name: "another Pod not ready", n: 3, req: Request{Restart, "c-2"}, want: ErrOtherNotReady, about: "c-1",
			mutate: func(c *Cluster) { c.Members[1].PodReady = false }},
		{name: "another endpoint unhealthy with a ready Pod", n: 5, req: Request{Restart, "c-2"}, want: ErrOtherNotReady,
			mutate: func(c *Cluster) { c.Members[3].Healthy = false }, about: "c-3"},
		{name: "a 5-member cluster still refuses a second disruption", n: 5, req: Request{Restart, "c-4"},
			want: ErrOtherNotReady, mutate: func(c *Cluster) { c.Members[3].PodReady = false }},
		{name: "a learner exists", n: 3, req: Request{Restart, "c-2"}, want: ErrLearnerPresent, about: "c-3",
			mutate: func(c *Cluster) {
				c.Members = append(c.Members, Member{Name: "c-3", ID: 9, Learner: true, PodExists: true})
			}},
		{name: "restart one of 2 voters", n: 2, req: Request{Restart, "c-1"}, want: ErrQuorum},
		{name: "single member without opt-in", n: 1, req: Request{Restart, "c-0"}, want: ErrSingleMember},
		{name: "single memory member even with opt-in", n: 1, req: Request{Restart, "c-0"}, want: ErrMemoryData,
			mutate: func(c *Cluster) { memory(c); c.AllowDowntime = true }},
		{name: "remove the last member", n: 1, req: Request{Remove, "c-0"}, want: ErrLastMember,
			mutate: func(c *Cluster) { c.AllowDowntime = true }},
		{name: "restart a memory member", n: 3, req: Request{Restart, "c-2"}, want: ErrMemoryData, mutate: memory},
		{name: "delete data of a voter", n: 3, req: Request{DeleteData, "c-2"}, want: ErrStillMember},
		{name: "delete data of a learner", n: 3, req: Request{DeleteData, "c-3"}, want: ErrStillMember,
			mutate: func(c *Cluster) { c.Members = append(c.Members, Member{Name: "c-3", ID: 9, Learner: true}) }},
		{name: "delete data without the member list", n: 3, req: Request{DeleteData, "c-3"}, want: ErrMemberListUnknown,
			mutate: func(c *Cluster) { c.Members = append(c.Members, Member{Name: "c-3"}); c.MemberListKnown = false }},
		{name: "dormant while replicas > 0", n: 3, req: Request{Dormant, "c-2"}, want: ErrNotDormant},
		{name: "dormant on memory", n: 3, req: Request{Dormant, "c-2"}, want: ErrMemoryData,
			mutate: func(c *Cluster) { c.Dormant = true; memory(c) }},
		{name: "dormant leader before its followers", n: 3, req: Request{Dormant, "c-0"}, want: ErrLeader,
			mutate: func(c *Cluster) { c.Dormant = true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cluster(tt.n)
			if tt.mutate != nil {
				tt.mutate(&c)
			}
			err := Check(c, tt.req)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Check() = %v, want allowed", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Check() = %v, want %s", err, tt.want.Reason)
			}
			var r *Refusal
			if !errors.As(err, &r) {
				t.Fatalf("refusal is not a *Refusal: %T", err)
			}
			if r.Detail == "" || !strings.Contains(err.Error(), string(tt.want.Reason)) {
				t.Errorf("refusal does not explain itself: %q", err)
			}
			if tt.about != "" && r.Member != tt.about {
				t.Errorf("refusal names %q, want %q", r.Member, tt.about)
			}
		})
	}
}

// TestCheckQuorumProjection walks every cluster size and every number of other unhealthy voters, and
// compares Check with the arithmetic written out by hand: a disruption is allowed only when it is the
// only one.
func TestCheckQuorumProjection(t *testing.T) {
	for n := 1; n <= 7; n++ {
		for down := 0; down < n; down++ {
			for _, kind := range []Kind{Restart, Remove, Replace} {
				c := cluster(n)
				c.Members[0].Leader = false // keep the leader rule out of the arithmetic
				for i := 1; i <= down; i++ {
					c.Members[i].Healthy = false
				}
				victim := c.Members[0].Name
				err := Check(c, Request{kind, victim})
				want := down == 0 && ((kind != Remove && n >= 3) || (kind == Remove && n >= 2))
				if (err == nil) != want {
					t.Errorf("n=%d down=%d %s: Check() = %v, want allowed=%v", n, down, kind, err, want)
				}
			}
		}
	}
}

func TestRefusal(t *testing.T) {
	r := refuse(ReasonQuorumAtRisk, Request{Restart, "c-1"}, "c-1", "x %d", 1)
	if !r.Permanent() {
		t.Errorf("quorum refusal with all others healthy is structural, so permanent")
	}
	if refuse(ReasonOtherMemberNotReady, Request{}, "", "").Permanent() {
		t.Errorf("another member not ready is transient")
	}
	for _, p := range []Reason{ReasonSingleMemberNeedsOptIn, ReasonMemoryDataWouldBeLost, ReasonLastMember} {
		if !refuse(p, Request{}, "", "").Permanent() {
			t.Errorf("%s should be permanent", p)
		}
	}
	if errors.Is(r, ErrLeader) {
		t.Errorf("errors.Is matched a different reason")
	}
	wrapped := fmt.Errorf("ctx: %w", r)
	if !errors.Is(wrapped, ErrQuorum) {
		t.Errorf("errors.Is does not see through wrapping")
	}
	if s := ErrQuorum.Error(); !strings.Contains(s, "QuorumAtRisk") {
		t.Errorf("sentinel message %q", s)
	}
	if s := r.Error(); !strings.Contains(s, "Restart of c-1") || !strings.Contains(s, "x 1") {
		t.Errorf("message %q", s)
	}
}
