package resources_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
	"github.com/etcd-steward/steward/internal/testenv"
)

// configurations are the clusters whose members get different command lines: every version
// Steward supports, TLS off and on with each certificate source, PVC and memory storage, a new and
// a joining member, every typed option set, with and without spec.auth. A flag only one of them
// emits is still a flag extraArgs must not override.
func configurations() []resources.Member {
	sources := []*stewardv1.TLSSpec{
		{Enabled: ptr.To(false)},
		nil, // the default: on, Operator CA
		{Peer: stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "p"}, Client: stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "c"}},
		{Peer: stewardv1.TLSPlane{Source: stewardv1.TLSSourceCertManager, IssuerRef: &stewardv1.IssuerRef{Name: "i"}},
			Client: stewardv1.TLSPlane{Source: stewardv1.TLSSourceCertManager, IssuerRef: &stewardv1.IssuerRef{Name: "i"}}},
	}
	var out []resources.Member
	for _, version := range []string{"3.5.35", "3.6.16", "3.7.3"} {
		for _, tls := range sources {
			for _, medium := range []stewardv1.StorageMedium{"", stewardv1.StorageMediumMemory} {
				for _, state := range []resources.ClusterState{resources.StateNew, resources.StateExisting} {
					for _, auth := range []*stewardv1.AuthSpec{nil, {Enabled: true}} {
						ec := &stewardv1.EtcdCluster{
							ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "u"},
							Spec: stewardv1.EtcdClusterSpec{TLS: tls, Auth: auth, MemberTemplate: stewardv1.MemberTemplate{
								Version: version, Storage: stewardv1.StorageSpec{Medium: medium},
								Options: stewardv1.EtcdOptions{
									QuotaBackendBytes: ptr.To(resource.MustParse("1Gi")), AutoCompactionMode: "periodic",
									AutoCompactionRetention: "1h", SnapshotCount: ptr.To[int64](1),
									HeartbeatIntervalMillis: ptr.To[int32](100), ElectionTimeoutMillis: ptr.To[int32](1000),
									MaxRequestBytes: ptr.To[int32](1), LogLevel: "info",
								},
							}},
						}
						out = append(out, resources.Member{Cluster: ec, Name: "db-0", Template: &ec.Spec.MemberTemplate,
							Bootstrap: resources.Bootstrap{InitialCluster: "db-0=x", State: state}})
					}
				}
			}
		}
	}
	return out
}

// emittedFlags are the names of every flag Args emits in any configuration.
func emittedFlags(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, m := range configurations() {
		for _, a := range resources.Args(m) {
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	// The skip-SAN flag changed its name between versions; both must be seen or the matrix is wrong.
	for _, must := range []string{"experimental-peer-skip-client-san-verification", "peer-skip-client-san-verification", "peer-cert-allowed-hostname", "client-crl-file"} {
		if !slices.Contains(names, must) {
			t.Fatalf("the configurations no longer emit %s: %v", must, names)
		}
	}
	return names
}

// Issue 10, defect 8: every flag Steward sets is refused in extraArgs, or a user could override
// it (etcd takes the last occurrence of a flag, and extraArgs come last). The Go lists are checked
// here and, since api must not import this package, the CRD's CEL rule against a real apiserver.
func TestExtraArgsRefuseEveryEmittedFlag(t *testing.T) {
	// feature-gates is merged with the user's value, not owned (TestFeatureGatesMerged).
	flags := slices.DeleteFunc(emittedFlags(t), func(f string) bool { return f == "feature-gates" })
	for _, f := range flags {
		if !slices.Contains(stewardv1.OwnedFlags, f) && !slices.Contains(stewardv1.TypedFlags, f) {
			t.Errorf("Args emits --%s, which neither OwnedFlags nor TypedFlags lists", f)
		}
	}
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i, f := range flags {
		ec := &stewardv1.EtcdCluster{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("x%d", i), Namespace: "default"},
			Spec: stewardv1.EtcdClusterSpec{MemberTemplate: stewardv1.MemberTemplate{
				Version: "3.6.16", Options: stewardv1.EtcdOptions{ExtraArgs: map[string]string{f: "x"}},
			}},
		}
		err := env.Client.Create(ctx, ec)
		if err == nil {
			t.Errorf("extraArgs {%s: x} was admitted: it overrides a flag Steward sets", f)
			continue
		}
		if !strings.Contains(err.Error(), "spec.options.extraArgs cannot set") {
			t.Errorf("extraArgs {%s: x} refused for another reason: %v", f, err)
		}
	}
}

// etcd 3.6 put the startup corruption check behind --feature-gates: Steward's gate joins the
// user's in one flag (etcd takes the last occurrence, so two flags would drop one).
func TestFeatureGatesMerged(t *testing.T) {
	for _, tc := range []struct {
		version, user, want string
	}{
		{"3.6.16", "", "--feature-gates=InitialCorruptCheck=true"},
		{"3.7.3", "StopGRPCServiceOnDefrag=true", "--feature-gates=StopGRPCServiceOnDefrag=true,InitialCorruptCheck=true"},
	} {
		ec := &stewardv1.EtcdCluster{Spec: stewardv1.EtcdClusterSpec{MemberTemplate: stewardv1.MemberTemplate{Version: tc.version}}}
		if tc.user != "" {
			ec.Spec.Options.ExtraArgs = map[string]string{"feature-gates": tc.user}
		}
		args := resources.Args(resources.Member{Cluster: ec, Name: "m-0", Template: &ec.Spec.MemberTemplate})
		var gates []string
		for _, a := range args {
			if strings.HasPrefix(a, "--feature-gates=") {
				gates = append(gates, a)
			}
		}
		if len(gates) != 1 || gates[0] != tc.want {
			t.Errorf("%s with %q: %v, want [%s]", tc.version, tc.user, gates, tc.want)
		}
		if !slices.Contains(args, "--corrupt-check-time="+resources.CorruptCheckTime) {
			t.Errorf("%s: no periodic corruption check in %v", tc.version, args)
		}
	}
	ec := &stewardv1.EtcdCluster{Spec: stewardv1.EtcdClusterSpec{MemberTemplate: stewardv1.MemberTemplate{Version: "3.5.35",
		Options: stewardv1.EtcdOptions{ExtraArgs: map[string]string{"feature-gates": "X=true"}}}}}
	args := resources.Args(resources.Member{Cluster: ec, Name: "m-0", Template: &ec.Spec.MemberTemplate})
	if !slices.Contains(args, "--experimental-initial-corrupt-check=true") || !slices.Contains(args, "--feature-gates=X=true") {
		t.Errorf("3.5: %v", args)
	}
}
