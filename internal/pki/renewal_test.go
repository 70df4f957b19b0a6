package pki

import (
	"crypto/x509"
	"testing"
	"time"
)

func TestRenewalDueAtBoundary(t *testing.T) {
	ca := mustCA(t, "etcd", t0)
	// 90 days plus the 5-minute backdate: the lifetime RenewAt works from is the certificate's own.
	l := mustLeaf(t)(ca.IssuePeer(names0, t0, 0)).Cert
	life := l.NotAfter.Sub(l.NotBefore)
	for _, tt := range []struct {
		name     string
		fraction float64
		at       time.Time
	}{
		{"default", 0, l.NotBefore.Add(life / 3 * 2)},
		{"explicit two thirds", 2.0 / 3.0, l.NotBefore.Add(life / 3 * 2)},
		{"half", 0.5, l.NotBefore.Add(life / 2)},
		{"out of range falls back to default", 1.5, l.NotBefore.Add(life / 3 * 2)},
		{"negative falls back to default", -1, l.NotBefore.Add(life / 3 * 2)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			at := RenewAt(l, tt.fraction)
			// Float rounding may move the instant by nanoseconds, never by more.
			if d := at.Sub(tt.at); d < -time.Microsecond || d > time.Microsecond {
				t.Fatalf("RenewAt = %v, want %v", at, tt.at)
			}
			if RenewalDue(l, at.Add(-time.Nanosecond), tt.fraction) {
				t.Error("due one nanosecond early")
			}
			if !RenewalDue(l, at, tt.fraction) {
				t.Error("not due at the boundary")
			}
			if !RenewalDue(l, l.NotAfter.Add(time.Hour), tt.fraction) {
				t.Error("not due after expiry")
			}
		})
	}
	// 30 days of a 90-day leaf remain at the default renewal point.
	if left := l.NotAfter.Sub(RenewAt(l, 0)); left < 30*24*time.Hour || left > 30*24*time.Hour+2*time.Minute {
		t.Errorf("%v left at renewal, want ~30 days", left)
	}
}

func TestNextCheck(t *testing.T) {
	ca := mustCA(t, "etcd", t0)
	short := mustLeaf(t)(ca.IssueClient("short", t0, 3*time.Hour)).Cert
	long := mustLeaf(t)(ca.IssueClient("long", t0, 0)).Cert
	certs := []*x509.Certificate{long, short, ca.Cert}

	at, ok := NextCheck(certs, t0, 0)
	if !ok || !at.Equal(RenewAt(short, 0)) {
		t.Fatalf("NextCheck = %v %v, want the short leaf's %v", at, ok, RenewAt(short, 0))
	}
	if got := RequeueAfter(certs, t0, 0); got != RenewAt(short, 0).Sub(t0) {
		t.Errorf("RequeueAfter = %v", got)
	}
	// Once something is due, look again now, not at a past instant.
	later := t0.Add(3 * time.Hour)
	if at, _ := NextCheck(certs, later, 0); !at.Equal(later) {
		t.Errorf("overdue: NextCheck = %v, want now %v", at, later)
	}
	if got := RequeueAfter(certs, later, 0); got != 0 {
		t.Errorf("overdue: RequeueAfter = %v, want 0", got)
	}
	if _, ok := NextCheck(nil, t0, 0); ok || RequeueAfter(nil, t0, 0) != 0 {
		t.Error("no certificates still asks for a requeue")
	}
}

func TestSummarize(t *testing.T) {
	ca := mustCA(t, "etcd", t0)
	a := mustLeaf(t)(ca.IssuePeer(names0, t0, 10*time.Hour)).Cert
	b := mustLeaf(t)(ca.IssueClient("b", t0, 10*time.Hour)).Cert
	c := mustLeaf(t)(ca.IssueClient("c", t0, time.Hour)).Cert
	now := t0.Add(2 * time.Hour)
	got := Summarize(map[string]*x509.Certificate{"etcd-0/peer": a, "ca": ca.Cert, "app": b, "operator": c}, now, 0)
	want := []struct {
		name         string
		due, expired bool
	}{{"operator", true, true}, {"app", false, false}, {"etcd-0/peer", false, false}, {"ca", false, false}}
	if len(got) != len(want) {
		t.Fatalf("got %d lines", len(got))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.name || g.Due != w.due || g.Expired != w.expired {
			t.Errorf("line %d = %+v, want %+v", i, g, w)
		}
	}
	if got[0].Subject != "c" || !got[3].NotAfter.Equal(ca.Cert.NotAfter) || !got[1].RenewAt.Equal(RenewAt(b, 0)) {
		t.Errorf("summary fields wrong: %+v", got)
	}
}
