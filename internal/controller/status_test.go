package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func TestImageTag(t *testing.T) {
	for ref, want := range map[string]string{
		"gcr.io/etcd-development/etcd:v3.6.16":                                                "v3.6.16",
		"registry.local:5000/etcd":                                                            "",
		"registry.local:5000/etcd:3.6.16":                                                     "3.6.16",
		"etcd@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa":        "",
		"etcd:custom@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa": "custom",
		"etcd":             "",
		"Not A Reference:": "",
	} {
		if got := imageTag(ref); got != want {
			t.Errorf("imageTag(%q) = %q, want %q", ref, got, want)
		}
	}
}

func TestVersionCondition(t *testing.T) {
	cases := []struct {
		image, warning string
		want           metav1.ConditionStatus
	}{
		{"", "", metav1.ConditionFalse},
		{"mirror.local/etcd:v3.6.16", "", metav1.ConditionFalse},
		{"mirror.local/etcd:3.6.16", "", metav1.ConditionFalse},
		{"mirror.local/etcd:latest", "", metav1.ConditionTrue},
		{"mirror.local/etcd@sha256:abc", "", metav1.ConditionTrue},
		{"", "version is not X.Y.Z", metav1.ConditionTrue},
	}
	for _, c := range cases {
		ec := &stewardv1.EtcdCluster{Spec: stewardv1.EtcdClusterSpec{MemberTemplate: stewardv1.MemberTemplate{Version: "3.6.16", Image: c.image}}}
		if got := versionCondition(ec, c.warning); got.Status != c.want {
			t.Errorf("image %q warning %q: %s %s, want %s", c.image, c.warning, got.Status, got.Message, c.want)
		}
	}
}
