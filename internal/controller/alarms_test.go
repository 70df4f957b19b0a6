package controller

import (
	"slices"
	"testing"

	"github.com/etcd-steward/steward/internal/etcd"
	"github.com/etcd-steward/steward/internal/health"
)

// One endpoint that has not applied a new alarm yet must not hide it, and the order endpoints
// answered in must not change status (it would be rewritten on every reconcile).
func TestAddAlarms(t *testing.T) {
	var all []health.Alarm
	all = addAlarms(all, []etcd.Alarm{{MemberID: 2, Type: "NOSPACE"}, {MemberID: 1, Type: "NOSPACE"}})
	all = addAlarms(all, nil)
	all = addAlarms(all, []etcd.Alarm{{MemberID: 1, Type: "NOSPACE"}, {MemberID: 3, Type: "CORRUPT"}})
	want := []health.Alarm{{MemberID: 3, Type: "CORRUPT"}, {MemberID: 1, Type: "NOSPACE"}, {MemberID: 2, Type: "NOSPACE"}}
	if !slices.Equal(all, want) {
		t.Errorf("alarms %+v, want %+v", all, want)
	}
}
