package pki

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func (w *world) mustPlan() RotationPlan {
	w.t.Helper()
	p, err := PlanRotation(w.input())
	if err != nil {
		w.t.Fatal(err)
	}
	return p
}

func (w *world) requireIntact(when string) {
	w.t.Helper()
	if b := w.broken(); len(b) > 0 {
		w.t.Fatalf("%s: %d handshakes fail: %s", when, len(b), strings.Join(b, "; "))
	}
}

// Walks a whole rotation of a 3-member cluster, one controller action at a time, and checks after
// every action that every member authenticates every other in both directions and that the
// operator and an application still reach every member.
func TestRotationSimulation(t *testing.T) {
	wantTrace := []string{
		"WidenTrust etcd-0,etcd-1,etcd-2| restart etcd-2",
		"WidenTrust etcd-0,etcd-1| restart etcd-1",
		"WidenTrust etcd-0| restart etcd-0",
		"SwapLeaves etcd-0,etcd-1,etcd-2|app,operator swap etcd-2",
		"SwapLeaves etcd-0,etcd-1|app,operator swap etcd-1",
		"SwapLeaves etcd-0|app,operator swap etcd-0",
		"SwapLeaves |app,operator swap app",
		"SwapLeaves |operator swap operator",
		"DropOldCA etcd-0,etcd-1,etcd-2| restart etcd-2",
		"DropOldCA etcd-0,etcd-1| restart etcd-1",
		"DropOldCA etcd-0| restart etcd-0",
	}
	for _, tt := range []struct {
		name string
		// renew re-issues etcd-0's leaves from the pass's signer after every step, as routine
		// renewal would if it fell due mid-rotation.
		renew, laggingApp bool
	}{
		{"plain", false, false},
		{"renewals during the rotation", true, false},
		{"application reloads one step late", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, 3)
			w.requireIntact("before")
			if p := w.mustPlan(); p.Pass != Done || len(p.Pending) != 0 {
				t.Fatalf("no rotation requested, yet %s %v", p.Pass, p.Pending)
			}
			w.new = mustCA(t, "etcd", w.now.Add(time.Hour))
			w.now = w.now.Add(time.Hour)
			var trace []string
			passes := []Pass{WidenTrust, SwapLeaves, DropOldCA, Done}
			last := 0
			for step := 0; ; step++ {
				if step > 20 {
					t.Fatalf("rotation does not converge: %v", trace)
				}
				p := w.mustPlan()
				i := slices.Index(passes, p.Pass)
				if i < last {
					t.Fatalf("pass went back from %s to %s", passes[last], p.Pass)
				}
				last = i
				if p.Pass == Done {
					break
				}
				head := fmt.Sprintf("%s %s|%s", p.Pass, strings.Join(p.Pending, ","), strings.Join(p.PendingClients, ","))
				act := w.step(p, tt.laggingApp)
				if act == "" {
					t.Fatalf("%s: nothing to do, yet not done", head)
				}
				trace = append(trace, head+" "+act)
				w.requireIntact(head + " " + act)
				if tt.renew {
					w.issueMember(w.members[0], w.caByFP(Fingerprint(p.Signer)))
					w.requireIntact(head + " then renewing etcd-0")
				}
			}
			if !tt.renew && !slices.Equal(trace, wantTrace) {
				t.Errorf("trace:\n%s\nwant:\n%s", strings.Join(trace, "\n"), strings.Join(wantTrace, "\n"))
			}
			// Finishing: the new CA becomes the current one; the old one is gone from every pool.
			newFP := Fingerprint(w.new.Cert)
			w.old, w.new = w.new, nil
			p := w.mustPlan()
			w.step(p, false)
			w.requireIntact("after")
			for _, m := range w.members {
				if !slices.Equal(Fingerprints(m.trust), []string{newFP}) {
					t.Errorf("%s still trusts %d CAs", m.names.Member, len(m.trust))
				}
			}
			if len(w.clients[1].bundle) != 1 || Fingerprint(w.clients[1].bundle[0]) != newFP {
				t.Error("the application bundle still holds the old CA")
			}
		})
	}
}

// The checker above must be able to fail: each shortcut the pass order forbids breaks a
// handshake it reports, and PlanRotation refuses to plan from the state the shortcut leaves.
func TestRotationShortcutsBreak(t *testing.T) {
	for _, tt := range []struct {
		name    string
		do      func(w *world)
		broken  string
		refuses bool
	}{
		{"swap a leaf before widening trust", func(w *world) {
			w.issueMember(w.members[2], w.new)
		}, "etcd-0 rejects peer etcd-2's server cert", true},
		{"drop the old CA while a client is old-signed", func(w *world) {
			both := Bundle(w.old.Cert, w.new.Cert)
			for _, m := range w.members {
				m.trust = both
				w.issueMember(m, w.new)
			}
			w.members[2].trust = Bundle(w.new.Cert)
		}, "etcd-2 rejects client operator", true},
		{"an application that never reloads its bundle", func(w *world) {
			both := Bundle(w.old.Cert, w.new.Cert)
			for _, m := range w.members {
				m.trust = both
			}
			w.client("operator").bundle = both
			w.issueMember(w.members[2], w.new)
		}, "app rejects etcd-2", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, 3)
			w.new = mustCA(t, "etcd", w.now)
			tt.do(w)
			if b := w.broken(); !slices.Contains(b, tt.broken) {
				t.Errorf("broken = %q, want it to include %q", b, tt.broken)
			}
			if _, err := PlanRotation(w.input()); (err != nil) != tt.refuses {
				t.Errorf("PlanRotation err = %v, want refusal %v", err, tt.refuses)
			}
		})
	}
}
