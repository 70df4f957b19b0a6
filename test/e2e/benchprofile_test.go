//go:build e2e && bench

package e2e

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
)

const pprofPort = "8082"

// benchOperator restarts the suite's operator with --pprof-bind-address (off by default) so
// the benchmark can say where its memory goes, and with BENCH_GOGC in its environment when that is
// set (the operator's garbage collection against its default); the cleanup restarts it without.
func benchOperator(t *testing.T) {
	t.Helper()
	flag := "--pprof-bind-address=:" + pprofPort
	gogc := os.Getenv("BENCH_GOGC")
	ready := func(c corev1.Container) bool {
		return slices.Contains(c.Args, flag) && (gogc == "" || slices.Contains(c.Env, corev1.EnvVar{Name: "GOGC", Value: gogc}))
	}
	changeOperator(t, "the operator to serve pprof", func(c *corev1.Container) {
		if !slices.Contains(c.Args, flag) {
			c.Args = append(c.Args, flag)
		}
		if gogc != "" {
			c.Env = append(slices.DeleteFunc(c.Env, isGOGC), corev1.EnvVar{Name: "GOGC", Value: gogc})
		}
	}, ready)
	t.Cleanup(func() {
		changeOperator(t, "the operator without pprof", func(c *corev1.Container) {
			c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return a == flag })
			c.Env = slices.DeleteFunc(c.Env, isGOGC)
		}, func(c corev1.Container) bool {
			return !slices.Contains(c.Args, flag) && !slices.ContainsFunc(c.Env, isGOGC)
		})
	})
}

func isGOGC(e corev1.EnvVar) bool { return e.Name == "GOGC" }

// saveHeapProfile writes the operator's heap profile to <artifacts>/name and logs its top entries
// by bytes in use (go tool pprof, when go is on PATH).
func saveHeapProfile(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pod, err := operatorPod(ctx)
	if err != nil {
		t.Error(err)
		return
	}
	url := fmt.Sprintf("http://%s/debug/pprof/heap?gc=1", net.JoinHostPort(pod.Status.PodIP, pprofPort))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("heap profile: %v", err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("heap profile: %s, %v", resp.Status, err)
		return
	}
	path := filepath.Join(f.Artifacts, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Error(err)
		return
	}
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=25", "-sample_index=inuse_space", path).CombinedOutput()
	t.Logf("BENCH heap profile %s (%v):\n%s", path, err, out)
}

// memoryBreakdown: where the operator's resident memory goes, as the Go runtime counts it (heap
// objects allocated and not yet freed; heap spans held but idle and not returned to the OS; stacks;
// the runtime's own structures; the next GC's target).
func memoryBreakdown(fams map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, name := range []string{"go_memstats_alloc_bytes", "go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes",
		"go_memstats_heap_released_bytes", "go_memstats_stack_inuse_bytes", "go_memstats_sys_bytes", "go_memstats_next_gc_bytes",
		"go_memstats_mspan_inuse_bytes", "go_memstats_gc_sys_bytes", "go_memstats_other_sys_bytes", "go_goroutines",
		"go_gc_gogc_percent", "go_gc_gomemlimit_bytes", "process_resident_memory_bytes"} {
		out[name] = sum(fams, name, nil)
	}
	// The kernel's split of the resident set: file-backed pages are the binary's own (text and
	// read-only data, shared, dropped under pressure); anonymous ones are the heap, stacks and
	// the runtime's.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if pid, err := operatorPID(ctx); err == nil {
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for _, line := range strings.Split(string(status), "\n") {
			k, v, _ := strings.Cut(line, ":")
			if k == "RssAnon" || k == "RssFile" {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				out["proc_"+strings.ToLower(k)+"_bytes"] = kb * 1024
			}
		}
		maps.Copy(out, containerMemory(pid))
	}
	return out
}

// operatorPID: the host PID of the operator's process (the nodes share this machine's PID space).
func operatorPID(ctx context.Context) (int, error) {
	pod, err := operatorPod(ctx)
	if err != nil {
		return 0, err
	}
	return processNamed(pod, "manager", "steward")
}

// containerMemory: the memory cgroup of process pid (cgroup v1, as on this machine) counted as the
// kubelet, its eviction and `kubectl top` count a container's. The working set is the usage less
// the page cache the kernel drops first (inactive files). A page is charged to the cgroup that
// first brought it into the cache, so the binary's pages, cached when the node's containerd
// unpacked the image, are in the process's RSS and not in its container's usage: on any node
// that unpacks images, not only here.
func containerMemory(pid int) map[string]float64 {
	out := map[string]float64{}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return out
	}
	var dir string
	for _, line := range strings.Split(string(raw), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && parts[1] == "memory" { // "4:memory:/localkube/node-1/kubepods/…"
			dir = filepath.Join("/sys/fs/cgroup/memory", parts[2])
		}
	}
	if dir == "" {
		return out
	}
	usage, err := os.ReadFile(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		return out
	}
	stat, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return out
	}
	fields := map[string]float64{}
	for _, line := range strings.Split(string(stat), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			fields[k], _ = strconv.ParseFloat(v, 64)
		}
	}
	u, _ := strconv.ParseFloat(strings.TrimSpace(string(usage)), 64)
	out["cgroup_usage_bytes"] = u
	out["cgroup_working_set_bytes"] = max(u-fields["total_inactive_file"], 0)
	out["cgroup_rss_bytes"] = fields["total_rss"]
	out["cgroup_mapped_file_bytes"] = fields["total_mapped_file"]
	return out
}

// workingSetSampler reads the operator container's working set every second until stopped: one
// reading at the window's end catches the heap anywhere between its live size and the next
// collection's target, so a single figure moved by a few MiB from run to run (issue 30's slope).
type workingSetSampler struct {
	stop chan struct{}
	done chan struct{}
	got  []float64
}

func sampleWorkingSet(t *testing.T) *workingSetSampler {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := &workingSetSampler{stop: make(chan struct{}), done: make(chan struct{})}
	pid, err := operatorPID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if ws, ok := containerMemory(pid)["cgroup_working_set_bytes"]; ok {
				s.got = append(s.got, ws)
			}
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// result stops the sampling and returns the peak and the mean working set, and how many readings.
func (s *workingSetSampler) result() (peak, mean float64, n int) {
	close(s.stop)
	<-s.done
	for _, v := range s.got {
		peak = max(peak, v)
		mean += v
	}
	if len(s.got) > 0 {
		mean /= float64(len(s.got))
	}
	return peak, mean, len(s.got)
}
