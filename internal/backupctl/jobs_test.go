package backupctl

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func TestSourcePicksAReadyFollower(t *testing.T) {
	member := func(name string, role stewardv1.MemberRole, ready bool) stewardv1.MemberStatus {
		return stewardv1.MemberStatus{Name: name, Role: role, Ready: ready}
	}
	cases := []struct {
		name    string
		members []stewardv1.MemberStatus
		want    string
		ok      bool
	}{
		{"highest ready follower", []stewardv1.MemberStatus{member("c-0", stewardv1.RoleLeader, true), member("c-1", stewardv1.RoleFollower, true),
			member("c-2", stewardv1.RoleFollower, true)}, "c-2", true},
		{"an unready follower is skipped", []stewardv1.MemberStatus{member("c-0", stewardv1.RoleFollower, true), member("c-1", stewardv1.RoleLeader, true),
			member("c-2", stewardv1.RoleFollower, false)}, "c-0", true},
		{"a learner is never the source", []stewardv1.MemberStatus{member("c-0", stewardv1.RoleLeader, true), member("c-1", stewardv1.RoleLearner, true)}, "", false},
		{"the leader only when alone", []stewardv1.MemberStatus{member("c-0", stewardv1.RoleLeader, true)}, "c-0", true},
		{"a lone unready leader is not", []stewardv1.MemberStatus{member("c-0", stewardv1.RoleLeader, false)}, "", false},
		{"no members", nil, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Source(&stewardv1.EtcdCluster{Status: stewardv1.EtcdClusterStatus{Members: tc.members}})
			if got != tc.want || ok != tc.ok {
				t.Errorf("Source = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestClientSecretName(t *testing.T) {
	ec := &stewardv1.EtcdCluster{}
	ec.Name = "demo"
	if got := ClientSecretName(ec); got != "demo-client-tls" {
		t.Errorf("operator CA: %s", got)
	}
	ec.Spec.TLS = &stewardv1.TLSSpec{Client: stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "mine"}}
	if got := ClientSecretName(ec); got != "mine" {
		t.Errorf("source Secret: %s", got)
	}
}

func TestParseResult(t *testing.T) {
	line := `{"member":{"name":"demo-2","id":"8e9e05c52164694d"},"clusterID":"cdf818194e3a8c32","etcdVersion":"3.6.16",` +
		`"revision":10281,"size":4096,"sha256":"ab12","compression":"zstd","key":"ns/demo/b/snapshot.db.zst"}`
	res, err := parseResult("progress line\n" + line + "\n")
	if err != nil {
		t.Fatal(err)
	}
	var s stewardv1.EtcdBackupStatus
	res.fill(&s)
	if s.Member != "demo-2" || s.Revision != 10281 || s.ClusterID != "cdf818194e3a8c32" || s.SHA256 != "ab12" || s.Key != "ns/demo/b/snapshot.db.zst" {
		t.Errorf("status %+v", s)
	}
	if _, err := parseResult(`{"error":"S3 refused the credentials"}`); err == nil || !strings.Contains(err.Error(), "refused the credentials") {
		t.Errorf("an error result reads as %v", err)
	}
	if _, err := parseResult(""); err == nil {
		t.Error("an empty termination message reads as success")
	}
	if _, err := parseResult("panic: runtime error"); err == nil {
		t.Error("a non-JSON message reads as success")
	}
}

func TestResultError(t *testing.T) {
	if got := resultError(`{"error":"bucket x does not exist at http://s3:7070"}`); got != "bucket x does not exist at http://s3:7070" {
		t.Errorf("JSON error: %q", got)
	}
	if got := resultError("goroutine 1 [running]:\nmain.main()"); !strings.Contains(got, "goroutine 1") {
		t.Errorf("log fallback: %q", got)
	}
}

func TestTerminated(t *testing.T) {
	pod := corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: `{"error":"x"}`}}}}}}
	if _, ok := terminated(pod, 0); ok {
		t.Error("a failed container reads as succeeded")
	}
	if msg, ok := terminated(pod, 1); !ok || msg != `{"error":"x"}` {
		t.Errorf("failed container: %q %v", msg, ok)
	}
}
