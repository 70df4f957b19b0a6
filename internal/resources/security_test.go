package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

var updateRendering = flag.Bool("update-pod-rendering", false, "rewrite testdata/pod-rendering.golden")

// renderings are member Pods of every shape Steward builds: PVC and memory, TLS on and off, with
// and without the data-check wrapper, a quorum recovery's survivor.
func renderings() map[string]*corev1.Pod {
	pvc := cluster(nil)
	mem := cluster(func(c *stewardv1.EtcdCluster) { c.Spec.Storage.Medium = stewardv1.StorageMediumMemory })
	plain := cluster(func(c *stewardv1.EtcdCluster) { c.Spec.TLS = &stewardv1.TLSSpec{Enabled: ptr.To(false)} })
	wrapped := func(m Member) Member {
		m.ToolsImage = "steward:test"
		m.Bootstrap.MemberID, m.Bootstrap.ExpectData = "8e9e05c52164694d", true
		return m
	}
	survivor := member(pvc)
	survivor.Bootstrap.ForceNewCluster = true
	return map[string]*corev1.Pod{
		"pvc":         Pod(member(pvc), "registry.local/etcd"),
		"pvc-wrapped": Pod(wrapped(member(pvc)), "registry.local/etcd"),
		"memory":      Pod(wrapped(member(mem)), "registry.local/etcd"),
		"plaintext":   Pod(member(plain), "registry.local/etcd"),
		"force-new":   Pod(survivor, "registry.local/etcd"),
		// Not in the rendering golden: it runs the same wrapper, so no member rolls for it.
		"image-volume": Pod(func(m Member) Member { m.ToolsFromImage = true; return m }(wrapped(member(pvc))), "registry.local/etcd"),
		"old-3.5-args": Pod(member(cluster(func(c *stewardv1.EtcdCluster) { c.Spec.Version = "3.5.21" })), ""),
	}
}

// Every member Pod passes Pod Security "restricted", checked with the admission plugin's own code.
func TestMemberPodsPassRestricted(t *testing.T) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lv := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	for name, p := range renderings() {
		for _, r := range eval.EvaluatePod(lv, &p.ObjectMeta, &p.Spec) {
			if !r.Allowed {
				t.Errorf("%s: restricted refuses it: %s: %s", name, r.ForbiddenReason, r.ForbiddenDetail)
			}
		}
	}
	// The check can fail: a root container is refused.
	p := renderings()["pvc"]
	p.Spec.Containers[0].SecurityContext.RunAsNonRoot = ptr.To(false)
	refused := false
	for _, r := range eval.EvaluatePod(lv, &p.ObjectMeta, &p.Spec) {
		refused = refused || !r.Allowed
	}
	if !refused {
		t.Error("the evaluator admitted a container with runAsNonRoot=false")
	}
}

// TestPodRevisionGuardsRendering fails when what Steward puts in member Pods changes while
// PodRevision stays: existing members would keep the old Pod (never rolled) or, worse, differ from
// new ones silently. Raise PodRevision when the change must reach running members, then rewrite the
// record with `go test ./internal/resources -run PodRevision -update-pod-rendering`.
func TestPodRevisionGuardsRendering(t *testing.T) {
	const golden = "testdata/pod-rendering.golden"
	pods := renderings()
	h := sha256.New()
	for _, name := range []string{"pvc", "pvc-wrapped", "memory", "plaintext", "force-new", "old-3.5-args"} {
		p := pods[name].DeepCopy()
		delete(p.Annotations, stewardv1.AnnotationPodRevision)
		// Placement is not rendering a running Pod needs (see placement.go): a default that changes
		// there must not raise PodRevision, which would roll every member of every cluster.
		p.Spec.Affinity, p.Spec.TopologySpreadConstraints = nil, nil
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s\n%s\n", name, b)
	}
	got := fmt.Sprintf("revision %d\nsha256 %s\n", PodRevision, hex.EncodeToString(h.Sum(nil)))
	if *updateRendering {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	want := string(b)
	wantRev, wantSum, _ := strings.Cut(want, "\n")
	gotRev, gotSum, _ := strings.Cut(got, "\n")
	switch {
	case gotSum != wantSum && gotRev == wantRev:
		t.Errorf("member Pods render differently but PodRevision is still %d: raise it if running members "+
			"must move to the new Pod (they roll one at a time on upgrade), then run with -update-pod-rendering", PodRevision)
	case got != want:
		t.Errorf("%s is stale: run go test ./internal/resources -run PodRevision -update-pod-rendering", golden)
	}
	for name, p := range pods {
		if PodRevisionOf(p) != PodRevision {
			t.Errorf("%s: Pod says revision %q, want %d", name, p.Annotations[stewardv1.AnnotationPodRevision], PodRevision)
		}
	}
}

func TestPodRevisionOf(t *testing.T) {
	for v, want := range map[string]int{"": 1, "2": 2, "17": 17, "x": 1, "-3": 1, "0": 1, "99999999999999": 1} {
		p := &corev1.Pod{}
		if v != "" {
			p.Annotations = map[string]string{stewardv1.AnnotationPodRevision: v}
		}
		if got := PodRevisionOf(p); got != want {
			t.Errorf("PodRevisionOf(%q) = %d, want %d", v, got, want)
		}
	}
}
