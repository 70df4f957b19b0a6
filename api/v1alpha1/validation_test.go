package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/testenv"
)

// The admission rules live in the CRD (markers and CEL). These tests install the generated CRDs
// into a real kube-apiserver and prove each rule accepts what it should and refuses, with its
// message, what it should not.

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	os.Exit(code)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

var nameSeq int

// newCluster returns a minimal valid cluster with a unique name, changed by mutate.
func newCluster(mutate func(*stewardv1.EtcdCluster)) *stewardv1.EtcdCluster {
	nameSeq++
	ec := &stewardv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", nameSeq), Namespace: "default"},
		Spec:       stewardv1.EtcdClusterSpec{MemberTemplate: stewardv1.MemberTemplate{Version: "3.6.16"}},
	}
	if mutate != nil {
		mutate(ec)
	}
	return ec
}

func qty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// expectResult checks an apiserver answer against the wanted message ("" = must be accepted).
func expectResult(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("refused a valid object: %v", err)
	case want != "" && err == nil:
		t.Fatalf("accepted an invalid object; wanted an error containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not contain %q", err.Error(), want)
	}
}

func TestDefaults(t *testing.T) {
	ec := newCluster(nil)
	if err := env.Client.Create(ctx(t), ec); err != nil {
		t.Fatal(err)
	}
	s := ec.Spec
	if s.Replicas == nil || *s.Replicas != 3 {
		t.Errorf("replicas default = %v, want 3", s.Replicas)
	}
	if s.Storage.Size == nil || s.Storage.Size.String() != "4Gi" {
		t.Errorf("storage.size default = %v, want 4Gi", s.Storage.Size)
	}
	if s.UpdateStrategy.Type != stewardv1.RollingUpdate {
		t.Errorf("updateStrategy.type default = %q", s.UpdateStrategy.Type)
	}
	if s.ProgressDeadlineSeconds == nil || *s.ProgressDeadlineSeconds != 600 {
		t.Errorf("progressDeadlineSeconds default = %v", s.ProgressDeadlineSeconds)
	}
	if s.Storage.Medium != stewardv1.StorageMediumDefault || s.Storage.RetentionPolicy != "" {
		t.Errorf("storage defaults = %+v", s.Storage)
	}
	tls := s.TLS
	if tls == nil || tls.Enabled == nil || !*tls.Enabled || tls.ClusterDomain != "cluster.local" ||
		tls.CertificateDuration.Duration != 2160*time.Hour || tls.CADuration.Duration != 43800*time.Hour ||
		*tls.RenewBeforePercentage != 33 || tls.DropOldCAAfter == nil || tls.DropOldCAAfter.Duration != 168*time.Hour || tls.Peer.Source != stewardv1.TLSSourceOperator || tls.Client.Source != stewardv1.TLSSourceOperator {
		t.Errorf("tls defaults = %+v", tls)
	}
	if !ec.TLSEnabled() {
		t.Error("TLS must be on by default")
	}
	if d := s.Maintenance; d == nil || !s.DefragmentationEnabled() || *d.Defragmentation.FragmentationPercent != 45 ||
		d.Defragmentation.MinDBSize.String() != "100Mi" || d.Defragmentation.Schedule != "" {
		t.Errorf("maintenance defaults = %+v", d)
	}
}

func TestCreateValidation(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*stewardv1.EtcdCluster)
		want   string
	}{
		{"minimal", nil, ""},
		{"everything set", func(c *stewardv1.EtcdCluster) {
			c.Spec.Replicas = ptr.To[int32](5)
			c.Spec.Image = "example.com/etcd:custom"
			c.Spec.Storage = stewardv1.StorageSpec{Size: qty("8Gi"), StorageClassName: ptr.To("fast"), RetentionPolicy: stewardv1.RetentionDelete}
			c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
			c.Spec.NodeSelector = map[string]string{"disk": "ssd"}
			c.Spec.PodMetadata.Labels = map[string]string{"team": "a"}
			c.Spec.Options = stewardv1.EtcdOptions{
				QuotaBackendBytes: qty("4Gi"), AutoCompactionMode: "periodic", AutoCompactionRetention: "1h",
				SnapshotCount: ptr.To[int64](10000), HeartbeatIntervalMillis: ptr.To[int32](200),
				ElectionTimeoutMillis: ptr.To[int32](2000), MaxRequestBytes: ptr.To[int32](3 << 20),
				LogLevel: "warn", ExtraArgs: map[string]string{"experimental-compact-hash-check-enabled": "true"},
			}
			c.Spec.UpdateStrategy = stewardv1.UpdateStrategy{Type: stewardv1.OnDelete}
			c.Spec.PodDisruptionBudget = &stewardv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To[int32](3)}
		}, ""},
		{"version two parts", func(c *stewardv1.EtcdCluster) { c.Spec.Version = "3.6" }, "spec.version must be X.Y.Z"},
		{"version with v", func(c *stewardv1.EtcdCluster) { c.Spec.Version = "v3.6.1" }, "spec.version must be X.Y.Z"},
		{"version missing", func(c *stewardv1.EtcdCluster) { c.Spec.Version = "" }, "spec.version"},
		{"negative replicas", func(c *stewardv1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](-1) }, "spec.replicas"},
		{"dormant PVC cluster", func(c *stewardv1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](0) }, ""},
		{"dormant memory cluster", func(c *stewardv1.EtcdCluster) {
			c.Spec.Replicas = ptr.To[int32](0)
			c.Spec.Storage.Medium = stewardv1.StorageMediumMemory
		}, "spec.replicas: 0 is refused with spec.storage.medium Memory"},
		{"maxSurge with memory", func(c *stewardv1.EtcdCluster) {
			c.Spec.Storage.Medium = stewardv1.StorageMediumMemory
			c.Spec.UpdateStrategy.MaxSurge = ptr.To[int32](0)
		}, ""},
		{"maxSurge 2", func(c *stewardv1.EtcdCluster) {
			c.Spec.Storage.Medium = stewardv1.StorageMediumMemory
			c.Spec.UpdateStrategy.MaxSurge = ptr.To[int32](2)
		}, "spec.updateStrategy.maxSurge"},
		{"maxSurge with PVCs", func(c *stewardv1.EtcdCluster) { c.Spec.UpdateStrategy.MaxSurge = ptr.To[int32](1) },
			"spec.updateStrategy.maxSurge applies to spec.storage.medium Memory only"},
		{"unknown medium", func(c *stewardv1.EtcdCluster) { c.Spec.Storage.Medium = "Disk" }, "spec.storage.medium: Unsupported value"},
		{"class with memory", func(c *stewardv1.EtcdCluster) {
			c.Spec.Storage.Medium = stewardv1.StorageMediumMemory
			c.Spec.Storage.StorageClassName = ptr.To("fast")
		}, "storageClassName applies to PVC storage only"},
		{"zero size", func(c *stewardv1.EtcdCluster) { c.Spec.Storage.Size = qty("0") }, "spec.storage.size must be a positive quantity"},
		{"unknown retention", func(c *stewardv1.EtcdCluster) { c.Spec.Storage.RetentionPolicy = "Keep" }, "spec.storage.retentionPolicy: Unsupported value"},
		{"owned flag", func(c *stewardv1.EtcdCluster) {
			c.Spec.Options.ExtraArgs = map[string]string{"data-dir": "/tmp", "log-outputs": "stderr"}
		}, "spec.options.extraArgs cannot set flags Steward owns"},
		{"TLS flag", func(c *stewardv1.EtcdCluster) {
			c.Spec.Options.ExtraArgs = map[string]string{"peer-trusted-ca-file": "/ca"}
		}, "cannot set flags Steward owns"},
		{"typed flag", func(c *stewardv1.EtcdCluster) {
			c.Spec.Options.ExtraArgs = map[string]string{"snapshot-count": "5"}
		}, "cannot set a flag that has a typed field"},
		{"dashed flag", func(c *stewardv1.EtcdCluster) {
			c.Spec.Options.ExtraArgs = map[string]string{"--log-outputs": "stderr"}
		}, "extraArgs keys must be etcd flag names without leading dashes"},
		{"upper-case flag", func(c *stewardv1.EtcdCluster) {
			c.Spec.Options.ExtraArgs = map[string]string{"Log-Outputs": "stderr"}
		}, "extraArgs keys must be etcd flag names"},
		{"bad update strategy", func(c *stewardv1.EtcdCluster) { c.Spec.UpdateStrategy.Type = "Recreate" }, "spec.updateStrategy.type: Unsupported value"},
		{"PDB above replicas", func(c *stewardv1.EtcdCluster) {
			c.Spec.PodDisruptionBudget = &stewardv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To[int32](4)}
		}, "spec.podDisruptionBudget.minAvailable cannot exceed spec.replicas"},
		{"PDB disabled with minAvailable", func(c *stewardv1.EtcdCluster) {
			c.Spec.PodDisruptionBudget = &stewardv1.PodDisruptionBudgetSpec{Enabled: ptr.To(false), MinAvailable: ptr.To[int32](1)}
		}, "minAvailable needs the budget enabled"},
		{"PDB disabled", func(c *stewardv1.EtcdCluster) {
			c.Spec.PodDisruptionBudget = &stewardv1.PodDisruptionBudgetSpec{Enabled: ptr.To(false)}
		}, ""},
		{"election below 5 heartbeats", func(c *stewardv1.EtcdCluster) {
			c.Spec.Options.HeartbeatIntervalMillis = ptr.To[int32](300)
		}, "electionTimeoutMillis must be at least 5 times"},
		{"retention without mode", func(c *stewardv1.EtcdCluster) { c.Spec.Options.AutoCompactionRetention = "1h" }, "needs spec.options.autoCompactionMode"},
		{"malformed retention", func(c *stewardv1.EtcdCluster) {
			c.Spec.Options.AutoCompactionMode = "periodic"
			c.Spec.Options.AutoCompactionRetention = "an hour"
		}, "spec.options.autoCompactionRetention"},
		{"revision retention", func(c *stewardv1.EtcdCluster) {
			c.Spec.Options.AutoCompactionMode = "revision"
			c.Spec.Options.AutoCompactionRetention = "1000"
		}, ""},
		{"short progress deadline", func(c *stewardv1.EtcdCluster) { c.Spec.ProgressDeadlineSeconds = ptr.To[int32](5) }, "spec.progressDeadlineSeconds"},
		{"plaintext", func(c *stewardv1.EtcdCluster) { c.Spec.TLS = &stewardv1.TLSSpec{Enabled: ptr.To(false)} }, ""},
		{"plaintext peers, TLS clients", func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{Enabled: ptr.To(false)}}
		}, ""},
		{"plaintext clients alone", func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{Client: stewardv1.TLSPlane{Enabled: ptr.To(false)}}
		}, "spec.tls.client.enabled cannot be false"},
		{"plaintext peers with the user's Secrets", func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{Client: stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "x"},
				Peer: stewardv1.TLSPlane{Enabled: ptr.To(false), Source: stewardv1.TLSSourceSecret, SecretName: "y"}}
		}, "spec.tls.peer.enabled false (plaintext peers, TLS clients) is supported with source Operator only"},
		{"short leaves", func(c *stewardv1.EtcdCluster) { c.Spec.TLS = &stewardv1.TLSSpec{CertificateDuration: dur("2m")} }, ""},
		{"leaves under a minute", func(c *stewardv1.EtcdCluster) { c.Spec.TLS = &stewardv1.TLSSpec{CertificateDuration: dur("30s")} },
			"spec.tls.certificateDuration must be at least 1m"},
		{"CA shorter than two leaves", func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{CertificateDuration: dur("10h"), CADuration: dur("15h")}
		}, "spec.tls.caDuration must be at least twice"},
		{"drop grace under the application wait", func(c *stewardv1.EtcdCluster) { c.Spec.TLS = &stewardv1.TLSSpec{DropOldCAAfter: dur("60s")} },
			"spec.tls.dropOldCAAfter must be at least 90s"},
		// 1000h × 33 % = 330h of CA life left at the rotation, less than twice the default week.
		{"drop grace does not fit the CA's renewal window", func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{CertificateDuration: dur("100h"), CADuration: dur("1000h")}
		},
			"must be at least twice spec.tls.dropOldCAAfter"},
		{"drop grace fits", func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{CertificateDuration: dur("100h"), CADuration: dur("1100h")}
		}, ""},
		{"short CA with a short drop grace", func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{CertificateDuration: dur("2h"), CADuration: dur("10h"), DropOldCAAfter: dur("90s"), ApproveDropOldCA: "0123456789ab"}
		}, ""},
		{"the CA rule leaves user Secrets alone", func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{CertificateDuration: dur("2h"), CADuration: dur("10h"), Client: stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "x"},
				Peer: stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "y"}}
		}, ""},
		{"approval too long", func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{ApproveDropOldCA: strings.Repeat("a", 65)}
		},
			"spec.tls.approveDropOldCA"},
		{"renew percentage out of range", func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{RenewBeforePercentage: ptr.To[int32](95)}
		},
			"spec.tls.renewBeforePercentage"},
		{"Secret source without name", func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret}}
		}, "secretName is required with source Secret"},
		{"name without Secret source", func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{Client: stewardv1.TLSPlane{SecretName: "x"}}
		}, "secretName is only used with source Secret"},
		{"mixed sources", func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{Client: stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "x"}}
		}, "must be the same"},
		{"user Secrets", func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{Client: stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "x"},
				Peer: stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "y"}}
		}, ""},
		{"rotateCA with user Secrets", func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{RotateCA: "now", Client: stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "x"},
				Peer: stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "y"}}
		}, "spec.tls.rotateCA rotates the CA Steward runs"},
		{"cert-manager", func(c *stewardv1.EtcdCluster) {
			ref := &stewardv1.IssuerRef{Name: "ca"}
			c.Spec.TLS = &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{Source: stewardv1.TLSSourceCertManager, IssuerRef: ref},
				Client: stewardv1.TLSPlane{Source: stewardv1.TLSSourceCertManager, IssuerRef: ref}}
		}, ""},
		{"cert-manager without issuer", func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{Source: stewardv1.TLSSourceCertManager}, Client: stewardv1.TLSPlane{Source: stewardv1.TLSSourceCertManager}}
		}, "issuerRef is required with source CertManager"},
		{"issuer without cert-manager", func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{IssuerRef: &stewardv1.IssuerRef{Name: "ca"}}}
		}, "issuerRef is only used with source CertManager"},
		{"unknown issuer kind", func(c *stewardv1.EtcdCluster) {
			ref := &stewardv1.IssuerRef{Name: "ca", Kind: "Vault"}
			c.Spec.TLS = &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{Source: stewardv1.TLSSourceCertManager, IssuerRef: ref},
				Client: stewardv1.TLSPlane{Source: stewardv1.TLSSourceCertManager, IssuerRef: ref}}
		}, "spec.tls.peer.issuerRef.kind: Unsupported value"},
		{"unknown source", func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{Source: "Vault"}}
		},
			"spec.tls.peer.source: Unsupported value"},
		{"defragmentation settings", func(c *stewardv1.EtcdCluster) {
			c.Spec.Maintenance = &stewardv1.MaintenanceSpec{Defragmentation: stewardv1.DefragmentationSpec{
				Schedule: "0 3 * * 0", FragmentationPercent: ptr.To[int32](30), MinDBSize: qty("1Gi")}}
		}, ""},
		{"defragmentation every 12 hours", func(c *stewardv1.EtcdCluster) {
			c.Spec.Maintenance = &stewardv1.MaintenanceSpec{Defragmentation: stewardv1.DefragmentationSpec{Schedule: "@every 12h"}}
		}, ""},
		{"defragmentation schedule with 3 fields", func(c *stewardv1.EtcdCluster) {
			c.Spec.Maintenance = &stewardv1.MaintenanceSpec{Defragmentation: stewardv1.DefragmentationSpec{Schedule: "0 3 *"}}
		}, "spec.maintenance.defragmentation.schedule must be a 5-field cron expression"},
		{"defragmentation unknown descriptor", func(c *stewardv1.EtcdCluster) {
			c.Spec.Maintenance = &stewardv1.MaintenanceSpec{Defragmentation: stewardv1.DefragmentationSpec{Schedule: "@fortnightly"}}
		}, "spec.maintenance.defragmentation.schedule must be"},
		{"fragmentation above 100%", func(c *stewardv1.EtcdCluster) {
			c.Spec.Maintenance = &stewardv1.MaintenanceSpec{Defragmentation: stewardv1.DefragmentationSpec{FragmentationPercent: ptr.To[int32](120)}}
		}, "spec.maintenance.defragmentation.fragmentationPercent"},
		{"node loss settings", func(c *stewardv1.EtcdCluster) {
			c.Spec.NodeLoss = &stewardv1.NodeLossSpec{ReplaceAfterSeconds: ptr.To[int32](60), CordonedReplaceAfterSeconds: ptr.To[int32](600)}
		}, ""},
		{"node loss: a cordon waits at least as long as a lost node", func(c *stewardv1.EtcdCluster) {
			c.Spec.NodeLoss = &stewardv1.NodeLossSpec{ReplaceAfterSeconds: ptr.To[int32](900), CordonedReplaceAfterSeconds: ptr.To[int32](600)}
		}, "spec.nodeLoss.cordonedReplaceAfterSeconds must be at least spec.nodeLoss.replaceAfterSeconds"},
		{"node loss: the default cordon wait against a long replaceAfterSeconds", func(c *stewardv1.EtcdCluster) {
			c.Spec.NodeLoss = &stewardv1.NodeLossSpec{ReplaceAfterSeconds: ptr.To[int32](3600)}
		}, "spec.nodeLoss.cordonedReplaceAfterSeconds must be at least"},
		{"node loss: replaceAfterSeconds below 30", func(c *stewardv1.EtcdCluster) {
			c.Spec.NodeLoss = &stewardv1.NodeLossSpec{ReplaceAfterSeconds: ptr.To[int32](5)}
		}, "spec.nodeLoss.replaceAfterSeconds"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expectResult(t, env.Client.Create(ctx(t), newCluster(tc.mutate)), tc.want)
		})
	}
}

func TestUpdateValidation(t *testing.T) {
	cases := []struct {
		name   string
		create func(*stewardv1.EtcdCluster)
		update func(*stewardv1.EtcdCluster)
		want   string
	}{
		{"medium PVC to Memory", nil, func(c *stewardv1.EtcdCluster) { c.Spec.Storage.Medium = stewardv1.StorageMediumMemory }, "spec.storage.medium is locked"},
		{"medium Memory to PVC", func(c *stewardv1.EtcdCluster) { c.Spec.Storage.Medium = stewardv1.StorageMediumMemory },
			func(c *stewardv1.EtcdCluster) { c.Spec.Storage.Medium = "" }, "spec.storage.medium is locked"},
		{"class changed", func(c *stewardv1.EtcdCluster) { c.Spec.Storage.StorageClassName = ptr.To("a") },
			func(c *stewardv1.EtcdCluster) { c.Spec.Storage.StorageClassName = ptr.To("b") }, "spec.storage.storageClassName is locked"},
		{"class added", nil, func(c *stewardv1.EtcdCluster) { c.Spec.Storage.StorageClassName = ptr.To("a") }, "spec.storage.storageClassName is locked"},
		{"class removed", func(c *stewardv1.EtcdCluster) { c.Spec.Storage.StorageClassName = ptr.To("a") },
			func(c *stewardv1.EtcdCluster) { c.Spec.Storage.StorageClassName = nil }, "spec.storage.storageClassName is locked"},
		{"size shrinks", func(c *stewardv1.EtcdCluster) { c.Spec.Storage.Size = qty("8Gi") },
			func(c *stewardv1.EtcdCluster) { c.Spec.Storage.Size = qty("6Gi") }, "spec.storage.size may only grow"},
		{"size grows", nil, func(c *stewardv1.EtcdCluster) { c.Spec.Storage.Size = qty("10Gi") }, ""},
		{"size same in other units", func(c *stewardv1.EtcdCluster) { c.Spec.Storage.Size = qty("1Gi") },
			func(c *stewardv1.EtcdCluster) { c.Spec.Storage.Size = qty("1024Mi") }, ""},
		{"retention changes", nil, func(c *stewardv1.EtcdCluster) { c.Spec.Storage.RetentionPolicy = stewardv1.RetentionDelete }, ""},
		{"resources change", nil, func(c *stewardv1.EtcdCluster) {
			c.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		}, ""},
		{"memory cluster to zero", func(c *stewardv1.EtcdCluster) { c.Spec.Storage.Medium = stewardv1.StorageMediumMemory },
			func(c *stewardv1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](0) }, "spec.replicas: 0 is refused"},
		{"scale below PDB", func(c *stewardv1.EtcdCluster) {
			c.Spec.PodDisruptionBudget = &stewardv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To[int32](3)}
		}, func(c *stewardv1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](1) }, "minAvailable cannot exceed spec.replicas"},
		{"peer TLS switched off", nil, func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{Enabled: ptr.To(false)}}
		}, "spec.tls.peer.enabled is fixed at creation"},
		{"peer TLS switched on", func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS = &stewardv1.TLSSpec{Peer: stewardv1.TLSPlane{Enabled: ptr.To(false)}}
		}, func(c *stewardv1.EtcdCluster) { c.Spec.TLS.Peer.Enabled = ptr.To(true) }, "spec.tls.peer.enabled is fixed at creation"},
		{"patch up", nil, func(c *stewardv1.EtcdCluster) { c.Spec.Version = "3.6.17" }, ""},
		{"patch down", nil, func(c *stewardv1.EtcdCluster) { c.Spec.Version = "3.6.2" }, ""},
		{"one minor up", func(c *stewardv1.EtcdCluster) { c.Spec.Version = "3.5.21" },
			func(c *stewardv1.EtcdCluster) { c.Spec.Version = "3.6.16" }, ""},
		{"skipped minor", func(c *stewardv1.EtcdCluster) { c.Spec.Version = "3.5.21" },
			func(c *stewardv1.EtcdCluster) { c.Spec.Version = "3.7.3" }, "spec.version: 3.5.21 -> 3.7.3 is refused"},
		{"one minor down (etcd's downgrade protocol)", nil, func(c *stewardv1.EtcdCluster) { c.Spec.Version = "3.5.21" }, ""},
		{"two minors down", func(c *stewardv1.EtcdCluster) { c.Spec.Version = "3.7.3" },
			func(c *stewardv1.EtcdCluster) { c.Spec.Version = "3.5.35" }, "spec.version: 3.7.3 -> 3.5.35 is refused: etcd upgrades and downgrades one minor version at a time"},
		{"major change", nil, func(c *stewardv1.EtcdCluster) { c.Spec.Version = "4.0.0" }, "etcd upgrades and downgrades one minor version at a time"},
		{"TLS turned off", nil, func(c *stewardv1.EtcdCluster) { c.Spec.TLS.Enabled = ptr.To(false) }, "spec.tls.enabled is fixed at creation"},
		{"TLS turned on", func(c *stewardv1.EtcdCluster) { c.Spec.TLS = &stewardv1.TLSSpec{Enabled: ptr.To(false)} },
			func(c *stewardv1.EtcdCluster) { c.Spec.TLS.Enabled = ptr.To(true) }, "spec.tls.enabled is fixed at creation"},
		{"cluster domain changed", nil, func(c *stewardv1.EtcdCluster) { c.Spec.TLS.ClusterDomain = "example.org" }, "spec.tls.clusterDomain is fixed"},
		{"CA rotation requested", nil, func(c *stewardv1.EtcdCluster) { c.Spec.TLS.RotateCA = "2026-11-29" }, ""},
		{"source changed", nil, func(c *stewardv1.EtcdCluster) {
			c.Spec.TLS.Client = stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "x"}
			c.Spec.TLS.Peer = stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "x"}
		}, "the TLS source is fixed at creation"},
		{"leaf lifetime changed", nil, func(c *stewardv1.EtcdCluster) { c.Spec.TLS.CertificateDuration = dur("24h") }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ec := newCluster(tc.create)
			if err := env.Client.Create(ctx(t), ec); err != nil {
				t.Fatalf("creating the starting object: %v", err)
			}
			tc.update(ec)
			expectResult(t, env.Client.Update(ctx(t), ec), tc.want)
		})
	}
}

func dur(s string) *metav1.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return &metav1.Duration{Duration: d}
}

func TestScaleSubresource(t *testing.T) {
	ec := newCluster(nil)
	if err := env.Client.Create(ctx(t), ec); err != nil {
		t.Fatal(err)
	}
	scale := &autoscalingv1.Scale{}
	if err := env.Client.SubResource("scale").Get(ctx(t), ec, scale); err != nil {
		t.Fatalf("get scale: %v", err)
	}
	if got := scale.Spec.Replicas; got != 3 {
		t.Fatalf("scale.spec.replicas = %d, want 3", got)
	}
	key := client.ObjectKeyFromObject(ec)
	scale.Spec.Replicas = 5
	if err := env.Client.SubResource("scale").Update(ctx(t), ec, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("update scale: %v", err)
	}
	ec = &stewardv1.EtcdCluster{}
	if err := env.Client.Get(ctx(t), key, ec); err != nil {
		t.Fatal(err)
	}
	if *ec.Spec.Replicas != 5 {
		t.Fatalf("spec.replicas = %d after scaling to 5", *ec.Spec.Replicas)
	}
}

func TestMemberValidation(t *testing.T) {
	m := &stewardv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: "m-0", Namespace: "default"},
		Spec: stewardv1.EtcdMemberSpec{ClusterName: "m", Ordinal: 0,
			Template: stewardv1.MemberTemplate{Version: "3.6.16"}},
	}
	if err := env.Client.Create(ctx(t), m); err != nil {
		t.Fatal(err)
	}
	m.Spec.Ordinal = 1
	expectResult(t, env.Client.Update(ctx(t), m), "spec.ordinal is immutable")
	m.Spec.Ordinal = 0
	m.Spec.ClusterName = "other"
	expectResult(t, env.Client.Update(ctx(t), m), "spec.clusterName is immutable")
	m.Spec.ClusterName = "m"
	m.Spec.Template.Version = "3.7.0"
	expectResult(t, env.Client.Update(ctx(t), m), "")
}
