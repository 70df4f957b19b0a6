package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/plan"
)

// Tenant users wait until every member's etcd checks the revocation list and the list is current.
func TestCRLServed(t *testing.T) {
	withAuth := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: stewardv1.EtcdClusterSpec{Auth: &stewardv1.AuthSpec{}}}
	serving := func() []plan.Member {
		return []plan.Member{{Name: "db-0", Pod: plan.Pod{Exists: true, ServesCRL: true}}, {Name: "db-1", Pod: plan.Pod{Exists: true, ServesCRL: true}}}
	}
	for _, tc := range []struct {
		name    string
		ec      *stewardv1.EtcdCluster
		current bool
		mutate  func([]plan.Member) []plan.Member
		want    bool
	}{
		{"every member serves the current list", withAuth, true, nil, true},
		{"the list Secret is behind status", withAuth, false, nil, false},
		{"no spec.auth", &stewardv1.EtcdCluster{}, true, nil, false},
		{"a member runs without it", withAuth, true, func(m []plan.Member) []plan.Member { m[1].Pod.ServesCRL = false; return m }, false},
		{"a member has no Pod", withAuth, true, func(m []plan.Member) []plan.Member { m[1].Pod = plan.Pod{}; return m }, false},
		{"a member's Pod is being deleted", withAuth, true, func(m []plan.Member) []plan.Member { m[0].Pod.Deleting = true; return m }, false},
		{"no members", withAuth, true, func([]plan.Member) []plan.Member { return nil }, false},
	} {
		members := serving()
		if tc.mutate != nil {
			members = tc.mutate(members)
		}
		o := &observed{facts: plan.Facts{Members: members}, crl: crlState{current: tc.current}}
		if got := crlServed(tc.ec, o); got != tc.want {
			t.Errorf("%s: crlServed = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A revoked name comes back only once every member's Pod was created after the list was issued.
func TestOpenSinceRevoke(t *testing.T) {
	issued := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	pod := func(created time.Time) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
	}
	for _, tc := range []struct {
		name   string
		issued time.Time
		pods   map[string]*corev1.Pod
		want   bool
	}{
		{"every Pod newer than the list", issued, map[string]*corev1.Pod{"a": pod(issued.Add(time.Second)), "b": pod(issued.Add(time.Hour))}, false},
		{"one Pod older", issued, map[string]*corev1.Pod{"a": pod(issued.Add(time.Second)), "b": pod(issued.Add(-time.Hour))}, true},
		{"a Pod created in the list's second", issued, map[string]*corev1.Pod{"a": pod(issued)}, true},
		{"no list read", time.Time{}, map[string]*corev1.Pod{"a": pod(issued.Add(time.Hour))}, true},
		{"no Pods: no connections", issued, map[string]*corev1.Pod{"a": nil}, false},
	} {
		o := &observed{pods: tc.pods, crl: crlState{current: true, issued: tc.issued}}
		if got := openSinceRevoke(o); got != tc.want {
			t.Errorf("%s: openSinceRevoke = %v, want %v", tc.name, got, tc.want)
		}
	}
}
