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

// Replacing a member the hashes put in the minority: the gate lets CORRUPT pass whichever member
// it names (0 included: the compaction check's "no majority"), and no other alarm beside it.
func TestGateAllowCorrupt(t *testing.T) {
	f, voters := healthy(3)
	for _, id := range []uint64{2, 3, 0} {
		f.Alarms = []Alarm{{id, AlarmCorrupt}}
		if r := Gate(f, Expectation{Voters: voters, AllowCorrupt: true}); !r.Passed() {
			t.Errorf("CORRUPT naming %x: %v", id, r)
		}
		if r := Gate(f, Expectation{Voters: voters}); r.Check != CheckAlarm {
			t.Errorf("CORRUPT naming %x without AllowCorrupt: %v", id, r)
		}
	}
	f.Alarms = append(f.Alarms, Alarm{2, AlarmNoSpace})
	if r := Gate(f, Expectation{Voters: voters, AllowCorrupt: true}); r.Check != CheckAlarm {
		t.Errorf("NOSPACE as well: %v", r)
	}
}
