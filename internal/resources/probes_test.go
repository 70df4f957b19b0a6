package resources

import (
	"context"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/etcdtest"
)

// probePaths are the HTTP paths of a member Pod's readiness, liveness and startup probes.
func probePaths(t *testing.T, p *corev1.Pod) (ready, live, startup string) {
	t.Helper()
	c := p.Spec.Containers[0]
	for _, pr := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
		if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Port.IntVal != MetricsPort {
			t.Fatalf("probe %+v is not an HTTP GET on the metrics port", pr)
		}
	}
	return c.ReadinessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path, c.StartupProbe.HTTPGet.Path
}

// An alarm is a cluster-wide fact, not a broken member: a probe that fails on NOSPACE makes the
// kubelet restart every member of a full cluster and empties the client Service, so nobody can
// compact, defragment and disarm. etcd 3.6 has /livez (no alarm check) and /readyz (only CORRUPT);
// 3.5's /livez and /readyz arrived in a late patch, so 3.5 keeps /health with alarms excluded.
func TestProbesPerVersion(t *testing.T) {
	for _, tc := range []struct{ version, ready, live string }{
		{"3.5.0", "/health?exclude=CORRUPT&exclude=NOSPACE&serializable=true", "/health?exclude=CORRUPT&exclude=NOSPACE&serializable=true"},
		{"3.5.35", "/health?exclude=CORRUPT&exclude=NOSPACE&serializable=true", "/health?exclude=CORRUPT&exclude=NOSPACE&serializable=true"},
		{"3.6.16", "/readyz?exclude=linearizable_read&exclude=non_learner&exclude=data_corruption", "/livez"},
		{"3.7.3", "/readyz?exclude=linearizable_read&exclude=non_learner&exclude=data_corruption", "/livez"},
		{"custom-build", "/readyz?exclude=linearizable_read&exclude=non_learner&exclude=data_corruption", "/livez"},
	} {
		ec := cluster(func(c *stewardv1.EtcdCluster) { c.Spec.Version = tc.version })
		ready, live, startup := probePaths(t, Pod(member(ec), "repo"))
		if ready != tc.ready || live != tc.live || startup != tc.live {
			t.Errorf("%s: readiness %s, liveness %s, startup %s; want %s, %s, %s", tc.version, ready, live, startup,
				tc.ready, tc.live, tc.live)
		}
	}
}

// The same probes against a real etcd with a NOSPACE or a CORRUPT alarm raised: both must answer
// 200, and etcd's plain /health must not (or the alarm was never active and the test proves
// nothing). A CORRUPT alarm made every member unready, and Steward could not replace the one it named.
func TestProbesAnswerUnderNOSPACE(t *testing.T) {
	for _, alarm := range []string{"NOSPACE", "CORRUPT"} {
		t.Run(alarm, func(t *testing.T) { probesAnswerUnder(t, alarm) })
	}
}

func probesAnswerUnder(t *testing.T, alarm string) {
	cl := etcdtest.Start(t, 1)
	m := cl.Members[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	version := cl.RaiseAlarm(ctx, m, alarm)
	ec := cluster(func(c *stewardv1.EtcdCluster) { c.Spec.Version = version })
	ready, live, _ := probePaths(t, Pod(member(ec), "repo"))
	if code := get(t, m.Metrics+"/health?serializable=true"); code == http.StatusOK {
		t.Fatalf("etcd %s answers /health with 200 although %s is raised", version, alarm)
	}
	for name, path := range map[string]string{"readiness": ready, "liveness": live} {
		if code := get(t, m.Metrics+path); code != http.StatusOK {
			t.Errorf("etcd %s: %s probe %s answered %d under %s", version, name, path, code, alarm)
		}
	}
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url) //nolint:gosec // a loopback URL the test built
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// A restarted member rejoins the client Service within a second of serving (a 5 s period cost up to
// 10 s per member: startup, then readiness, each waiting out a period), while a slow start keeps
// its 5-minute budget and a blip never has the kubelet restart etcd.
func TestProbeTiming(t *testing.T) {
	c := Pod(member(cluster(func(*stewardv1.EtcdCluster) {})), "repo").Spec.Containers[0]
	budget := func(p *corev1.Probe) time.Duration {
		return time.Duration(p.PeriodSeconds*p.FailureThreshold) * time.Second
	}
	if c.ReadinessProbe.PeriodSeconds > 1 || c.StartupProbe.PeriodSeconds > 1 {
		t.Errorf("readiness every %ds, startup every %ds: want 1 s", c.ReadinessProbe.PeriodSeconds, c.StartupProbe.PeriodSeconds)
	}
	if b := budget(c.StartupProbe); b < 5*time.Minute {
		t.Errorf("startup budget %v, want at least 5m (WAL replay)", b)
	}
	if b := budget(c.LivenessProbe); b < 40*time.Second {
		t.Errorf("liveness budget %v, want at least 40s", b)
	}
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
		if p.TimeoutSeconds < 1 || p.TimeoutSeconds > 3 {
			t.Errorf("probe timeout %ds", p.TimeoutSeconds)
		}
	}
}

// A patch release or a registry move restarts the container in place; a step that changes flags or
// probes (3.5 to 3.6) rebuilds the Pod.
func TestImageOnly(t *testing.T) {
	ec := cluster(func(c *stewardv1.EtcdCluster) { c.Spec.Version = "3.6.16" })
	m := member(ec)
	from := ec.Spec.MemberTemplate.DeepCopy()
	edit := func(f func(*stewardv1.MemberTemplate)) *stewardv1.MemberTemplate {
		to := from.DeepCopy()
		f(to)
		return to
	}
	for _, tc := range []struct {
		name string
		to   *stewardv1.MemberTemplate
		want bool
	}{
		{"patch release", edit(func(t *stewardv1.MemberTemplate) { t.Version = "3.6.17" }), true},
		{"another registry", edit(func(t *stewardv1.MemberTemplate) { t.Image = "mirror.local/etcd:v3.6.16" }), true},
		{"nothing changes", from, false},
		{"a minor step back to 3.5 flags and probes", edit(func(t *stewardv1.MemberTemplate) { t.Version = "3.5.35" }), false},
		{"image and an option", edit(func(t *stewardv1.MemberTemplate) {
			t.Version = "3.6.17"
			t.Options.LogLevel = "debug"
		}), false},
	} {
		if got := ImageOnly(m, from, tc.to, "repo/etcd"); got != tc.want {
			t.Errorf("%s: ImageOnly = %v, want %v", tc.name, got, tc.want)
		}
	}
}
