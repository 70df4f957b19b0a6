package backupplan

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kptr "k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func TestPointInTimeHold(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 14, 0, 0, 0, time.UTC)
	mt := func(s int) *metav1.Time { return &metav1.Time{Time: t0.Add(time.Duration(s) * time.Second)} }
	c := &stewardv1.ContinuousBackupStatus{Restorable: []stewardv1.RestorableRange{
		{FromRevision: 100, ToRevision: 200, FromTime: mt(0), ToTime: mt(100), Base: "b1"},
		{FromRevision: 300, ToRevision: 400, FromTime: mt(200), ToTime: mt(300), Base: "b2"},
	}}
	rev := func(r int64) *stewardv1.PointInTimeSpec {
		return &stewardv1.PointInTimeSpec{ScheduleName: "s", Revision: kptr.To(r)}
	}
	at := func(s int) *stewardv1.PointInTimeSpec {
		return &stewardv1.PointInTimeSpec{ScheduleName: "s", Time: mt(s)}
	}
	for _, tc := range []struct {
		name string
		c    *stewardv1.ContinuousBackupStatus
		p    *stewardv1.PointInTimeSpec
		want string
	}{
		{"no report yet: the fetch decides", nil, rev(5), ""},
		{"in the first range", c, rev(150), ""},
		{"a range's ends", c, rev(400), ""},
		{"in the hole", c, rev(250), "revision 250 is not restorable: the restorable ranges are revisions 100-200"},
		{"before the first base", c, rev(50), "is not restorable"},
		{"past the durable end: wait", c, rev(401), "revision 401 is not durable yet"},
		{"a time in a range", c, at(50), ""},
		{"a time in the hole", c, at(150), "is not restorable"},
		{"a time past the end: wait", c, at(301), "is not durable yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PointInTimeHold(tc.c, tc.p)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("hold %q, want %q", got, tc.want)
			}
		})
	}
}
