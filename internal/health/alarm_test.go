package health

import "testing"

func TestAlarmMessage(t *testing.T) {
	f, _ := healthy(3)
	if m := f.AlarmMessage(); m != "" {
		t.Errorf("no alarm, message %q", m)
	}
	f.Alarms = []Alarm{{2, "NOSPACE"}, {0xbeef, "CORRUPT"}, {1, "NOSPACE"}, {2, "NOSPACE"}, {3, "FUTURE"}}
	want := "CORRUPT alarm raised on member beef: etcd found members' data inconsistent and refuses writes; " +
		"replace the corrupt member or restore from a backup, then disarm; " +
		"FUTURE alarm raised on c-2: see etcd's documentation for this alarm, then disarm (etcdctl alarm disarm); " +
		"NOSPACE alarm raised on c-0, c-1: the cluster accepts only reads and deletes; compact, defragment and " +
		"disarm (etcdctl alarm disarm)"
	if m := f.AlarmMessage(); m != want {
		t.Errorf("message\n%s\nwant\n%s", m, want)
	}
}

// NOSPACE recovery defragments members one at a time while the alarm stands: the gate lets
// NOSPACE alone pass when asked to, never CORRUPT, and still judges every endpoint.
func TestGateAllowNoSpace(t *testing.T) {
	f, voters := healthy(3)
	e := Expectation{Voters: voters}
	f.Alarms = []Alarm{{1, AlarmNoSpace}}
	if r := Gate(f, e); r.Check != CheckAlarm {
		t.Errorf("NOSPACE without AllowNoSpace: %v", r)
	}
	e.AllowNoSpace = true
	if r := Gate(f, e); !r.Passed() {
		t.Errorf("NOSPACE with AllowNoSpace: %v", r)
	}
	f.Endpoints[2].ReadOK = false
	if r := Gate(f, e); r.Check != CheckRead {
		t.Errorf("a member not serving still fails the gate: %v", r)
	}
	f.Endpoints[2].ReadOK = true
	f.Alarms = append(f.Alarms, Alarm{2, AlarmCorrupt})
	if r := Gate(f, e); r.Check != CheckAlarm {
		t.Errorf("CORRUPT with AllowNoSpace: %v", r)
	}
}

// Replacing a member etcd found corrupt: the gate lets that member's CORRUPT alarm pass, and
// nothing else.
func TestGateAllowCorruptOn(t *testing.T) {
	f, voters := healthy(3)
	f.Alarms = []Alarm{{2, AlarmCorrupt}}
	if r := Gate(f, Expectation{Voters: voters, AllowCorruptOn: 2}); !r.Passed() {
		t.Errorf("CORRUPT on the member being replaced: %v", r)
	}
	if r := Gate(f, Expectation{Voters: voters, AllowCorruptOn: 3}); r.Check != CheckAlarm {
		t.Errorf("CORRUPT on another member: %v", r)
	}
	f.Alarms = append(f.Alarms, Alarm{2, AlarmNoSpace})
	if r := Gate(f, Expectation{Voters: voters, AllowCorruptOn: 2}); r.Check != CheckAlarm {
		t.Errorf("NOSPACE as well: %v", r)
	}
}
