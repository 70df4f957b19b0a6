//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupjob"
	"github.com/etcd-steward/steward/internal/encryption"
	"github.com/etcd-steward/steward/test/e2e/framework"
)

func ageIdentity(t *testing.T) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// keySecret writes the Secret name (keys.txt: the identities, the first sealing), as a user does
// with `kubectl create secret generic NAME --from-file=keys.txt`.
func keySecret(t *testing.T, ns, name string, ids ...*age.X25519Identity) {
	t.Helper()
	var text strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&text, "# public key: %s\n%s\n", id.Recipient(), id)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"keys.txt": []byte(text.String())}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.Client.Update(ctx, sec); err != nil {
		if err := f.Client.Create(ctx, sec); err != nil {
			t.Fatal(err)
		}
	}
}

// waitKeyID waits for the schedule's streamer to report sealing under keyID.
func waitKeyID(t *testing.T, ns, schedule, keyID string) {
	t.Helper()
	f.WaitFor(t, ns, "the streamer on key "+keyID, time.Minute, func(ctx context.Context) (bool, error) {
		var s stewardv1.EtcdBackupSchedule
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: schedule}, &s); err != nil {
			return false, err
		}
		if s.Status.Continuous == nil {
			return false, fmt.Errorf("no status.continuous")
		}
		return s.Status.Continuous.KeyID == keyID, fmt.Errorf("key %q", s.Status.Continuous.KeyID)
	})
}

// checkSealed reads every object under prefix raw: each but the manifests is age's and shows no
// key of the keyspace (plain, a segment holds its keys in the clear).
func checkSealed(t *testing.T, s3 *framework.S3, prefix, keyspace string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	objs, err := s3.List(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	sealed := 0
	for _, o := range objs {
		if strings.HasSuffix(o.Key, "/manifest.json") {
			continue
		}
		b, err := s3.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		if !encryption.Sealed(b) || bytes.Contains(b, []byte(keyspace)) {
			t.Errorf("%s is not sealed: %q", o.Key, b[:min(len(b), 40)])
		}
		sealed++
	}
	t.Logf("%d objects under %s read raw: all sealed", sealed, prefix)
	if sealed < 2 {
		t.Errorf("only %d objects under %s", sealed, prefix)
	}
}

// cutStreamerFromStore drops the schedule's streamer's packets to the object store (heal ends it):
// the store down, as the streamer sees it, while the rest of the suite keeps its store.
func cutStreamerFromStore(t *testing.T, ns, schedule string, s3 *framework.S3) *cut {
	t.Helper()
	u, err := url.Parse(s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := f.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{backupjob.LabelStream: schedule}); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		pids, err := containerPIDs(p, "stream")
		if err != nil {
			t.Fatal(err)
		}
		c := &cut{pid: pids[0], rules: [][]string{{"OUTPUT", "-d", u.Hostname(), "-j", "DROP"}}}
		if err := c.apply(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.heal)
		t.Logf("streamer %s cut from the store at %s", p.Name, u.Hostname())
		return c
	}
	t.Fatal("no running streamer Pod to cut from the store")
	return nil
}

// waitDrill waits for the schedule's chain drill to pass.
func waitDrill(t *testing.T, ns, schedule string, timeout time.Duration) stewardv1.ChainDrill {
	t.Helper()
	var d stewardv1.ChainDrill
	f.WaitFor(t, ns, "the chain drill", timeout, func(ctx context.Context) (bool, error) {
		var s stewardv1.EtcdBackupSchedule
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: schedule}, &s); err != nil {
			return false, err
		}
		if s.Status.Continuous == nil || s.Status.Continuous.LastDrill == nil {
			return false, fmt.Errorf("no drill yet")
		}
		d = *s.Status.Continuous.LastDrill
		if !d.Verified {
			t.Fatalf("the chain drill failed: %+v", d)
		}
		return true, nil
	})
	return d
}

// streamerFigures logs the running streamer's CPU time and memory, read from /proc on the host
// (the local cluster's containers are host processes): what streaming costs at the suite's traffic.
func streamerFigures(t *testing.T, ns, schedule string, writesPerSecond float64) {
	t.Helper()
	var pods corev1.PodList
	if err := f.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{backupjob.LabelStream: schedule}); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || len(p.Status.ContainerStatuses) == 0 ||
			p.Status.ContainerStatuses[0].State.Running == nil {
			continue
		}
		pid, err := processNamed(p, "stream", "steward")
		if err != nil {
			t.Logf("streamer figures: %v", err)
			return
		}
		stat, err1 := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		status, err2 := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err1 != nil || err2 != nil {
			t.Logf("streamer figures: %v %v", err1, err2)
			return
		}
		// Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		utime, _ := strconv.ParseFloat(fields[11], 64)
		stime, _ := strconv.ParseFloat(fields[12], 64)
		cpu := (utime + stime) / 100 // USER_HZ
		up := time.Since(p.Status.ContainerStatuses[0].State.Running.StartedAt.Time).Seconds()
		mem := map[string]string{}
		for _, line := range strings.Split(string(status), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && (k == "VmRSS" || k == "VmHWM") {
				mem[k] = strings.TrimSpace(v)
			}
		}
		t.Logf("MEASURE streamer: %.1f CPU-seconds in %.0fs up (%.0f millicores) at about %.0f writes/s; RSS %s, peak %s",
			cpu, up, 1000*cpu/up, writesPerSecond, mem["VmRSS"], mem["VmHWM"])
		return
	}
	t.Log("streamer figures: no running streamer Pod")
}
