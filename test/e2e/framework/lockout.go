package framework

import (
	"strings"
	"time"
)

// transient reports whether err is one etcd returns while its members restart one at a time with the
// client's connection and the peers' connections up: a proposal dropped at a leader handoff, a
// leader change under a read, and a commit that timed out. etcd names a timeout's cause: a member
// not connected to its leader (or a leader not to a quorum) since the request began says
// "possibly due to connection lost", so a plain timeout, or one "due to previous leader failure",
// came from a member whose peers it could reach: a commit slowed by a handoff or a loaded disk,
// not a peer the rotation locked out.
func transient(err string) bool {
	if strings.Contains(err, "raft proposal dropped") || strings.Contains(err, "leader changed") {
		return true
	}
	_, suffix, ok := strings.Cut(err, "etcdserver: request timed out")
	return ok && (suffix == "" || strings.HasPrefix(suffix, ", possibly due to previous leader failure"))
}

// Lockouts are the failed requests that say a client could not work with the cluster: every
// failure but the transient ones, and but the read-back ("not found") of a key whose put failed
// that way. A client the cluster locks out (a handshake refused, a member cut off from its peers)
// fails request after request, so a transient failure counts too when no request that began
// after it succeeded. The history must be one client's, in the order it made its requests.
func (h History) Lockouts() []Op {
	var lastOK time.Time // when the last successful request began
	for _, o := range h {
		if o.OK() && o.Start.After(lastOK) {
			lastOK = o.Start
		}
	}
	unwritten := map[string]bool{}
	var out []Op
	for _, o := range h.Failed() {
		recovered := !o.End.After(lastOK)
		switch {
		case transient(o.Err) && recovered:
			if o.Kind == OpPut {
				unwritten[o.Key] = true
			}
		case o.Kind == OpGet && unwritten[o.Key] && strings.Contains(o.Err, "not found") && recovered:
		default:
			out = append(out, o)
		}
	}
	return out
}
