package streamer

import (
	"time"

	"github.com/etcd-steward/steward/internal/pitr"
)

// Report is what a streamer process serves on /progress; the operator reads it into the schedule's
// status.continuous (the streamer has no Kubernetes credentials).
type Report struct {
	DurableRevision int64        `json:"durableRevision"`
	DurableTime     time.Time    `json:"durableTime"`
	HeadRevision    int64        `json:"headRevision"`
	Segments        int          `json:"segments"`
	Restorable      []pitr.Range `json:"restorable"`
	// Hole names revisions the watch lost (compacted away); HoleAt is when it was found. A base
	// snapshot taken after HoleAt closes it.
	Hole   string    `json:"hole,omitempty"`
	HoleAt time.Time `json:"holeAt,omitzero"`
	// Waiting says why nothing streams (no base snapshot yet, a hole to close).
	Waiting string `json:"waiting,omitempty"`
}
