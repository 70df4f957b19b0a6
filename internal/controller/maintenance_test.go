package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func TestDefragRequested(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	member := func(created, succeeded time.Duration, annotation string) *stewardv1.EtcdMember {
		m := &stewardv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(created))}}
		if succeeded != 0 {
			m.Status.Defragmentation = &stewardv1.MemberDefragmentation{LastSucceeded: &metav1.Time{Time: now.Add(succeeded)}}
		}
		if annotation != "" {
			m.Annotations = map[string]string{stewardv1.AnnotationDefragmentRequested: annotation}
		}
		return m
	}
	cluster := func(annotation string) *stewardv1.EtcdCluster {
		ec := &stewardv1.EtcdCluster{}
		if annotation != "" {
			ec.Annotations = map[string]string{stewardv1.AnnotationDefragmentRequested: annotation}
		}
		return ec
	}
	for _, tt := range []struct {
		name string
		ec   *stewardv1.EtcdCluster
		m    *stewardv1.EtcdMember
		want bool
	}{
		{"no request", cluster(""), member(-time.Hour, 0, ""), false},
		{"a request on the cluster after the member's creation", cluster(at(-time.Minute)), member(-time.Hour, 0, ""), true},
		{"satisfied by a later success", cluster(at(-time.Minute)), member(-time.Hour, -30*time.Second, ""), false},
		{"not satisfied by an earlier success", cluster(at(-time.Minute)), member(-time.Hour, -2*time.Minute, ""), true},
		{"a member created after the request has nothing to do", cluster(at(-time.Hour)), member(-time.Minute, 0, ""), false},
		{"a request on the member alone", cluster(""), member(-time.Hour, 0, at(-time.Minute)), true},
		{"a fast clock counts as now: satisfied by a success now", cluster(at(10 * time.Minute)), member(-time.Hour, time.Nanosecond, ""), false},
		{"a fast clock still asks once", cluster(at(10 * time.Minute)), member(-time.Hour, -time.Minute, ""), true},
		{"garbage is ignored", cluster("soon"), member(-time.Hour, 0, "yes"), false},
	} {
		if got := defragRequested(tt.ec, tt.m, now); got != tt.want {
			t.Errorf("%s: defragRequested = %v, want %v", tt.name, got, tt.want)
		}
	}
}
