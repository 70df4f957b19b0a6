package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// dumped remembers which (test, namespace) pairs were dumped: a failed WaitFor dumps,
// and the namespace cleanup of the same failed test must not repeat it.
var dumped sync.Map

// Dump writes what one needs to understand a failure in namespace ns — Pod states,
// events, container logs, and the operator's logs — to the test log and to
// <Artifacts>/<test>/<ns>.txt. Errors while collecting are part of the dump.
func (f *Framework) Dump(t testing.TB, ns string) {
	t.Helper()
	if _, done := dumped.LoadOrStore(t.Name()+"\x00"+ns, true); done {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	fmt.Fprintf(&b, "===== diagnostics of namespace %s at %s =====\n", ns, time.Now().Format(time.RFC3339Nano))
	f.dumpPods(ctx, &b, ns, 30)
	f.dumpEvents(ctx, &b, ns)
	if ns != f.OperatorNamespace {
		fmt.Fprintf(&b, "----- operator (%s) -----\n", f.OperatorNamespace)
		f.dumpPods(ctx, &b, f.OperatorNamespace, 200)
		f.dumpOperatorAbout(ctx, &b, ns, 120)
	}
	out := b.String()
	t.Log(out)
	dir := filepath.Join(f.Artifacts, sanitize(t.Name()))
	if err := os.MkdirAll(dir, 0o755); err == nil {
		path := filepath.Join(dir, ns+".txt")
		if err := os.WriteFile(path, []byte(out), 0o644); err == nil {
			t.Logf("diagnostics written to %s", path)
		}
	}
}

// dumpPods prints each Pod's phase, conditions and container states, then the last
// tailLines lines of each container's log (and of its previous instance, if any).
func (f *Framework) dumpPods(ctx context.Context, b *strings.Builder, ns string, tailLines int64) {
	var pods corev1.PodList
	if err := f.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		fmt.Fprintf(b, "listing pods: %v\n", err)
		return
	}
	for _, p := range pods.Items {
		b.WriteString(DescribePod(&p))
	}
	for _, p := range pods.Items {
		// Init containers first, in their order: a Pod held in PodInitializing says why there.
		for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			if cs.State.Waiting != nil && cs.RestartCount == 0 {
				continue // never started: no log to read
			}
			f.dumpLog(ctx, b, &p, cs.Name, false, tailLines)
			if cs.RestartCount > 0 {
				f.dumpLog(ctx, b, &p, cs.Name, true, tailLines)
			}
		}
	}
}

func (f *Framework) dumpLog(ctx context.Context, b *strings.Builder, p *corev1.Pod, container string, previous bool, tail int64) {
	fmt.Fprintf(b, "--- logs %s/%s [%s] previous=%v (last %d lines) ---\n", p.Namespace, p.Name, container, previous, tail)
	raw, err := f.Clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
		Container: container, Previous: previous, TailLines: &tail, Timestamps: true,
	}).DoRaw(ctx)
	if err != nil {
		fmt.Fprintf(b, "(%v)\n", err)
		return
	}
	b.Write(raw)
}

func (f *Framework) dumpEvents(ctx context.Context, b *strings.Builder, ns string) {
	var events corev1.EventList
	if err := f.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		fmt.Fprintf(b, "listing events: %v\n", err)
		return
	}
	sort.Slice(events.Items, func(i, j int) bool { return EventTime(&events.Items[i]).Before(EventTime(&events.Items[j])) })
	fmt.Fprintf(b, "--- events (%d) ---\n", len(events.Items))
	for _, e := range events.Items {
		fmt.Fprintf(b, "%s %-7s %s/%s %s: %s (x%d)\n", EventTime(&e).Format("15:04:05.000"), e.Type,
			e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, strings.TrimSpace(e.Message), max(e.Count, 1))
	}
}

// Warnings is the namespace's last n Warning events in one line ("" when none): a Pod held by a
// mount, a probe or a failed init container says so there, where a failed wait's line is read.
func (f *Framework) Warnings(ctx context.Context, ns string, n int) string {
	var events corev1.EventList
	if err := f.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		return "; warnings unreadable: " + err.Error()
	}
	return warnings(events.Items, n)
}

func warnings(events []corev1.Event, n int) string {
	events = slices.DeleteFunc(slices.Clone(events), func(e corev1.Event) bool { return e.Type != corev1.EventTypeWarning })
	slices.SortStableFunc(events, func(a, b corev1.Event) int { return EventTime(&a).Compare(EventTime(&b)) })
	if len(events) == 0 {
		return ""
	}
	var out []string
	for _, e := range events[max(0, len(events)-n):] {
		out = append(out, fmt.Sprintf("%s %s/%s %s (x%d): %s", EventTime(&e).UTC().Format(time.TimeOnly), e.InvolvedObject.Kind,
			e.InvolvedObject.Name, e.Reason, max(e.Count, 1), cut(e.Message, 160)))
	}
	return "; last warnings: " + strings.Join(out, "; ")
}

// EventTime is when an event happened: its microsecond EventTime (events.k8s.io, what Steward
// records) when set, so events of the same second keep their order, else the legacy timestamps.
func EventTime(e *corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// DescribePod is a compact, one-block summary of a Pod's state for failure output.
func DescribePod(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pod %s/%s phase=%s ip=%s node=%s", p.Namespace, p.Name, p.Status.Phase, p.Status.PodIP, p.Spec.NodeName)
	if p.DeletionTimestamp != nil {
		fmt.Fprintf(&b, " deleting-since=%s", p.DeletionTimestamp.Format("15:04:05"))
	}
	b.WriteString("\n")
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, "  condition %s=%s %s %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	for _, cs := range p.Status.InitContainerStatuses {
		fmt.Fprintf(&b, "  init %s restarts=%d state=%s\n", cs.Name, cs.RestartCount, containerState(cs.State))
	}
	for _, cs := range p.Status.ContainerStatuses {
		fmt.Fprintf(&b, "  container %s ready=%v restarts=%d image=%s state=%s\n", cs.Name, cs.Ready, cs.RestartCount, cs.Image, containerState(cs.State))
		if cs.LastTerminationState.Terminated != nil {
			fmt.Fprintf(&b, "    last: %s\n", containerState(cs.LastTerminationState))
		}
	}
	return b.String()
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running since " + s.Running.StartedAt.Format("15:04:05")
	case s.Waiting != nil:
		return fmt.Sprintf("waiting %s: %s", s.Waiting.Reason, s.Waiting.Message)
	case s.Terminated != nil:
		return fmt.Sprintf("terminated exit=%d %s: %s", s.Terminated.ExitCode, s.Terminated.Reason, s.Terminated.Message)
	}
	return "unknown"
}

func sanitize(s string) string { return nonDNS.ReplaceAllString(strings.ToLower(s), "_") }

// dumpOperatorAbout prints the operator's last n log lines that name namespace ns, read from a long
// tail: with scenarios in parallel, the operator's last lines are mostly about other namespaces.
func (f *Framework) dumpOperatorAbout(ctx context.Context, b *strings.Builder, ns string, n int) {
	var pods corev1.PodList
	if err := f.Client.List(ctx, &pods, client.InNamespace(f.OperatorNamespace)); err != nil {
		fmt.Fprintf(b, "listing operator pods: %v\n", err)
		return
	}
	tail := int64(20000)
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			raw, err := f.Clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
				Container: cs.Name, TailLines: &tail, Timestamps: true,
			}).DoRaw(ctx)
			if err != nil {
				fmt.Fprintf(b, "(%s/%s: %v)\n", p.Name, cs.Name, err)
				continue
			}
			lines := LinesAbout(string(raw), ns, n)
			fmt.Fprintf(b, "--- operator %s [%s]: its last %d lines about %s ---\n", p.Name, cs.Name, len(lines), ns)
			for _, l := range lines {
				b.WriteString(l)
				b.WriteByte('\n')
			}
		}
	}
}

// LinesAbout returns the last n lines of log that mention ns.
func LinesAbout(log, ns string, n int) []string {
	var out []string
	for l := range strings.Lines(log) {
		if strings.Contains(l, ns) {
			out = append(out, strings.TrimRight(l, "\n"))
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}
