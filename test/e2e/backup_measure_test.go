//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/backupjob"
	"github.com/etcd-steward/steward/test/e2e/framework"
)

// TestBackupMeasure is the figure run: a 256 MiB database (STEWARD_E2E_BACKUP_MIB=1024 for
// the 1 GiB benchmark outside CI) under client traffic, backed up and restored. It reports backup time and throughput, the backup process's and the operator's
// peak RSS, client latency during the backup against the same traffic without one, and the time
// from creating the restored cluster to Available. Figures are logged (MEASURE), not asserted.
//
// It writes, uploads and restores hundreds of MiB, which on CI's 2 shared cores starves the other
// scenarios' etcd disks: it runs as a benchmark (make bench-backup), not in make e2e.
func TestBackupMeasure(t *testing.T) {
	if os.Getenv("STEWARD_E2E_BENCH") == "" {
		t.Skip("a benchmark: run it with make bench-backup (STEWARD_E2E_BENCH=1)")
	}
	t.Parallel()
	mib := 256
	if v, err := strconv.Atoi(os.Getenv("STEWARD_E2E_BACKUP_MIB")); err == nil && v > 0 {
		mib = v
	}
	size := resource.MustParse(fmt.Sprintf("%dMi", 2*mib+512))
	ns := settledCluster(t, "big", 1, "", func(ec *stewardv1.EtcdCluster) { ec.Spec.Storage.Size = &size })
	dest, _ := s3Storage(t, ns)
	cl := clientFor(t, ns, "big")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	for i := range mib {
		// Random values: zstd cannot shrink them, so the figures are those of a real database.
		raw := make([]byte, 3<<18)
		_, _ = rand.Read(raw)
		if _, err := cl.Put(ctx, fmt.Sprintf("/big/%04d", i), base64.StdEncoding.EncodeToString(raw)); err != nil {
			t.Fatal(err)
		}
	}
	measure(t, fmt.Sprintf("writing a %d MiB database (%d × 1 MiB)", mib, mib), time.Since(start))

	tr := framework.StartTraffic(cl, framework.TrafficConfig{Prefix: "/traffic/", Workers: 4})
	time.Sleep(15 * time.Second)
	quietEnd := time.Now()
	opBefore := processRSS("/steward --leader-elect")

	createObj(t, newBackup(ns, "large", "big", dest))
	var peak sync.Map
	stop := make(chan struct{})
	go func() { // the backup process's RSS, sampled from the host while it runs
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if rss := processRSS("steward snapshot save"); rss.current > 0 {
				if old, ok := peak.Load("save"); !ok || rss.current > old.(int64) {
					peak.Store("save", rss.current)
				}
			}
		}
	}()
	started := time.Now()
	b := backupDone(t, ns, "large", 10*time.Minute)
	took := time.Since(started)
	close(stop)
	backupEnd := time.Now()
	time.Sleep(time.Second)
	h := tr.Stop()
	if b.Status.Phase != stewardv1.BackupSucceeded {
		t.Fatalf("backup %s: %s", b.Status.Phase, b.Status.Message)
	}
	streamed := b.Status.CompletionTime.Sub(b.Status.StartTime.Time)
	measure(t, fmt.Sprintf("backup of a %d MiB database, EtcdBackup created → Succeeded", mib), took)
	t.Logf("MEASURE backup stored %d bytes (zstd) in %.1fs from start to completion (Job Pod start included): %.1f MiB/s of database",
		b.Status.Size, streamed.Seconds(), float64(mib)/streamed.Seconds())
	if v, ok := peak.Load("save"); ok {
		t.Logf("MEASURE backup process peak RSS: %.1f MiB", float64(v.(int64))/(1<<20))
	}
	opAfter := processRSS("/steward --leader-elect")
	t.Logf("MEASURE operator RSS before / after the backup: %.1f / %.1f MiB (peak since start %.1f MiB)",
		float64(opBefore.current)/(1<<20), float64(opAfter.current)/(1<<20), float64(opAfter.peak)/(1<<20))
	quiet, during := split(h, quietEnd)
	during, _ = split(during, backupEnd)
	for label, part := range map[string]framework.History{"without a backup": quiet, "during the backup": during} {
		lat := part.Latencies(framework.OpPut, framework.OpGet)
		if len(lat) == 0 {
			continue
		}
		t.Logf("MEASURE client latency %s: p99 %s, max %s over %d requests, %d failed", label,
			framework.Percentile(lat, 99).Round(time.Millisecond), framework.Percentile(lat, 100).Round(time.Millisecond),
			len(lat), len(part.Failed()))
	}

	// The target is for a quiet cluster: the same database again with no client traffic.
	createObj(t, newBackup(ns, "quiet", "big", dest))
	started = time.Now()
	b = backupDone(t, ns, "quiet", 10*time.Minute)
	took = time.Since(started)
	if b.Status.Phase != stewardv1.BackupSucceeded {
		t.Fatalf("quiet backup %s: %s", b.Status.Phase, b.Status.Message)
	}
	measure(t, fmt.Sprintf("backup of a %d MiB database with no client traffic, EtcdBackup created → Succeeded", mib), took)
	t.Logf("MEASURE quiet backup: %.1f MiB/s of database; created → Job started %.1fs, Job started → completed %.1fs (%.1f MiB/s), completed → observed %.1fs",
		float64(mib)/took.Seconds(), b.Status.StartTime.Sub(b.CreationTimestamp.Time).Seconds(),
		b.Status.CompletionTime.Sub(b.Status.StartTime.Time).Seconds(),
		float64(mib)/b.Status.CompletionTime.Sub(b.Status.StartTime.Time).Seconds(),
		started.Add(took).Sub(b.Status.CompletionTime.Time).Seconds())
	logSaveBreakdown(t, ns, "quiet")

	// Restored into 3 members, the restore target; the volumes as large as the source's.
	took = restoredCluster(t, ns, "big-restored", 3, &stewardv1.RestoreSpec{BackupName: "quiet"},
		func(ec *stewardv1.EtcdCluster) { ec.Spec.Storage.Size = &size })
	measure(t, fmt.Sprintf("restore of the %d MiB backup, EtcdCluster created → settled (3 members)", mib), took)
}

// logSaveBreakdown prints the backup Job's own account of where its time went (snapshot.Save's
// "took:" line).
func logSaveBreakdown(t *testing.T, ns, backup string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := f.Kubectl(ctx, "logs", "-n", ns, "job/"+backupjob.JobName(backup, backupjob.TaskSave))
	if err != nil {
		t.Logf("no log of the backup Job: %v", err)
		return
	}
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, "took:") {
			t.Logf("MEASURE backup %s, the Job's account: %s", backup, strings.TrimSpace(line))
		}
	}
}

type rss struct{ current, peak int64 }

// processRSS reads VmRSS and VmHWM of the first host process whose command line contains match
// (Pods' processes are visible from the host, which runs the local Kubernetes).
func processRSS(match string) rss {
	out, err := exec.Command("pgrep", "-f", match).Output()
	if err != nil {
		return rss{}
	}
	pid := strings.Fields(string(out))
	if len(pid) == 0 {
		return rss{}
	}
	f, err := os.Open("/proc/" + pid[0] + "/status")
	if err != nil {
		return rss{}
	}
	defer func() { _ = f.Close() }()
	var r rss
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			r.current = kb << 10
		case "VmHWM:":
			r.peak = kb << 10
		}
	}
	return r
}
