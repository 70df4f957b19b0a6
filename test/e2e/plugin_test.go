//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/kubectletcd"
	"github.com/etcd-steward/steward/test/e2e/framework"
)

// TestPlugin drives `kubectl etcd` as a user would, as a separate binary against a settled
// 3-member TLS cluster: status (text, JSON, live), etcdctl through a port-forward, pause and resume
// seen in status, a defragmentation the operator runs, a leadership handoff, a backup when the
// environment has S3, and a support bundle that holds no Secret value.
func TestPlugin(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "plug", 3, "")
	p := newPluginCLI(t, ns)

	out := p.run(t, "status", "plug")
	for _, want := range []string{"3/3 ready, 3/3 updated", "Leader:", "Certificates:  CA expires"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	t.Logf("status:\n%s", out)
	s := p.status(t, "--etcd")
	if s.Leader != leader(t, ns, "plug") || len(s.Members) != 3 || len(s.Live) != 3 {
		t.Fatalf("status -o json: leader %q, %d members, %d live", s.Leader, len(s.Members), len(s.Live))
	}
	for _, l := range s.Live {
		if l.Error != "" || l.Term == 0 || l.Revision == 0 {
			t.Errorf("live %+v", l)
		}
	}

	t.Logf("status --etcd:\n%s", p.run(t, "status", "plug", "--etcd"))
	t.Logf("etcdctl -- endpoint status -w table:\n%s", p.run(t, "etcdctl", "plug", "--", "endpoint", "status", "-w", "table"))
	out = p.run(t, "etcdctl", "plug", "--all", "--", "endpoint", "status", "-w", "json")
	var eps []map[string]any
	if err := json.Unmarshal([]byte(out), &eps); err != nil || len(eps) != 3 {
		t.Fatalf("etcdctl endpoint status: %v\n%s", err, out)
	}
	if _, err := p.exec("etcdctl", "plug", "--", "get"); !strings.Contains(fmt.Sprint(err), "exit status") {
		t.Errorf("etcdctl's failure: %v, want its exit status passed on", err)
	}

	p.run(t, "pause", "plug")
	p.waitStatus(t, "Progressing reason Paused", func(s kubectletcd.Status) bool { return s.Paused && reason(s, "Progressing") == "Paused" })
	p.run(t, "resume", "plug")
	p.waitStatus(t, "Progressing no longer Paused", func(s kubectletcd.Status) bool { return !s.Paused && reason(s, "Progressing") != "Paused" })

	before := leader(t, ns, "plug")
	out = p.run(t, "move-leader", "plug")
	t.Logf("move-leader: %s", out)
	p.waitStatus(t, "another leader", func(s kubectletcd.Status) bool { return s.Leader != "" && s.Leader != before })

	start := time.Now()
	out = p.run(t, "defrag", "plug", "--timeout", "5m")
	t.Logf("defrag (%s):\n%s", time.Since(start).Round(time.Second), out)
	ec, err := get(context.Background(), ns, "plug")
	if err != nil {
		t.Fatal(err)
	}
	if ec.Spec.Maintenance != nil && ec.Spec.Maintenance.Defragmentation.Schedule != "" {
		t.Errorf("defrag touched the spec: schedule %q", ec.Spec.Maintenance.Defragmentation.Schedule)
	}
	for _, m := range ec.Status.Members {
		if d := m.Defragmentation; d == nil || d.Last == nil || d.Last.Trigger != stewardv1.DefragmentationRequested ||
			d.Last.Outcome != stewardv1.DefragmentationSucceeded || d.Last.Time.Time.Before(start.Add(-time.Minute)) {
			t.Errorf("%s: defragmentation %+v, want a requested one that succeeded just now", m.Name, m.Defragmentation)
		}
	}
	// The recorder sends Events asynchronously: the last one may trail the status that ended the wait.
	f.WaitFor(t, ns, "a Defragmented event per member", 30*time.Second, func(context.Context) (bool, error) {
		events := eventsWith(t, ns, "plug", "Defragmented")
		return len(events) == 3, fmt.Errorf("Defragmented events %q, want one per member", events)
	})
	// One member: only it is defragmented again. Its record changes; the others' stay as they
	// were (compared whole: status times have whole seconds, too coarse to tell the two runs apart).
	first := map[string]stewardv1.DefragmentationResult{}
	for _, m := range ec.Status.Members {
		if m.Defragmentation != nil && m.Defragmentation.Last != nil {
			first[m.Name] = *m.Defragmentation.Last
		}
	}
	one := time.Now()
	out = p.run(t, "defrag", "plug", "plug-1", "--timeout", "3m")
	t.Logf("defrag plug-1 (%s):\n%s", time.Since(one).Round(time.Second), out)
	ec, err = get(context.Background(), ns, "plug")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ec.Status.Members {
		again := m.Defragmentation != nil && m.Defragmentation.Last != nil && !equality.Semantic.DeepEqual(first[m.Name], *m.Defragmentation.Last)
		if again != (m.Name == "plug-1") {
			t.Errorf("%s defragmented again: %v (only plug-1 was asked); before %+v, now %+v", m.Name, again, first[m.Name], m.Defragmentation)
		}
	}

	if _, err := framework.S3ConfigFromEnv(); err == nil {
		dest, _ := s3Storage(t, ns)
		createObj(t, &stewardv1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plug-daily"},
			Spec: stewardv1.EtcdBackupScheduleSpec{Schedule: "@daily", Suspend: true,
				Template: stewardv1.EtcdBackupSpec{ClusterName: "plug", Destination: dest}}})
		out = p.run(t, "backup", "plug", "--name", "plug-now", "--wait", "--timeout", "4m")
		t.Logf("backup:\n%s", out)
		if b := backupDone(t, ns, "plug-now", time.Minute); b.Status.Phase != stewardv1.BackupSucceeded {
			t.Errorf("backup %s: %s", b.Status.Phase, b.Status.Message)
		} else {
			// The backup seeds a new cluster, which forms from it.
			out = p.run(t, "restore", "plug-now", "--into", "plug-copy")
			t.Logf("restore:\n%s", out)
			waitSettled(t, ns, "plug-copy", 3, 5*time.Minute)
		}
	} else {
		t.Logf("no S3 in the environment: backup not tried (%v)", err)
	}

	if out := p.run(t, "recover-quorum", "plug", "--dry-run"); !strings.Contains(out, "nothing to recover") {
		t.Errorf("recover-quorum --dry-run on a healthy cluster: %q", out)
	}
	if _, err := p.exec("recover-quorum", "plug"); err != nil {
		t.Errorf("recover-quorum on a healthy cluster: %v (want the same answer, nothing requested)", err)
	}
	if ec, _ := get(context.Background(), ns, "plug"); ec.Annotations[stewardv1.AnnotationRecoverQuorum] != "" {
		t.Errorf("recover-quorum requested a recovery of a healthy cluster")
	}

	bundle := filepath.Join(t.TempDir(), "report.tar.gz")
	out = p.run(t, "report", "plug", "-f", bundle, "--operator-namespace", f.OperatorNamespace,
		"--operator-deployment", f.OperatorDeployment)
	t.Logf("report: %s", out)
	checkBundle(t, ns, bundle)
}

func reason(s kubectletcd.Status, typ string) string {
	for _, c := range s.Conds {
		if c.Type == typ {
			return c.Reason
		}
	}
	return ""
}

// checkBundle opens the report and looks for the files a support engineer needs, and for every
// value of every Secret of the namespace, raw and base64: none may be there.
func checkBundle(t *testing.T, ns, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name], _ = io.ReadAll(tr)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	t.Logf("bundle files:\n%s", strings.Join(names, "\n"))
	want := []string{"plug-report/etcdcluster.yaml", "plug-report/status.txt", "plug-report/events.yaml", "plug-report/secrets.yaml",
		"plug-report/operator/deployment.yaml"}
	for _, m := range memberNames("plug", 3) {
		want = append(want, "plug-report/etcdmembers/"+m+".yaml", "plug-report/pods/"+m+".yaml", "plug-report/logs/"+m+"/etcd.log")
	}
	for _, w := range want {
		if _, ok := files[w]; !ok {
			t.Errorf("bundle lacks %s", w)
		}
	}
	operatorLogs := false
	for name := range files {
		operatorLogs = operatorLogs || strings.HasPrefix(name, "plug-report/operator/logs/")
	}
	if !operatorLogs {
		t.Error("bundle has no operator log")
	}
	if e, ok := files["plug-report/errors.txt"]; ok {
		t.Logf("bundle errors.txt:\n%s", e)
	}
	var secrets corev1.SecretList
	if err := f.Client.List(context.Background(), &secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, s := range secrets.Items {
		for k, v := range s.Data {
			if len(v) < 8 {
				continue // a short value ("true") would match by chance
			}
			checked++
			for name, content := range files {
				if bytes.Contains(content, v) || bytes.Contains(content, []byte(base64.StdEncoding.EncodeToString(v))) {
					t.Errorf("%s holds the value of Secret %s key %s", name, s.Name, k)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no Secret values to look for: the cluster's TLS Secrets should be there")
	}
}

// pluginCLI is the built plugin, run with the suite's kubeconfig in the test's namespace.
type pluginCLI struct {
	bin, etcdctl, ns string
}

func newPluginCLI(t *testing.T, ns string) *pluginCLI {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-etcd")
	build := exec.Command("go", "build", "-o", bin, "github.com/etcd-steward/steward/cmd/kubectl-etcd")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build kubectl-etcd: %v\n%s", err, out)
	}
	return &pluginCLI{bin: bin, etcdctl: etcdctlPath(t), ns: ns}
}

// etcdctlPath is the etcdctl on PATH, else the one hack/toolchain.sh built.
func etcdctlPath(t *testing.T) string {
	if p, err := exec.LookPath("etcdctl"); err == nil {
		return p
	}
	out, err := exec.Command("../../hack/toolchain.sh", "path", "etcdctl").Output()
	if err != nil {
		t.Fatalf("no etcdctl on PATH nor from hack/toolchain.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func (p *pluginCLI) exec(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	full := append([]string{"--kubeconfig", f.Kubeconfig, "-n", p.ns}, args...)
	if args[0] == "etcdctl" {
		full = append([]string{"--kubeconfig", f.Kubeconfig, "-n", p.ns, "etcdctl", "--etcdctl", p.etcdctl}, args[1:]...)
	}
	cmd := exec.CommandContext(ctx, p.bin, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl etcd %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func (p *pluginCLI) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := p.exec(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (p *pluginCLI) status(t *testing.T, extra ...string) kubectletcd.Status {
	t.Helper()
	var s kubectletcd.Status
	out := p.run(t, append([]string{"status", "plug", "-o", "json"}, extra...)...)
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	return s
}

func (p *pluginCLI) waitStatus(t *testing.T, what string, ok func(kubectletcd.Status) bool) {
	t.Helper()
	f.WaitFor(t, p.ns, "kubectl etcd status: "+what, 2*time.Minute, func(ctx context.Context) (bool, error) {
		out, err := p.exec("status", "plug", "-o", "json")
		if err != nil {
			return false, err
		}
		var s kubectletcd.Status
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			return false, err
		}
		return ok(s), fmt.Errorf("leader %q, paused %v, conditions %+v", s.Leader, s.Paused, s.Conds)
	})
}
