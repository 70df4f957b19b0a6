package framework

import (
	"slices"
	"testing"
)

func TestLockouts(t *testing.T) {
	const (
		dropped     = "etcdserver: raft proposal dropped"
		leaderGone  = "etcdserver: leader changed"
		timedOut    = "etcdserver: request timed out"
		leaderFail  = "etcdserver: request timed out, possibly due to previous leader failure"
		connLost    = "etcdserver: request timed out, possibly due to connection lost"
		handshake   = `Internal error occurred: failed to dial: transport: authentication handshake failed: x509: certificate signed by unknown authority`
		deadline    = "context deadline exceeded"
		notFoundErr = `configmaps "k" not found`
	)
	for _, c := range []struct {
		name string
		h    History
		want []string // keys of the lockouts, in order
	}{
		{"no failures", History{put("a", "", 0, 10, ""), get("a", "", true, 10, 20, "")}, nil},
		{"a proposal dropped at a handoff, its read-back not found, then success",
			History{put("k", "", 0, 10, dropped), get("k", "", false, 10, 20, notFoundErr), put("b", "", 30, 40, "")}, nil},
		{"a leader change", History{put("k", "", 0, 10, leaderGone), put("b", "", 30, 40, "")}, nil},
		// CI, DropOldCA: the member that took the put was connected to the leader all along
		// (etcd says "connection lost" otherwise) and the put did not commit in 7 s.
		{"a commit that timed out with every peer connected, its read-back not found, then success",
			History{put("k", "", 0, 7000, timedOut), get("k", "", false, 7000, 7010, notFoundErr), put("b", "", 7100, 7110, "")}, nil},
		{"a commit that timed out as the leader changed", History{put("k", "", 0, 7000, leaderFail), put("b", "", 7100, 7110, "")}, nil},
		{"a member cut off from its peers", History{put("k", "", 0, 7000, connLost), put("b", "", 7100, 7110, "")}, []string{"k"}},
		{"a handshake the rotation broke", History{put("k", "", 0, 10, handshake), put("b", "", 30, 40, "")}, []string{"k"}},
		{"a client-side deadline", History{get("k", "", false, 0, 10000, deadline), put("b", "", 10100, 10110, "")}, []string{"k"}},
		{"a read-back not found after a put that was acknowledged",
			History{put("k", "", 0, 10, ""), get("k", "", false, 10, 20, notFoundErr), put("b", "", 30, 40, "")}, []string{"k"}},
		// A client that never recovers is locked out, whatever etcd said the first time.
		{"transient errors with no success after them",
			History{put("a", "", 0, 10, ""), put("k", "", 20, 7020, timedOut), put("j", "", 7030, 7040, dropped)}, []string{"k", "j"}},
		{"a success that began before the failure ended does not count as recovery",
			History{put("k", "", 0, 7000, timedOut), get("a", "", true, 10, 20, "")}, []string{"k"}},
		{"requests cut short by stopping the load are no failures",
			History{put("a", "", 0, 10, ""), put("k", "", 20, 30, stoppedPrefix+"context canceled")}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, o := range c.h.Lockouts() {
				got = append(got, o.Key)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("lockouts %v, want %v", got, c.want)
			}
		})
	}
}
