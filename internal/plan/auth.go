package plan

import "github.com/etcd-steward/steward/internal/authplan"

// auth is etcd authentication's next step. It comes last: it needs quorum, disrupts nobody, and a
// repair, a roll or a scale always goes first (fix before operate). Until authplan has nothing
// left, the cluster is not Reconciled.
func (v *view) auth() (Action, bool) {
	s := v.f.Auth
	switch s.Kind {
	case "", authplan.Nothing:
		return Action{}, false
	case authplan.Refuse:
		return wait(ReasonAuthRefused, "etcd authentication: %s", s.Reason), true
	case authplan.Wait:
		return wait(ReasonAuthWaiting, "etcd authentication: %s", s.Reason), true
	}
	a := act(Authenticate, "", ReasonAuthenticating, "etcd authentication: %s", s)
	a.Auth = &s
	return a, true
}
