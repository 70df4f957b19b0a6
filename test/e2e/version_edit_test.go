//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/datacheck"
)

// TestVersionEditedAtEachTurn (issue 23, finding 8): a 3-member cluster rolling 3.5 → 3.6 is
// edited to 3.7 the moment the k-th member is disrupted for the first roll, for k = 1, 2, 3 (the
// last is the leader). No member's etcd may ever start 3.7 on data 3.5 wrote: such a start exits
// (the data check's VersionRefused, or etcd's own refusal) and the member crash-loops. The roll
// ends on 3.7 for every member, through 3.6, with never two members unavailable.
func TestVersionEditedAtEachTurn(t *testing.T) {
	t.Parallel()
	from, mid, to := versionOf(t, "3.5"), versionOf(t, "3.6"), versionOf(t, "3.7")
	for turn := 1; turn <= 3; turn++ {
		t.Run(fmt.Sprintf("turn-%d", turn), func(t *testing.T) {
			t.Parallel()
			// etcd 3.7 cannot replay the v2 entries etcd 3.5 wrote into the WAL until a snapshot taken
			// on 3.6 covers them (the data check refuses it until then; issue filed for Steward to
			// take that snapshot itself). A snapshot every 100 entries makes one follow the roll to
			// 3.6 within seconds of the test's traffic, as 10,000 writes would with the default.
			ns := settledCluster(t, "web", 3, "", func(ec *stewardv1.EtcdCluster) {
				ec.Spec.Version = from
				ec.Spec.Options.SnapshotCount = ptr.To[int64](100)
			})
			data := putData(t, clientFor(t, ns, "web"), "/edit/", 30)
			w := watchRoll(t, ns, "web", 3)
			bad := watchTerminations(t, ns, "web")
			w.change(func(ec *stewardv1.EtcdCluster) { ec.Spec.Version = mid })
			waitDisrupted(t, ns, "web", turn)
			edited := time.Now()
			update(t, ns, "web", func(ec *stewardv1.EtcdCluster) { ec.Spec.Version = to })
			waitSettled(t, ns, "web", 3, 8*time.Minute)
			t.Logf("MEASURE version edited to %s at turn %d: edit to settled %.1fs", to, turn, time.Since(edited).Seconds())
			w.finish(fmt.Sprintf("version %s -> %s -> %s, edited at turn %d", from, mid, to, turn), 1)
			checkData(t, clientFor(t, ns, "web"), "/edit/", data)
			ec, _ := get(context.Background(), ns, "web")
			for _, m := range ec.Status.Members {
				if m.Version != to {
					t.Errorf("member %s reports %s, want %s", m.Name, m.Version, to)
				}
			}
			for _, b := range bad() {
				t.Errorf("an etcd container ended in error: %s", b)
			}
		})
	}
}

// waitDisrupted returns once the operator has disrupted n members (a Pod deleted or a container
// restarted), polling its events: the next edit lands while the n-th is being rebuilt.
func waitDisrupted(t *testing.T, ns, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for time.Now().Before(deadline) {
		if got := len(eventsWith(t, ns, name, "DeletePod")) + len(eventsWith(t, ns, name, "RestartContainer")); got >= n {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the operator did not disrupt %d members in 4 minutes", n)
}

// watchTerminations records every etcd container of the cluster that ended in error (a non-zero
// exit other than the stop signal of a restart): what a start on data it cannot run looks like.
func watchTerminations(t *testing.T, ns, name string) func() []string {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]string{}
	stop := make(chan struct{})
	done := make(chan struct{})
	scan := func() {
		// Not memberPods: this runs off the test's goroutine, where t.Fatal may not be called.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pods, err := f.Pods(ctx, ns, map[string]string{stewardv1.LabelCluster: name})
		if err != nil {
			return
		}
		for _, p := range pods {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Name != "etcd" {
					continue
				}
				for _, term := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
					// Only what a start on refused data ends with: the data check's verdict (its
					// exit code, its message) or etcd's own fatal exit (1). A container the kubelet
					// stopped for an in-place restart ends otherwise (143, and exit 2 was seen too).
					refused := term != nil && (term.ExitCode == datacheck.ExitVersionRefused || term.ExitCode == 1 ||
						strings.HasPrefix(term.Message, datacheck.MessagePrefix))
					if !refused {
						continue
					}
					key := fmt.Sprintf("%s/%s/%d", p.Name, term.ContainerID, term.ExitCode)
					msg := strings.TrimPrefix(term.Message, datacheck.MessagePrefix)
					mu.Lock()
					seen[key] = fmt.Sprintf("%s (image %s): exit %d %s %s", p.Name, cs.Image, term.ExitCode, term.Reason, msg)
					mu.Unlock()
				}
			}
		}
	}
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
				scan()
			}
		}
	}()
	halt := sync.OnceFunc(func() { close(stop); <-done })
	t.Cleanup(halt)
	return func() []string {
		halt()
		scan()
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, s := range seen {
			out = append(out, s)
		}
		return out
	}
}
