package plan

import (
	"testing"

	"github.com/etcd-steward/steward/internal/authplan"
)

// etcd authentication's steps come last: a repair, a roll and an unhealthy cluster all go first,
// and the cluster is not Reconciled while a step is left.
func TestAuthComesLast(t *testing.T) {
	addUser := func(f *Facts) { f.Auth = authplan.Step{Kind: authplan.UserAdd, User: "steward-operator"} }
	runPlanCases(t, []planCase{
		{name: "no auth declared: reconciled", mutate: nil, want: want{kind: Nothing, reason: ReasonReconciled}},
		{name: "authplan has nothing left: reconciled", mutate: func(f *Facts) { f.Auth = authplan.Step{Kind: authplan.Nothing} },
			want: want{kind: Nothing, reason: ReasonReconciled}},
		{name: "settled and healthy: the auth step", mutate: addUser,
			want: want{kind: Authenticate, reason: ReasonAuthenticating, message: "UserAdd user steward-operator"}},
		{name: "a member unreachable: the gate first", mutate: func(f *Facts) {
			addUser(f)
			f.silence("c-2")
		}, want: want{kind: Wait, reason: ReasonWaitingForHealth}},
		{name: "a member's record outdated: the roll's bookkeeping first", mutate: func(f *Facts) {
			addUser(f)
			f.m("c-2").Template.Version = "3.6.12"
		}, want: want{kind: RecordTemplate, member: "c-2"}},
		{name: "a member's Pod outdated: the roll first", mutate: func(f *Facts) {
			addUser(f)
			f.m("c-2").Template.Version = "3.6.12"
			f.m("c-2").Pod.Template.Version = "3.6.12"
		}, want: want{kind: DeletePod, member: "c-2", reason: ReasonRollingMember, disruption: "Restart"}},
		{name: "authplan waits: the cluster waits, with the reason", mutate: func(f *Facts) {
			f.Auth = authplan.Step{Kind: authplan.Wait, Reason: "user app waits until every member serves the certificate revocation list"}
		}, want: want{kind: Wait, reason: ReasonAuthWaiting, message: "revocation list"}},
		{name: "authplan refuses: said, nothing done", mutate: func(f *Facts) {
			f.Auth = authplan.Step{Kind: authplan.Refuse, Reason: authplan.LockoutHelp(authplan.Identity{Operator: "steward-operator"})}
		}, want: want{kind: Wait, reason: ReasonAuthRefused, message: "etcdctl user grant-role steward-operator root"}},
	})
	d := planFor(t, 3, "", addUser)
	if d.Action.Auth == nil || d.Action.Auth.Kind != authplan.UserAdd {
		t.Errorf("the action carries %+v, want the UserAdd step", d.Action.Auth)
	}
}
