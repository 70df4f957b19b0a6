package resources

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The probes answer one question each, and none of them is "is an alarm raised". An alarm is a
// cluster-wide, replicated fact: NOSPACE is raised on every member at once when the quota fills, and
// a probe that failed on it would have the kubelet restart every member in a loop and empty the
// client Service, so nobody could compact, defragment and disarm. Restarting fixes no alarm.
//
//   - liveness (and startup): the process serves a local read. No quorum needed (losing quorum does
//     not break a member, and restarting it would not bring quorum back), no alarm judged.
//   - readiness: the same. CORRUPT is excluded too, against etcd's own /readyz rule: that alarm is
//     replicated like NOSPACE, so it took every member out of the client Service at once, and the
//     planner (which counts only Ready members as available) could not replace the one member the
//     alarm named. etcd refuses reads and writes under CORRUPT itself, so a Ready member serves no
//     wrong data. No quorum needed, and learners pass: readiness also tells the planner the process
//     runs; the client Service selects voters only.
//
// The recovery gate, not the probes, judges alarms (internal/health), so a cluster with one rolls
// nothing until the user disarmed it.
func livenessPath(version string) string {
	if upTo35(version) {
		// /livez reached 3.5 only in a late patch; /health judges alarms unless each is excluded.
		return "/health?exclude=CORRUPT&exclude=NOSPACE&serializable=true"
	}
	return "/livez"
}

func readinessPath(version string) string {
	if upTo35(version) {
		return "/health?exclude=CORRUPT&exclude=NOSPACE&serializable=true"
	}
	// /readyz also checks a linearizable read (needs quorum), fails on learners and on CORRUPT.
	return "/readyz?exclude=linearizable_read&exclude=non_learner&exclude=data_corruption"
}

// probe checks path every period seconds. Startup and readiness look every second: a restarted
// member is back in the client Service, and the roll moves on, within a second of serving, where a
// 5 s period cost up to 10 s per member (a startup probe and then a readiness probe each waiting
// out a period). The startup budget stays 5 minutes (a large WAL replays slowly). Liveness keeps a
// slow period: restarting etcd is the one thing it can do, and never on a blip.
func probe(path string, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromInt32(MetricsPort),
		}},
		PeriodSeconds:    period,
		TimeoutSeconds:   min(period*2, 3),
		FailureThreshold: failures,
	}
}

// upTo35 says whether an etcd version is 3.5 or older. A version that does not parse (a custom
// build) is taken as current: the flags and endpoints of the newest supported release.
func upTo35(version string) bool {
	var major, minor int
	_, err := fmt.Sscanf(strings.TrimPrefix(version, "v"), "%d.%d", &major, &minor)
	return err == nil && major == 3 && minor <= 5
}
