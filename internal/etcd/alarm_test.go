package etcd

import (
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

// etcd appends each active alarm's text form to Status errors. 3.5 and 3.6 print it with gogo
// protobuf; 3.7 with google.golang.org/protobuf, which varies the spacing on purpose, so the parser
// must not depend on it.
func TestSplitErrors(t *testing.T) {
	v37 := (&etcdserverpb.AlarmMember{MemberID: 0xa1, Alarm: etcdserverpb.AlarmType_CORRUPT}).String()
	errs, alarms := splitErrors([]string{
		"etcdserver: no leader",
		"memberID:10276657743932975437 alarm:NOSPACE ",
		v37,
		"memberID:7 alarm:SOMETHING_NEW",
	})
	if !slices.Equal(errs, []string{"etcdserver: no leader"}) {
		t.Errorf("errors = %q", errs)
	}
	want := []Alarm{{10276657743932975437, "NOSPACE"}, {0xa1, "CORRUPT"}, {7, "SOMETHING_NEW"}}
	if !slices.Equal(alarms, want) {
		t.Errorf("alarms = %+v, want %+v (3.7 text: %q)", alarms, want, v37)
	}
}

// An alarm is reported as what it is, and does not make a member that serves look down: NOSPACE
// leaves reads, deletes, compaction and defragmentation working.
func TestStatusUnderNOSPACE(t *testing.T) {
	cl, c := startWithClient(t, 3)
	ctx := tctx(t)
	cl.RaiseAlarm(ctx, cl.Members[1], "NOSPACE")
	raisedBy := c.Status(ctx, cl.Members[1].ClientURL).MemberID
	// The other members apply the alarm a heartbeat later.
	var statuses []EndpointStatus
	for range 100 {
		statuses = c.Statuses(ctx, cl.ClientURLs())
		if !slices.ContainsFunc(statuses, func(s EndpointStatus) bool { return len(s.Alarms)+len(s.Errors) == 0 }) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, s := range statuses {
		if !s.Healthy() || len(s.Errors) != 0 {
			t.Errorf("%s: healthy %v, errors %q under NOSPACE", s.Endpoint, s.Healthy(), s.Errors)
		}
		// The alarm list is replicated: every member reports the one member that raised it.
		if !slices.Equal(s.Alarms, []Alarm{{raisedBy, "NOSPACE"}}) {
			t.Errorf("%s: alarms %+v, want NOSPACE on %x", s.Endpoint, s.Alarms, raisedBy)
		}
		if err := c.LinearizableRead(ctx, s.Endpoint); err != nil {
			t.Errorf("%s: a read under NOSPACE failed: %v", s.Endpoint, err)
		}
	}
}
