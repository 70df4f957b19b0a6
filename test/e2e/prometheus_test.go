//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/metrics"
	"github.com/etcd-steward/steward/internal/promconfig"
)

// TestPrometheus (issue 30): a real Prometheus, configured from the shipped ServiceMonitor, PodMonitor
// and PrometheusRule as the Prometheus Operator would configure it (internal/promconfig), scrapes the
// operator with a token and the members of a live cluster. Every dashboard panel's query returns
// series, and the alerts the suite can induce fire and then clear: a member down (quorum at risk),
// a stuck roll (an image that cannot be pulled, then corrected), NOSPACE (the quota filled; Steward
// recovers) and a failed backup (a bucket that does not exist, then the right one). The rules' `for`
// is cut to 0s and the stuck roll's 600 s to 15 s, as no CI run can wait them out; the expressions
// are the shipped ones.
func TestPrometheus(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "pm", 3, "", func(ec *stewardv1.EtcdCluster) {
		ec.Spec.Options.QuotaBackendBytes = ptr.To(resource.MustParse("16Mi"))
	})
	prom := startPrometheus(t, ns)
	prom.waitTargets(t, 4) // the operator and three members
	prom.assertQuiet(t)
	ctx := context.Background()

	// A failed backup first: its schedule takes a minute to come round.
	dest, _ := s3Storage(t, ns)
	bad := *dest.S3
	bad.Bucket = "no-such-bucket"
	createObj(t, &stewardv1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "every-minute"},
		Spec: stewardv1.EtcdBackupScheduleSpec{Schedule: "* * * * *",
			Template: stewardv1.EtcdBackupSpec{ClusterName: "pm", Destination: stewardv1.BackupStorage{S3: &bad}}}})

	// Quorum at risk: one member's etcd stopped (SIGSTOP) until the alert fires.
	pid := hostPID(t, "--name=pm-1", "."+ns+".svc")
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %d: %v", pid, err)
	}
	thaw := func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
	t.Cleanup(thaw)
	prom.waitAlert(t, "StewardEtcdQuorumAtRisk", true, time.Minute)
	thaw()
	prom.waitAlert(t, "StewardEtcdQuorumAtRisk", false, 2*time.Minute)

	// A stuck roll: an image nobody can pull; corrected, the roll goes on and finishes.
	update(t, ns, "pm", func(ec *stewardv1.EtcdCluster) { ec.Spec.Image = "localhost/steward-e2e/no-such-etcd:0" })
	prom.waitAlert(t, "StewardRolloutStuck", true, 2*time.Minute)
	update(t, ns, "pm", func(ec *stewardv1.EtcdCluster) { ec.Spec.Image = "" })
	waitSettled(t, ns, "pm", 3, 4*time.Minute)
	prom.waitAlert(t, "StewardRolloutStuck", false, time.Minute)

	// NOSPACE: raised by filling the quota, recovered by Steward (compact, defragment, disarm).
	fillUntilNoSpace(t, clientFor(t, ns, "pm"))
	prom.waitAlert(t, "StewardEtcdAlarm", true, 2*time.Minute)
	prom.waitAlert(t, "StewardEtcdAlarm", false, 4*time.Minute)

	// The backup: failed by now; pointed at the bucket that exists, the next one succeeds.
	prom.waitAlert(t, "StewardBackupNotReady", true, 3*time.Minute)
	// Retried on conflicts: the schedule's controller writes its status meanwhile.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var s stewardv1.EtcdBackupSchedule
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "every-minute"}, &s); err != nil {
			return err
		}
		s.Spec.Template.Destination = dest
		return f.Client.Update(ctx, &s)
	}); err != nil {
		t.Fatal(err)
	}
	prom.waitAlert(t, "StewardBackupNotReady", false, 3*time.Minute)

	// Every dashboard panel's query had series at some point of the run (the alarm's and the
	// backups' exist only while there is one).
	prom.checkDashboard(t, ns, "pm")
}

// prometheus is a Prometheus process of the test's, on the shipped monitors and rules.
type prometheus struct {
	api   promv1.API
	ns    string
	start time.Time
}

func startPrometheus(t *testing.T, ns string) *prometheus {
	t.Helper()
	bin := os.Getenv("STEWARD_E2E_PROMETHEUS")
	if bin == "" {
		t.Fatal("STEWARD_E2E_PROMETHEUS is not set: run the e2e through hack/e2e.sh (make e2e), which builds Prometheus")
	}
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte(newScraper(t, ns).token), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := promconfig.Write(dir, filepath.Join(filepath.Join("..", ".."), "config", "prometheus"), promconfig.Options{
		Kubeconfig: os.Getenv("KUBECONFIG"), TokenFile: token, Namespaces: []string{ns}, ScrapeInterval: "2s", EvaluationInterval: "1s",
	}, func(r map[string]any) {
		if r["for"] != nil {
			r["for"] = "0s"
		}
		if r["alert"] == "StewardRolloutStuck" {
			r["expr"] = strings.Replace(fmt.Sprint(r["expr"]), "> 600", "> 15", 1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	logf, err := os.Create(filepath.Join(f.Artifacts, "prometheus-"+ns+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logf.Close()
	})
	c, err := promapi.NewClient(promapi.Config{Address: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	return &prometheus{api: promv1.NewAPI(c), ns: ns, start: time.Now()}
}

// waitTargets waits until n targets are up.
func (p *prometheus) waitTargets(t *testing.T, n int) {
	t.Helper()
	start := time.Now()
	f.WaitFor(t, p.ns, fmt.Sprintf("%d Prometheus targets up", n), 2*time.Minute, func(ctx context.Context) (bool, error) {
		r, err := p.api.Targets(ctx)
		if err != nil {
			return false, err
		}
		var up, down []string
		for _, tg := range r.Active {
			name := string(tg.Labels["job"]) + " " + string(tg.Labels["pod"])
			if tg.Health == promv1.HealthGood {
				up = append(up, name)
			} else {
				down = append(down, fmt.Sprintf("%s (%s: %s)", name, tg.Health, tg.LastError))
			}
		}
		return len(up) >= n, fmt.Errorf("up %v; not up %v", up, down)
	})
	measure(t, fmt.Sprintf("Prometheus started to %d targets up", n), time.Since(start))
}

// waitAlert waits until the alert is firing for the test's namespace (firing true) or no longer is.
func (p *prometheus) waitAlert(t *testing.T, name string, firing bool, timeout time.Duration) {
	t.Helper()
	state := "firing"
	if !firing {
		state = "cleared"
	}
	start := time.Now()
	f.WaitFor(t, p.ns, name+" "+state, timeout, func(ctx context.Context) (bool, error) {
		r, err := p.api.Alerts(ctx)
		if err != nil {
			return false, err
		}
		var seen []string
		on := false
		for _, a := range r.Alerts {
			if string(a.Labels["namespace"]) != p.ns {
				continue
			}
			seen = append(seen, fmt.Sprintf("%s %s", a.Labels["alertname"], a.State))
			on = on || (string(a.Labels["alertname"]) == name && a.State == promv1.AlertStateFiring)
		}
		return on == firing, fmt.Errorf("alerts of the namespace: %v", seen)
	})
	measure(t, "Prometheus: "+name+" "+state, time.Since(start))
}

// assertQuiet: every rule evaluates without error, and a settled cluster fires no alert (with every
// rule's `for` at 0s, a rule that misread a healthy cluster would fire here). It waits until every
// rule was evaluated over scraped data.
func (p *prometheus) assertQuiet(t *testing.T) {
	t.Helper()
	targetsUp := time.Now()
	var rules []promv1.AlertingRule
	f.WaitFor(t, p.ns, "every rule evaluated over scraped data", 30*time.Second, func(ctx context.Context) (bool, error) {
		r, err := p.api.Rules(ctx, nil)
		if err != nil {
			return false, err
		}
		rules = nil
		var stale []string
		for _, g := range r.Groups {
			for _, rule := range g.Rules {
				if a, ok := rule.(promv1.AlertingRule); ok {
					rules = append(rules, a)
					if !a.LastEvaluation.After(targetsUp.Add(3 * time.Second)) {
						stale = append(stale, a.Name)
					}
				}
			}
		}
		return len(rules) > 0 && len(stale) == 0, fmt.Errorf("%d alerting rules, not evaluated since the targets were up: %v", len(rules), stale)
	})
	for _, a := range rules {
		if a.Health != promv1.RuleHealthGood || a.LastError != "" {
			t.Errorf("rule %s evaluates with health %s: %s", a.Name, a.Health, a.LastError)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := p.api.Alerts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range r.Alerts {
		if string(a.Labels["namespace"]) == p.ns {
			t.Errorf("alert %s is %s for a settled cluster: %v", a.Labels["alertname"], a.State, a.Annotations["summary"])
		}
	}
}

// checkDashboard runs every panel query of the shipped dashboard over the test's time so far: each
// returns series.
func (p *prometheus) checkDashboard(t *testing.T, ns, cluster string) {
	t.Helper()
	d, err := metrics.ReadDashboard(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	// Retried for a while: the last change (the first successful backup) reaches a scrape a few
	// seconds after status shows it.
	queries := 0
	f.WaitFor(t, ns, "every dashboard query with series", time.Minute, func(ctx context.Context) (bool, error) {
		// A step of 1 s, half the scrape interval: a series that lived for one scrape (the NOSPACE
		// alarm can be gone 2 s after it was raised) is ended by its staleness marker at the next
		// scrape, and a coarser step can fall on either side of it.
		r := promv1.Range{Start: p.start, End: time.Now(), Step: time.Second}
		var empty []string
		queries = 0
		for _, panel := range d.Panels {
			for _, tg := range panel.Targets {
				q := strings.NewReplacer("$namespace", ns, "$cluster", cluster).Replace(tg.Expr)
				v, _, err := p.api.QueryRange(ctx, q, r)
				if err != nil {
					return false, fmt.Errorf("panel %q: %s: %w", panel.Title, q, err)
				}
				queries++
				if m, _ := v.(model.Matrix); len(m) == 0 {
					empty = append(empty, fmt.Sprintf("panel %q: %s", panel.Title, q))
				}
			}
		}
		return len(empty) == 0, fmt.Errorf("no series over the run: %s", strings.Join(empty, "; "))
	})
	t.Logf("MEASURE dashboard: %d panels, %d queries, each with series", len(d.Panels), queries)
}
