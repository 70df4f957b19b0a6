// Package streamer is the continuous backup's writer: it watches a cluster's whole keyspace from
// the revision after a base snapshot and writes the events into segments (package segment) in an
// object store, so a restore can replay them onto the base up to any revision.
package streamer

import (
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/etcd-steward/steward/internal/segment"
)

// Revisions splits the events of one watch response into revisions. etcd never splits a revision
// across watch responses (its watcher batches whole revisions, and Steward never asks for
// fragments), so every revision of a response is complete. header is the response's header
// revision: the member's revision when it sent it. A revision equal to it arrived live and is
// stamped so; older ones were read while catching up.
func Revisions(events []*mvccpb.Event, header int64, stamp time.Time) ([]segment.Revision, error) {
	var out []segment.Revision
	for _, e := range events {
		rev := e.GetKv().GetModRevision()
		if n := len(out); n > 0 && out[n-1].Revision == rev {
			out[n-1].Events = append(out[n-1].Events, e)
			continue
		} else if n > 0 && rev < out[n-1].Revision {
			return nil, fmt.Errorf("watch response: revision %d after %d", rev, out[n-1].Revision)
		}
		out = append(out, segment.Revision{Revision: rev, Stamp: stamp, Events: []*mvccpb.Event{e}})
	}
	for i := range out {
		if out[i].Revision == header {
			out[i].Flags |= segment.FlagLive
		}
	}
	return out, nil
}
