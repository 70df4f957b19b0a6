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

// tlsJoin adopts a TLS source with TLS left at its default (on).
func tlsJoin(j *stewardv1.JoinSpec) func(*stewardv1.EtcdCluster) {
	return func(ec *stewardv1.EtcdCluster) { ec.Spec.Bootstrap = &stewardv1.BootstrapSpec{Join: j} }
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
		{"TLS source without its CA", tlsJoin(&stewardv1.JoinSpec{Endpoints: []string{"https://etcd-0:2379"}}),
			"spec.bootstrap.join.caSecretName is required for a TLS (https://) source"},
		{"TLS source with its CA", tlsJoin(&stewardv1.JoinSpec{Endpoints: []string{"https://etcd-0:2379"}, CASecretName: "src-ca"}), ""},
		{"TLS source, TLS off", join(&stewardv1.JoinSpec{Endpoints: []string{"https://etcd-0:2379"}, CASecretName: "src-ca"}),
			"a TLS source is adopted with spec.tls enabled and source Operator on both planes"},
		{"TLS source, user Secrets", func(ec *stewardv1.EtcdCluster) {
			tlsJoin(&stewardv1.JoinSpec{Endpoints: []string{"https://etcd-0:2379"}, CASecretName: "src-ca"})(ec)
			ec.Spec.TLS = &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "p"},
				Client: stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "c"}}
		}, "a TLS source is adopted with spec.tls enabled and source Operator on both planes"},
		{"plaintext and TLS endpoints", tlsJoin(&stewardv1.JoinSpec{Endpoints: []string{"https://etcd-0:2379", "http://etcd-1:2379"},
			CASecretName: "src-ca"}), "all http:// (a plaintext source) or all https:// (a TLS source), not both"},
		{"a CA for a plaintext source", join(&stewardv1.JoinSpec{Endpoints: ep, CASecretName: "src-ca"}),
			"spec.bootstrap.join.caSecretName is only used with a TLS (https://) source"},
		{"TLS left on (the default)", func(ec *stewardv1.EtcdCluster) {
			join(&stewardv1.JoinSpec{Endpoints: ep})(ec)
			ec.Spec.TLS = nil
		}, "a plaintext (http://) source is adopted with spec.tls.enabled false"},
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
	joinRemovedOrAborted(t, ec)
}

// The source's CA is copied once, at creation: naming another Secret later would change nothing.
func TestJoinCAImmutable(t *testing.T) {
	ec := newCluster(tlsJoin(&stewardv1.JoinSpec{Endpoints: []string{"https://a:2379"}, CASecretName: "src-ca"}))
	if err := env.Client.Create(ctx(t), ec); err != nil {
		t.Fatal(err)
	}
	for name, ca := range map[string]string{"changed": "other-ca", "cleared": ""} {
		t.Run(name, func(t *testing.T) {
			c := ec.DeepCopy()
			c.Spec.Bootstrap.Join.CASecretName = ca
			expectResult(t, env.Client.Update(ctx(t), c), "caSecretName")
		})
	}
	joinRemovedOrAborted(t, ec)
}

// joinRemovedOrAborted: join cannot go once the cluster exists, and abort may always be set.
func joinRemovedOrAborted(t *testing.T, ec *stewardv1.EtcdCluster) {
	t.Helper()
	removed := ec.DeepCopy()
	removed.Spec.Bootstrap.Join = nil
	expectResult(t, env.Client.Update(ctx(t), removed), "spec.bootstrap is immutable")

	abort := ec.DeepCopy()
	abort.Spec.Bootstrap.Join.Abort = true
	expectResult(t, env.Client.Update(ctx(t), abort), "")
}
