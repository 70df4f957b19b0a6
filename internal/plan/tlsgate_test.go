package plan

import "testing"

// A CA rotation waiting for clients to restart says so in its own reason, so the condition tells
// the user that the next step is theirs; a hold still wins over it.
func TestPlanTLSGateReasons(t *testing.T) {
	const msg = "restart clients that load certificates once (for example kube-apiserver) ..., then approve"
	runPlanCases(t, []planCase{
		{name: "certificate work in flight", mutate: func(f *Facts) { f.TLS.Pending = "waiting for etcd-0 to serve" },
			want: want{kind: Wait, reason: ReasonTLSPending, message: "etcd-0"}},
		{name: "waiting for clients", mutate: func(f *Facts) { f.TLS.Pending, f.TLS.AwaitingClients = msg, true },
			want: want{kind: Wait, reason: ReasonTLSClients, message: "kube-apiserver"}},
		{name: "a hold wins", mutate: func(f *Facts) { f.TLS.Pending, f.TLS.AwaitingClients, f.TLS.Hold = msg, true, "Secret x missing" },
			want: want{kind: Wait, reason: ReasonTLSPending, message: "Secret x missing"}},
	})
}
