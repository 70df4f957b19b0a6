package framework

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

func TestFaultTolerance(t *testing.T) {
	// What a clientv3 caller sees when a member refuses a linearizable read as a learner.
	learnerRefusal := rpctypes.Error(rpctypes.ErrGRPCNotSupportedForLearner)
	timeout := context.DeadlineExceeded
	for _, tc := range []struct {
		name      string
		probes    []VoterProbe
		ft        int
		unhealthy []string
		ok        bool
	}{
		{name: "three healthy", probes: probes(nil, nil, nil), ft: 1, ok: true},
		{name: "three, one down", probes: probes(nil, timeout, nil), ft: 0,
			unhealthy: []string{"m1: context deadline exceeded"}, ok: true},
		{name: "four healthy", probes: probes(nil, nil, nil, nil), ft: 1, ok: true},
		{name: "four, one down is below one", probes: probes(nil, nil, nil, timeout), ft: 0,
			unhealthy: []string{"m3: context deadline exceeded"}, ok: true},
		{name: "four, two down", probes: probes(timeout, nil, nil, errors.New("connection refused")), ft: -1,
			unhealthy: []string{"m0: context deadline exceeded", "m3: connection refused"}, ok: true},
		{name: "a voter still a learner in its own view straddles the promotion",
			probes: probes(nil, nil, nil, learnerRefusal), ok: false},
		{name: "the refusal as the server sends it too", probes: probes(nil, rpctypes.ErrGRPCNotSupportedForLearner, nil), ok: false},
		{name: "five, two down", probes: probes(nil, timeout, nil, timeout, nil), ft: 0,
			unhealthy: []string{"m1: context deadline exceeded", "m3: context deadline exceeded"}, ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft, unhealthy, ok := FaultTolerance(tc.probes)
			if ok != tc.ok {
				t.Fatalf("ok %t, want %t", ok, tc.ok)
			}
			if !ok {
				return
			}
			if ft != tc.ft || !slices.Equal(unhealthy, tc.unhealthy) {
				t.Errorf("FaultTolerance = %d %q, want %d %q", ft, unhealthy, tc.ft, tc.unhealthy)
			}
		})
	}
}

func probes(errs ...error) []VoterProbe {
	out := make([]VoterProbe, len(errs))
	for i, err := range errs {
		out[i] = VoterProbe{Name: fmt.Sprintf("m%d", i), Err: err}
	}
	return out
}

func TestAdoptionFaultTolerance(t *testing.T) {
	for _, tc := range []struct{ source, replicas, want int }{
		{3, 3, 1},
		{5, 3, 1}, // 5 -> 4 -> 3 voters first: 2, 1, 1
		{1, 3, 0}, // 1 -> 2 voters: neither tolerates a failure
		{2, 3, 0},
		{3, 5, 1}, // 3 -> 4 -> 5: never less than the source's 1
		{5, 5, 2},
		{7, 3, 1},
		{1, 1, 0},
		{4, 4, 1},
	} {
		if got := AdoptionFaultTolerance(tc.source, tc.replicas); got != tc.want {
			t.Errorf("AdoptionFaultTolerance(%d, %d) = %d, want %d", tc.source, tc.replicas, got, tc.want)
		}
	}
	for voters, want := range []int{0, 0, 0, 1, 1, 2, 2, 3} {
		if got := ClusterFaultTolerance(voters); got != want {
			t.Errorf("ClusterFaultTolerance(%d) = %d, want %d", voters, got, want)
		}
	}
}
