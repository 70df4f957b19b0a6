package plan

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
)

// A CA rotation waiting for clients to restart says so in its own reason, so the condition tells
// the user that the next step is theirs; a hold still wins over it.
func TestPlanTLSGateReasons(t *testing.T) {
	const msg = "restart clients that load certificates once (for example kube-apiserver) ..., then approve"
	runPlanCases(t, []planCase{
		{name: "certificate work in flight", mutate: func(f *Facts) { f.TLS.Pending = "waiting for etcd-0 to serve" },
			want: want{kind: Wait, reason: ReasonCertificatesInProgress, message: "etcd-0"}},
		{name: "waiting for clients", mutate: func(f *Facts) { f.TLS.Pending, f.TLS.AwaitingClients = msg, true },
			want: want{kind: Wait, reason: ReasonWaitingForClientRestart, message: "kube-apiserver"}},
		{name: "waiting for clients for days is not a stuck step", mutate: func(f *Facts) {
			f.TLS.Pending, f.TLS.AwaitingClients = msg, true
			stepAgo(f, 48*time.Hour)
		}, want: want{kind: Wait, reason: ReasonWaitingForClientRestart, message: "approve"}},
		{name: "a hold wins", mutate: func(f *Facts) { f.TLS.Pending, f.TLS.AwaitingClients, f.TLS.Hold = msg, true, "Secret x missing" },
			want: want{kind: Wait, reason: ReasonCertificatesInProgress, message: "Secret x missing"}},
	})
}

// The condition tells the user the next step is theirs: Progressing False with the reason and
// the instructions, and no deadline however long it takes.
func TestPlanTLSClientsCondition(t *testing.T) {
	d := planFor(t, 3, "", func(f *Facts) {
		f.TLS.Pending, f.TLS.AwaitingClients = "restart clients (for example kube-apiserver), then approve", true
		stepAgo(f, 48*time.Hour)
	})
	c := meta.FindStatusCondition(d.Conditions, ConditionProgressing)
	if d.DeadlineExceeded || c == nil || c.Status != "False" || c.Reason != string(ReasonWaitingForClientRestart) || c.Message != "restart clients (for example kube-apiserver), then approve" {
		t.Errorf("deadline %v, Progressing %+v", d.DeadlineExceeded, c)
	}
}
