//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

// TestStorageGrowthOnline (issue 25, item 1): on a StorageClass that allows expansion and whose
// filesystem really grows (the local cluster's `expandable`: XFS on a loop device, grown online),
// a larger storage.size reaches every member's PVC and the filesystem etcd writes to, and no Pod
// is restarted or replaced for it.
func TestStorageGrowthOnline(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "grow", 3, "", func(ec *stewardv1.EtcdCluster) {
		ec.Spec.Storage.StorageClassName = ptr.To("expandable")
	})
	before := uids(t, ns, "grow")
	sizes := fsSizes(t, ns, "grow")
	t.Logf("filesystem sizes before (bytes): %v", sizes)
	start := time.Now()
	update(t, ns, "grow", func(ec *stewardv1.EtcdCluster) { ec.Spec.Storage.Size = ptr.To(resource.MustParse("768Mi")) })
	want := resource.MustParse("768Mi")
	f.WaitFor(t, ns, "every PVC at 768Mi", 3*time.Minute, func(ctx context.Context) (bool, error) {
		for _, m := range memberNames("grow", 3) {
			var pvc corev1.PersistentVolumeClaim
			if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.PVCName(m)}, &pvc); err != nil {
				return false, err
			}
			if c := pvc.Status.Capacity[corev1.ResourceStorage]; c.Cmp(want) < 0 {
				return false, fmt.Errorf("%s: capacity %s", pvc.Name, c.String())
			}
		}
		return true, nil
	})
	waitSettled(t, ns, "grow", 3, 2*time.Minute)
	measure(t, "storage 256Mi to 768Mi on 3 members, settled", time.Since(start))
	for m, size := range fsSizes(t, ns, "grow") {
		if size < 700<<20 {
			t.Errorf("%s's filesystem is %d bytes after the growth; want about 768 MiB", m, size)
		}
	}
	assertPodsUntouched(t, ns, "grow", before, "an online volume expansion must not restart or replace Pods")
}

// fsSizes is the size in bytes of the filesystem under each member's data directory, as etcd's
// container sees it (df in the member's Pod).
func fsSizes(t *testing.T, ns, name string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for m := range memberPods(t, ns, name) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		got, err := f.Kubectl(ctx, "-n", ns, "exec", m, "-c", "etcd", "--", "df", "-k", resources.DataMountPath)
		cancel()
		if err != nil {
			t.Fatalf("df in %s: %v: %s", m, err, got)
		}
		lines := strings.Split(strings.TrimSpace(got), "\n")
		fields := strings.Fields(lines[len(lines)-1])
		if len(fields) < 2 {
			t.Fatalf("df in %s: %q", m, got)
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			t.Fatalf("df in %s: %q: %v", m, got, err)
		}
		out[m] = kb << 10
	}
	return out
}
