package datacheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// A joining member's etcd (--initial-cluster-state=existing with no data yet) first asks the
// cluster's peers for the member list over their peer URLs, and exits when none answers. Its own
// log says why each peer did not ("remote error: tls: bad certificate" when a peer refused its
// certificate: a source's --peer-cert-allowed-cn or --peer-cert-allowed-hostname), but that line
// comes before the fatal one and its stack trace, and rarely fits the 2 KiB of log the kubelet keeps
// as the termination message. The wrapper watches etcd's output for it and, when etcd exits for
// it, writes the cause as the termination message, as it does for the data check's verdicts.

// JoinRefused is the verdict on an etcd that could not fetch the member list from any peer; its
// exit code is ExitJoinRefused.
const (
	JoinRefused     = "JoinRefused"
	ExitJoinRefused = 5
)

// etcd's own log messages (server/etcdserver/cluster_util.go and bootstrap, the same in 3.5–3.7).
const (
	msgPeerFetchFailed = "failed to get cluster response"
	errNoClusterInfo   = "cannot fetch cluster info from peer urls"
)

// joinWatch is an io.Writer of etcd's output that remembers the last peer fetch failure and whether
// etcd gave up joining for it. Lines are etcd's JSON log; anything else passes unread.
type joinWatch struct {
	mu       sync.Mutex
	partial  []byte
	address  string // the last peer URL that did not answer
	cause    string // what the fetch from it failed with
	gaveUp   bool   // etcd logged errNoClusterInfo
	maxBytes int
}

func (w *joinWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.line(w.partial[:i])
		w.partial = w.partial[i+1:]
	}
	if w.maxBytes == 0 {
		w.maxBytes = 64 << 10
	}
	if len(w.partial) > w.maxBytes { // a line that never ends says nothing of a join
		w.partial = w.partial[:0]
	}
	return len(p), nil
}

func (w *joinWatch) line(b []byte) {
	if !bytes.Contains(b, []byte(msgPeerFetchFailed)) && !bytes.Contains(b, []byte(errNoClusterInfo)) {
		return
	}
	var entry struct {
		Msg     string `json:"msg"`
		Address string `json:"address"`
		Error   string `json:"error"`
	}
	if json.Unmarshal(b, &entry) != nil {
		return
	}
	switch {
	case entry.Msg == msgPeerFetchFailed:
		w.address, w.cause = entry.Address, entry.Error
	case strings.Contains(entry.Error, errNoClusterInfo):
		w.gaveUp = true
	}
}

// verdict is the termination message when etcd gave up joining; "" otherwise.
func (w *joinWatch) verdict() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.gaveUp || w.cause == "" {
		return ""
	}
	return fmt.Sprintf("%s%s: etcd could not join: no peer gave it the member list; the last, %s, failed with: %s",
		MessagePrefix, JoinRefused, peerOf(w.address), w.cause)
}

// peerOf strips etcd's path from the address it fetched (https://host:2380/members).
func peerOf(address string) string {
	return strings.TrimSuffix(address, "/members")
}

// RefusedJoin extracts a JoinRefused verdict from an etcd container's termination message; "" when
// it is not one. The member's data is untouched (it had none): only the peers' answer was wrong.
func RefusedJoin(exitCode int32, message string) string {
	return strings.TrimPrefix(readVerdict(ExitJoinRefused, exitCode, message), JoinRefused+": ")
}
