package framework

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// briefLimit bounds the one-line state a failed wait carries: CI shows a failed test's own lines only
// (hack/e2e-failures.awk), cut at this length, and a dump of many lines is not among them.
const briefLimit = 1200

// Brief is the namespace's state in one line: each EtcdCluster's conditions (the operator's own
// account of what it waits for) and each Pod's phase, readiness and deletion. A failed wait says it
// with its error, so the CI excerpt alone tells which side stalled.
func (f *Framework) Brief(ctx context.Context, ns string) string {
	var clusters stewardv1.EtcdClusterList
	var pods corev1.PodList
	if err := f.Client.List(ctx, &clusters, client.InNamespace(ns)); err != nil {
		return "state unreadable: " + err.Error()
	}
	if err := f.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return "state unreadable: " + err.Error()
	}
	return brief(clusters.Items, pods.Items)
}

// brief formats what Brief read.
func brief(clusters []stewardv1.EtcdCluster, pods []corev1.Pod) string {
	// The cluster a wait is about is most likely one not settled, or the newest: it goes first, so
	// that a cut line still shows it (a namespace may hold several restored clusters).
	clusters = slices.Clone(clusters)
	slices.SortStableFunc(clusters, func(a, b stewardv1.EtcdCluster) int {
		if sa, sb := settled(&a), settled(&b); sa != sb {
			return cmp.Compare(btoi(sa), btoi(sb))
		}
		return b.CreationTimestamp.Compare(a.CreationTimestamp.Time)
	})
	var parts []string
	for _, ec := range clusters {
		conds := make([]string, 0, len(ec.Status.Conditions))
		for _, c := range ec.Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, cut(c.Message, 200)))
		}
		parts = append(parts, fmt.Sprintf("cluster %s (generation %d, observed %d): %s", ec.Name, ec.Generation,
			ec.Status.ObservedGeneration, strings.Join(conds, "; ")))
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	ps := make([]string, 0, len(pods))
	for _, p := range pods {
		s := fmt.Sprintf("%s %s ready=%v node=%s uid=%.8s", p.Name, p.Status.Phase, PodReady(&p), p.Spec.NodeName, p.UID)
		if p.DeletionTimestamp != nil {
			s += " deleting-since=" + p.DeletionTimestamp.UTC().Format(time.TimeOnly)
		}
		ps = append(ps, s)
	}
	parts = append(parts, "pods: "+strings.Join(ps, ", "))
	return cut(strings.Join(parts, " | "), briefLimit)
}

// settled: Available and not Progressing, by the operator's own conditions.
func settled(ec *stewardv1.EtcdCluster) bool {
	return apimeta.IsStatusConditionTrue(ec.Status.Conditions, "Available") &&
		apimeta.IsStatusConditionFalse(ec.Status.Conditions, "Progressing")
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
