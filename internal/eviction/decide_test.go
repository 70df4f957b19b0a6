package eviction

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	healthy := []Other{{Name: "demo-1"}, {Name: "demo-2"}}
	tests := []struct {
		name    string
		f       Facts
		allowed bool
		record  bool
		says    string // the message contains it
	}{
		{name: "not a member Pod", f: Facts{Now: now}, allowed: true, says: "not a Steward member"},
		{name: "first request: recorded, refused", f: Facts{Member: "demo-0", Others: healthy, Now: now},
			record: true, says: "moving leadership off it and taking it out of the client Service"},
		{name: "unprepared: refused with what it waits for",
			f:    Facts{Member: "demo-0", RequestedAt: ago(30 * time.Second), Others: healthy, Now: now},
			says: "after 1m30s more the PodDisruptionBudget decides"},
		{name: "prepared: allowed", f: Facts{Member: "demo-0", RequestedAt: ago(10 * time.Second), Prepared: true, Others: healthy, Now: now},
			allowed: true, says: "is prepared"},
		{name: "prepared but leading again: refused",
			f:    Facts{Member: "demo-0", RequestedAt: ago(10 * time.Second), Prepared: true, Leader: true, Others: healthy, Now: now},
			says: "it leads again"},
		{name: "past the bound: allowed to the PDB", f: Facts{Member: "demo-0", RequestedAt: ago(2 * time.Minute), Others: healthy, Now: now},
			allowed: true, says: "the PodDisruptionBudget decides"},
		{name: "a shorter bound", f: Facts{Member: "demo-0", RequestedAt: ago(31 * time.Second), Bound: 30 * time.Second, Now: now},
			allowed: true, says: "not prepared within 30s"},
		{name: "another member unhealthy: refused, says why",
			f: Facts{Member: "demo-0", RequestedAt: ago(5 * time.Second), Now: now,
				Others: []Other{{Name: "demo-1", Down: true}, {Name: "demo-2"}}},
			says: "until demo-1 is healthy again"},
		{name: "another member unhealthy past the bound: the PDB decides",
			f: Facts{Member: "demo-0", RequestedAt: ago(3 * time.Minute), Now: now,
				Others: []Other{{Name: "demo-1", Down: true}, {Name: "demo-2"}}},
			allowed: true, says: "the PodDisruptionBudget decides"},
		{name: "another member prepared first: refused",
			f: Facts{Member: "demo-0", RequestedAt: ago(5 * time.Second), Now: now,
				Others: []Other{{Name: "demo-1", Evicting: true}, {Name: "demo-2"}}},
			says: "until demo-1, prepared first, is evicted"},
		{name: "a memory member: replaced add-first, its Pod deleted by Steward once the successor votes",
			f:      Facts{Member: "demo-0", AddFirst: true, Others: healthy, Now: now},
			record: true, says: "replacing it add-first"},
		{name: "a memory member while its successor joins: add-first, not a repair",
			f: Facts{Member: "demo-0", AddFirst: true, RequestedAt: ago(5 * time.Second), Now: now,
				Others: []Other{{Name: "demo-1"}, {Name: "demo-2"}, {Name: "demo-3", Down: true}}},
			says: "its successor joins and votes"},
		{name: "a memory member past the bound: the PDB decides",
			f:       Facts{Member: "demo-0", AddFirst: true, RequestedAt: ago(2 * time.Minute), Others: healthy, Now: now},
			allowed: true, says: "the PodDisruptionBudget decides"},
		{name: "an expired request starts a new bound", f: Facts{Member: "demo-0", RequestedAt: ago(RequestLifetime), Prepared: true, Now: now},
			record: true, says: "after 2m0s more"},
		{name: "a request from the future starts a new bound", f: Facts{Member: "demo-0", RequestedAt: now.Add(time.Hour), Now: now},
			record: true, says: "after 2m0s more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Decide(tt.f)
			if a.Allowed != tt.allowed || a.Record != tt.record {
				t.Errorf("Decide() = allowed %v record %v, want %v %v (%s)", a.Allowed, a.Record, tt.allowed, tt.record, a.Message)
			}
			if !strings.Contains(a.Message, tt.says) {
				t.Errorf("message %q does not say %q", a.Message, tt.says)
			}
		})
	}
}

func TestPodAnnotations(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{stewardv1.LabelVoter: "draining"}, Annotations: map[string]string{
		stewardv1.AnnotationEvictionRequested: now.Add(-time.Minute).Format(time.RFC3339Nano),
		stewardv1.AnnotationEvictionPrepared:  now.Format(time.RFC3339Nano),
	}}}
	if got := RequestedAt(p); !got.Equal(now.Add(-time.Minute)) {
		t.Errorf("RequestedAt = %v", got)
	}
	if !Prepared(p, now) {
		t.Error("a prepared Pod with a live request is not Prepared")
	}
	if Prepared(p, now.Add(RequestLifetime)) {
		t.Error("a prepared Pod whose request expired is still Prepared")
	}
	p.Labels[stewardv1.LabelVoter] = "true"
	if Prepared(p, now) {
		t.Error("a Pod back in the client Service is still Prepared")
	}
	if !RequestedAt(&corev1.Pod{}).IsZero() || Prepared(&corev1.Pod{}, now) {
		t.Error("a Pod without annotations counts as requested")
	}
}
