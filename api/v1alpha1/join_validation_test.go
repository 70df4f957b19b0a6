package v1alpha1_test

import (
	"testing"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func join(j *stewardv1.JoinSpec) func(*stewardv1.EtcdCluster) {
	return func(ec *stewardv1.EtcdCluster) {
		ec.Spec.TLS = &stewardv1.TLSSpec{Enabled: new(false)}
		ec.Spec.Bootstrap = &stewardv1.BootstrapSpec{Join: j}
	}
}

func TestJoinValidation(t *testing.T) {
	ep := []string{"http://etcd-0.etcd-headless.default.svc:2379"}
	cases := []struct {
		name   string
		mutate func(*stewardv1.EtcdCluster)
		want   string
	}{
		{"plaintext source", join(&stewardv1.JoinSpec{Endpoints: ep, StatefulSetName: "etcd"}), ""},
		{"no endpoints", join(&stewardv1.JoinSpec{}), "spec.bootstrap.join.endpoints"},
		{"not a URL", join(&stewardv1.JoinSpec{Endpoints: []string{"etcd-0:2379"}}), "spec.bootstrap.join.endpoints"},
		{"a path", join(&stewardv1.JoinSpec{Endpoints: []string{"http://etcd-0:2379/v3"}}), "spec.bootstrap.join.endpoints"},
		{"TLS source", join(&stewardv1.JoinSpec{Endpoints: []string{"https://etcd-0:2379"}}), "only plaintext (http://) sources can be adopted so far"},
		{"TLS left on (the default)", func(ec *stewardv1.EtcdCluster) {
			join(&stewardv1.JoinSpec{Endpoints: ep})(ec)
			ec.Spec.TLS = nil
		}, "spec.bootstrap.join adopts plaintext sources only so far: set spec.tls.enabled to false"},
		{"restore and join", func(ec *stewardv1.EtcdCluster) {
			join(&stewardv1.JoinSpec{Endpoints: ep})(ec)
			ec.Spec.Bootstrap.Restore = &stewardv1.RestoreSpec{BackupName: "b1"}
		}, "set restore or join, not both"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expectResult(t, env.Client.Create(ctx(t), newCluster(tc.mutate)), tc.want)
		})
	}
}

// Only abort may change once the cluster exists: the source is what the preflight checked.
func TestJoinImmutableButAbort(t *testing.T) {
	ec := newCluster(join(&stewardv1.JoinSpec{Endpoints: []string{"http://a:2379"}, StatefulSetName: "etcd"}))
	if err := env.Client.Create(ctx(t), ec); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(*stewardv1.JoinSpec){
		"endpoints":           func(j *stewardv1.JoinSpec) { j.Endpoints = []string{"http://b:2379"} },
		"statefulSetName":     func(j *stewardv1.JoinSpec) { j.StatefulSetName = "other" },
		"statefulSet cleared": func(j *stewardv1.JoinSpec) { j.StatefulSetName = "" },
	} {
		t.Run(name, func(t *testing.T) {
			c := ec.DeepCopy()
			change(c.Spec.Bootstrap.Join)
			expectResult(t, env.Client.Update(ctx(t), c), "spec.bootstrap is immutable")
		})
	}
	removed := ec.DeepCopy()
	removed.Spec.Bootstrap.Join = nil
	expectResult(t, env.Client.Update(ctx(t), removed), "spec.bootstrap is immutable")

	abort := ec.DeepCopy()
	abort.Spec.Bootstrap.Join.Abort = true
	expectResult(t, env.Client.Update(ctx(t), abort), "")
}
