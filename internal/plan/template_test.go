package plan

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// fieldCases is the field table of issue 5 ("which fields roll"), tested against Compare. Every
// top-level field of MemberTemplate must appear (TestCompareCoversEveryField), so a new API field
// forces a decision here.
var fieldCases = []struct {
	field  string
	edit   func(t *stewardv1.MemberTemplate)
	pvc    Change
	memory Change
	// inPlace is what happens without a restart, whatever the storage (docs/rollout.md's third
	// column); resizeCases prove the resize.
	inPlace string
}{
	{"Version", func(t *stewardv1.MemberTemplate) { t.Version = "3.5.33" }, ChangeRoll, ChangeRoll, "container restart, if only the image changes"},
	{"Image", func(t *stewardv1.MemberTemplate) { t.Image = "registry.local/etcd:custom" }, ChangeRoll, ChangeRoll, "container restart, if only the image changes"},
	{"ImagePullSecrets", func(t *stewardv1.MemberTemplate) {
		t.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
	}, ChangeRoll, ChangeRoll, "—"},
	{"Storage", func(t *stewardv1.MemberTemplate) { t.Storage.Size = quantity("8Gi") }, 0, ChangeRoll, "PVC expansion (PVC storage)"},
	{"Resources", cpu("250m"), ChangeRoll, ChangeRoll, "resize: CPU and memory values"},
	{"Affinity", func(t *stewardv1.MemberTemplate) { t.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}} },
		ChangeRoll, ChangeRoll, "—"},
	{"TopologySpreadConstraints", func(t *stewardv1.MemberTemplate) {
		t.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone"}}
	}, ChangeRoll, ChangeRoll, "—"},
	{"NodeSelector", func(t *stewardv1.MemberTemplate) { t.NodeSelector = map[string]string{"disk": "ssd"} }, ChangeRoll, ChangeRoll, "—"},
	{"Tolerations", func(t *stewardv1.MemberTemplate) { t.Tolerations = []corev1.Toleration{{Key: "etcd"}} }, ChangeRoll, ChangeRoll, "—"},
	{"PriorityClassName", func(t *stewardv1.MemberTemplate) { t.PriorityClassName = "system-cluster-critical" }, ChangeRoll, ChangeRoll, "—"},
	{"PodMetadata", func(t *stewardv1.MemberTemplate) { t.PodMetadata.Labels = map[string]string{"a": "b"} }, ChangeMetadata, ChangeMetadata, "patch"},
	{"Options", func(t *stewardv1.MemberTemplate) { t.Options.SnapshotCount = ptrTo(int64(5000)) }, ChangeRoll, ChangeRoll, "—"},
}

// moreCases are finer points of the same comparison.
var moreCases = []struct {
	name   string
	edit   func(t *stewardv1.MemberTemplate)
	pvc    Change
	memory Change
}{
	{"retentionPolicy touches no member", func(t *stewardv1.MemberTemplate) { t.Storage.RetentionPolicy = stewardv1.RetentionDelete }, 0, 0},
	{"the same size spelled differently", func(t *stewardv1.MemberTemplate) { t.Storage.Size = quantity("4096Mi") }, 0, 0},
	{"storageClassName (locked, but compared)", func(t *stewardv1.MemberTemplate) { t.Storage.StorageClassName = ptrTo("fast") }, ChangeRoll, ChangeRoll},
	{"annotations", func(t *stewardv1.MemberTemplate) { t.PodMetadata.Annotations = map[string]string{"a": "b"} }, ChangeMetadata, ChangeMetadata},
	{"empty and nil maps are equal", func(t *stewardv1.MemberTemplate) {
		t.NodeSelector, t.PodMetadata.Labels = map[string]string{}, map[string]string{}
	}, 0, 0},
	{"empty and nil lists are equal", func(t *stewardv1.MemberTemplate) { t.Tolerations = []corev1.Toleration{} }, 0, 0},
	{"equal quantities in resources", func(t *stewardv1.MemberTemplate) {
		t.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	}, ChangeRoll, ChangeRoll},
	{"quota", func(t *stewardv1.MemberTemplate) { t.Options.QuotaBackendBytes = quantity("2Gi") }, ChangeRoll, ChangeRoll},
	{"compaction", func(t *stewardv1.MemberTemplate) { t.Options.AutoCompactionMode = "periodic" }, ChangeRoll, ChangeRoll},
	{"heartbeat", func(t *stewardv1.MemberTemplate) { t.Options.HeartbeatIntervalMillis = ptrTo(int32(200)) }, ChangeRoll, ChangeRoll},
	{"election timeout", func(t *stewardv1.MemberTemplate) { t.Options.ElectionTimeoutMillis = ptrTo(int32(2000)) }, ChangeRoll, ChangeRoll},
	{"max request bytes", func(t *stewardv1.MemberTemplate) { t.Options.MaxRequestBytes = ptrTo(int32(1 << 21)) }, ChangeRoll, ChangeRoll},
	{"log level", func(t *stewardv1.MemberTemplate) { t.Options.LogLevel = "debug" }, ChangeRoll, ChangeRoll},
	{"extraArgs", func(t *stewardv1.MemberTemplate) { t.Options.ExtraArgs = map[string]string{"log-outputs": "stderr"} }, ChangeRoll, ChangeRoll},
	{"metadata and a roll", func(t *stewardv1.MemberTemplate) {
		t.PodMetadata.Labels = map[string]string{"a": "b"}
		t.Version = "3.5.33"
	}, ChangeRoll | ChangeMetadata, ChangeRoll | ChangeMetadata},
}

func TestCompare(t *testing.T) {
	base := template("3.5.32")
	check := func(t *testing.T, edit func(*stewardv1.MemberTemplate), pvc, mem Change) {
		t.Helper()
		target := *base.DeepCopy()
		edit(&target)
		if got := Compare(base, target, stewardv1.StorageMediumDefault); got != pvc {
			t.Errorf("pvc: Compare = %s, want %s", got, pvc)
		}
		if got := Compare(base, target, memory); got != mem {
			t.Errorf("memory: Compare = %s, want %s", got, mem)
		}
		if got := Compare(target, target, memory); got != 0 {
			t.Errorf("a template differs from itself: %s", got)
		}
	}
	for _, c := range fieldCases {
		t.Run(c.field, func(t *testing.T) { check(t, c.edit, c.pvc, c.memory) })
	}
	for _, c := range moreCases {
		t.Run(c.name, func(t *testing.T) { check(t, c.edit, c.pvc, c.memory) })
	}
}

// resizeCases: CPU and memory values change on a running Pod without a restart; anything the
// kubelet cannot resize in place, or that Steward cannot prove safe, rolls.
var resizeCases = []struct {
	name     string
	from, to corev1.ResourceRequirements
	with     func(t *stewardv1.MemberTemplate)
	want     Change
}{
	{"cpu request up", res("100m", "", "", ""), res("250m", "", "", ""), nil, ChangeResize},
	{"cpu and memory requests down", res("500m", "1Gi", "", ""), res("250m", "512Mi", "", ""), nil, ChangeResize},
	{"memory limit up", res("", "256Mi", "", "1Gi"), res("", "256Mi", "", "2Gi"), nil, ChangeResize},
	{"memory limit down: the member may use more", res("", "256Mi", "", "2Gi"), res("", "256Mi", "", "1Gi"), nil, ChangeRoll},
	{"a request appears", res("", "", "", ""), res("100m", "", "", ""), nil, ChangeRoll},
	{"a limit goes", res("100m", "", "1", ""), res("100m", "", "", ""), nil, ChangeRoll},
	{"Guaranteed stays Guaranteed", res("1", "1Gi", "1", "1Gi"), res("2", "1Gi", "2", "1Gi"), nil, ChangeResize},
	{"Guaranteed to Burstable: QoS is immutable", res("1", "1Gi", "1", "1Gi"), res("500m", "1Gi", "1", "1Gi"), nil, ChangeRoll},
	{"resources and a version", res("100m", "", "", ""), res("250m", "", "", ""),
		func(t *stewardv1.MemberTemplate) { t.Version = "3.5.33" }, ChangeRoll},
	{"resources and metadata", res("100m", "", "", ""), res("250m", "", "", ""),
		func(t *stewardv1.MemberTemplate) { t.PodMetadata.Labels = map[string]string{"a": "b"} }, ChangeResize | ChangeMetadata},
}

func res(cpuReq, memReq, cpuLim, memLim string) corev1.ResourceRequirements {
	list := func(c, m string) corev1.ResourceList {
		l := corev1.ResourceList{}
		if c != "" {
			l[corev1.ResourceCPU] = resource.MustParse(c)
		}
		if m != "" {
			l[corev1.ResourceMemory] = resource.MustParse(m)
		}
		if len(l) == 0 {
			return nil
		}
		return l
	}
	return corev1.ResourceRequirements{Requests: list(cpuReq, memReq), Limits: list(cpuLim, memLim)}
}

func TestCompareResize(t *testing.T) {
	for _, c := range resizeCases {
		t.Run(c.name, func(t *testing.T) {
			from, to := template("3.5.32"), template("3.5.32")
			from.Resources, to.Resources = c.from, c.to
			if c.with != nil {
				c.with(&to)
			}
			for _, medium := range []stewardv1.StorageMedium{stewardv1.StorageMediumDefault, memory} {
				if got := Compare(from, to, medium); got != c.want {
					t.Errorf("%q: Compare = %s, want %s", medium, got, c.want)
				}
			}
		})
	}
}

func TestCompareCoversEveryField(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range fieldCases {
		covered[c.field] = true
	}
	typ := reflect.TypeOf(stewardv1.MemberTemplate{})
	for i := 0; i < typ.NumField(); i++ {
		if f := typ.Field(i).Name; !covered[f] {
			t.Errorf("MemberTemplate.%s has no row in the field table: decide whether it rolls", f)
		}
	}
}

func TestExpansionNeeded(t *testing.T) {
	target := template("3.5.32") // 4Gi
	tests := []struct {
		name   string
		pvc    PVC
		medium stewardv1.StorageMedium
		want   bool
	}{
		{name: "smaller", pvc: PVC{Exists: true, Requested: resource.MustParse("2Gi")}, want: true},
		{name: "equal", pvc: PVC{Exists: true, Requested: resource.MustParse("4Gi")}},
		{name: "equal, other unit", pvc: PVC{Exists: true, Requested: resource.MustParse("4096Mi")}},
		{name: "larger (never shrunk)", pvc: PVC{Exists: true, Requested: resource.MustParse("8Gi")}},
		{name: "no PVC", pvc: PVC{}},
		{name: "memory", pvc: PVC{Exists: true, Requested: resource.MustParse("1Gi")}, medium: memory},
	}
	for _, tt := range tests {
		if got := expansionNeeded(tt.pvc, target, tt.medium); got != tt.want {
			t.Errorf("%s: expansionNeeded = %v, want %v", tt.name, got, tt.want)
		}
	}
	if expansionNeeded(PVC{Exists: true}, stewardv1.MemberTemplate{}, "") {
		t.Errorf("no target size means nothing to grow to")
	}
}

func TestClassifyVersion(t *testing.T) {
	tests := []struct {
		from, to string
		want     VersionStep
		allowed  bool
	}{
		{"3.5.32", "3.5.32", StepSame, true},
		{"3.5.32", "3.5.33", StepPatch, true},
		{"3.5.33", "3.5.2", StepPatch, true},
		{"3.5.32", "3.6.0", StepMinorUp, true},
		{"3.6.12", "3.7.0", StepMinorUp, true},
		{"3.6.12", "3.5.32", StepDowngrade, false},
		{"3.6.12", "2.9.9", StepDowngrade, false},
		{"3.5.32", "3.7.0", StepSkippedMinor, false},
		{"3.7.0", "4.0.0", StepSkippedMinor, false},
		{"v3.6.0", "3.6.1", StepPatch, true},
		{"3.6.0-rc.1", "3.6.0", StepSame, true},
		{"3.6.0+build.7", "3.7.0", StepMinorUp, true},
		{"3.6", "3.7.0", StepUnparseable, true},
		{"3.6.x", "3.7.0", StepUnparseable, true},
		{"3.6.12", "latest", StepUnparseable, true},
		{"", "3.6.0", StepUnparseable, true},
		{"3..0", "3.6.0", StepUnparseable, true},
		{"-3.6.0", "3.6.0", StepUnparseable, true},
	}
	for _, tt := range tests {
		got := ClassifyVersion(tt.from, tt.to)
		if got != tt.want || got.Allowed() != tt.allowed {
			t.Errorf("ClassifyVersion(%q, %q) = %s (allowed %v), want %s (allowed %v)",
				tt.from, tt.to, got, got.Allowed(), tt.want, tt.allowed)
		}
	}
}

func TestChangeString(t *testing.T) {
	for c, want := range map[Change]string{0: "none", ChangeRoll: "roll", ChangeMetadata | ChangeExpand: "metadata+expand"} {
		if got := c.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", c, got, want)
		}
	}
}
