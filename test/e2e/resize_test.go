//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func withResources(cpuReq, memLimit string) func(*stewardv1.EtcdCluster) {
	return func(ec *stewardv1.EtcdCluster) {
		ec.Spec.Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuReq)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memLimit)},
		}
	}
}

// TestResizeInPlace (issue 13, item 2): CPU and memory values change on the running Pods, one
// member at a time, with no restart (same Pods, same restart counts) and no failed request; a
// memory limit lowered is a restart instead (Steward cannot prove the member's use stays under it).
func TestResizeInPlace(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "rs", 3, "", withResources("20m", "512Mi"))
	before := uids(t, ns, "rs")
	w := watchRoll(t, ns, "rs", 3)
	w.change(withResources("40m", "768Mi"))
	waitSettled(t, ns, "rs", 3, 3*time.Minute)
	w.finish("resize in place 3-pvc", 0)
	if after := uids(t, ns, "rs"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("Pods recreated or restarted by an in-place resize: %v -> %v", before, after)
	}
	podsOn(t, ns, "rs", 3, "running on the new resources", func(p *corev1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "etcd" && cs.Resources != nil {
				return cs.Resources.Requests.Cpu().Cmp(resource.MustParse("40m")) == 0 &&
					cs.Resources.Limits.Memory().Cmp(resource.MustParse("768Mi")) == 0
			}
		}
		return false
	})
	if resized := eventsWith(t, ns, "rs", "ResizePod"); len(resized) != 3 {
		t.Errorf("ResizePod events %q, want one per member", resized)
	}
	if restarts := eventsWith(t, ns, "rs", "DeletePod"); len(restarts) != 0 {
		t.Errorf("Pods deleted for a resize: %q", restarts)
	}

	// Lower the memory limit: a roll.
	update(t, ns, "rs", withResources("40m", "384Mi"))
	waitSettled(t, ns, "rs", 3, 4*time.Minute)
	if order := rolledOrder(t, ns, "rs", "DeletePod"); len(order) != 3 {
		t.Errorf("a lowered memory limit rolled %v, want each member restarted once", order)
	}
	podsOn(t, ns, "rs", 3, "on the lowered limit", func(p *corev1.Pod) bool {
		return p.Spec.Containers[0].Resources.Limits.Memory().Cmp(resource.MustParse("384Mi")) == 0
	})
}
