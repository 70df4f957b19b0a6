package streamer

import (
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/etcd-steward/steward/internal/pitr"
)

func ev(rev int64, key string) *mvccpb.Event {
	return &mvccpb.Event{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev, CreateRevision: rev, Version: 1}}
}

func TestRevisions(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name   string
		events []*mvccpb.Event
		header int64
		want   string
		err    bool
	}{
		{name: "nothing (a progress notification)", header: 9, want: "[]"},
		{name: "one live revision", events: []*mvccpb.Event{ev(9, "a")}, header: 9, want: "[9:1:live]"},
		{name: "a transaction stays one revision", events: []*mvccpb.Event{ev(9, "a"), ev(9, "b"), ev(9, "c")}, header: 9, want: "[9:3:live]"},
		{name: "catching up: only the newest is live", events: []*mvccpb.Event{ev(7, "a"), ev(8, "a"), ev(8, "b"), ev(9, "c")}, header: 9,
			want: "[7:1: 8:2: 9:1:live]"},
		{name: "behind the member's head: none live", events: []*mvccpb.Event{ev(7, "a")}, header: 12, want: "[7:1:]"},
		{name: "out of order is an error", events: []*mvccpb.Event{ev(8, "a"), ev(7, "b")}, header: 9, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			revs, err := Revisions(tc.events, tc.header, now)
			if (err != nil) != tc.err {
				t.Fatalf("error %v, want error %t", err, tc.err)
			}
			if tc.err {
				return
			}
			got := "["
			for i, r := range revs {
				live := ""
				if r.Live() {
					live = "live"
				}
				if i > 0 {
					got += " "
				}
				got += fmt.Sprintf("%d:%d:%s", r.Revision, len(r.Events), live)
				if !r.Stamp.Equal(now) {
					t.Errorf("revision %d stamped %v", r.Revision, r.Stamp)
				}
			}
			if got += "]"; got != tc.want {
				t.Errorf("Revisions = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestStartAfter(t *testing.T) {
	b := func(rev int64) pitr.Base { return pitr.Base{Name: fmt.Sprint(rev), Revision: rev} }
	s := func(after, last int64) pitr.Segment { return pitr.Segment{After: after, Last: last} }
	for _, tc := range []struct {
		name  string
		bases []pitr.Base
		segs  []pitr.Segment
		want  int64
		err   bool
	}{
		{name: "no base", segs: []pitr.Segment{s(1, 5)}, err: true},
		{name: "a base alone", bases: []pitr.Base{b(10)}, want: 10},
		{name: "the chain's end", bases: []pitr.Base{b(10)}, segs: []pitr.Segment{s(10, 20), s(20, 30)}, want: 30},
		{name: "a newer base than the chain's end (after a hole)", bases: []pitr.Base{b(10), b(50)}, segs: []pitr.Segment{s(10, 20)}, want: 50},
		{name: "a newer base inside the chain", bases: []pitr.Base{b(10), b(25)}, segs: []pitr.Segment{s(10, 20), s(20, 30)}, want: 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := StartAfter(tc.bases, tc.segs)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("StartAfter = %d, %v; want %d (error %t)", got, err, tc.want, tc.err)
			}
		})
	}
}
