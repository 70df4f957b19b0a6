package tlsplan

import (
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/pki"
)

// Every member trusts both CAs and SwapLeaves could start, but the application Secret's widened
// bundle was written moments ago: an application still on the old bundle would refuse a
// new-signed member, so leaves stay old-signed until the grace has passed, and then swap.
func TestSwapLeavesWaitsForApplications(t *testing.T) {
	old, next := mustCA(t, t0.Add(-day), caLife), mustCA(t, t0, caLife)
	now := t0.Add(time.Hour)
	widened := [3][4]string{{"on", "o", "o", "on"}, {"on", "o", "o", "on"}, {"on", "o", "o", "on"}}

	f := rotationFacts(t, old, next, now, widened, "oon")
	f.AppBundleSince = now.Add(-30 * time.Second)
	d := Decide(f)
	if d.Pass != pki.SwapLeaves || len(d.WriteMembers) != 0 || d.WriteAppClient != nil || len(outdatedNames(d)) != 0 {
		t.Fatalf("within the grace: pass %s, writes %v, app %v, restarts %v", d.Pass, writtenNames(d), d.WriteAppClient != nil, outdatedNames(d))
	}
	if !mentions(d.Pending, "applications", "widened trust bundle") {
		t.Errorf("Pending = %q", d.Pending)
	}

	f.AppBundleSince = now.Add(-DefaultAppGrace)
	d = Decide(f)
	if len(d.WriteMembers) != 3 || d.WriteAppClient == nil || !signedBy(d.WriteMembers[0].Secret.Server.Cert, next) {
		t.Fatalf("after the grace: writes %v, app %v", writtenNames(d), d.WriteAppClient != nil)
	}

	f.AppGrace = time.Hour // a custom grace counts too
	f.AppBundleSince = now.Add(-DefaultAppGrace)
	if d := Decide(f); len(d.WriteMembers) != 0 {
		t.Errorf("a one-hour grace swapped after %s", DefaultAppGrace)
	}
	f.AppBundleSince = time.Time{} // unknown: long ago
	if d := Decide(f); len(d.WriteMembers) != 3 {
		t.Errorf("an unknown bundle time held the swap: %v", writtenNames(d))
	}
}

// The grace only ever holds SwapLeaves: widening and dropping the old CA are not delayed by it.
func TestAppGraceOnlyHoldsSwap(t *testing.T) {
	old, next := mustCA(t, t0.Add(-day), caLife), mustCA(t, t0, caLife)
	now := t0.Add(time.Hour)
	for name, c := range map[string]struct {
		state [3][4]string
		app   string
	}{
		"widening": {[3][4]string{{"on", "o", "o", "on"}, {"o", "o", "o", "on"}, {"o", "o", "o", "on"}}, "oon"},
		"dropping": {[3][4]string{{"on", "n", "n", "on"}, {"on", "n", "n", "on"}, {"on", "n", "n", "on"}}, "non"},
	} {
		f := rotationFacts(t, old, next, now, c.state, c.app)
		f.AppBundleSince = now
		if d := Decide(f); len(outdatedNames(d)) == 0 {
			t.Errorf("%s: nothing to restart while the application grace runs (pass %s, pending %q)", name, d.Pass, d.Pending)
		}
	}
}
