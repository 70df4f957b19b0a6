package chaos

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// timeline builds one observation per second from strings such as "a b" (a and b unavailable),
// "" (all up), "Q a" (quorum lost, a down) and "?" (unknown).
func timeline(states ...string) []Observation {
	var out []Observation
	for i, s := range states {
		o := Observation{At: t0.Add(time.Duration(i) * time.Second)}
		for _, f := range strings.Fields(s) {
			switch f {
			case "Q":
				o.QuorumLost = true
			case "?":
				o.Unknown = true
			default:
				o.Unavailable = append(o.Unavailable, f)
			}
		}
		out = append(out, o)
	}
	return out
}

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func TestAccount(t *testing.T) {
	for _, c := range []struct {
		name    string
		obs     []Observation
		windows []Window
		want    []string // invariants broken, in order
	}{
		{name: "a roll, one at a time", obs: timeline("", "a", "a", "", "b", "", "c", "")},
		{name: "two at once, no fault", obs: timeline("", "a", "a b", "b", ""), want: []string{InvOneDisruption}},
		{name: "unknown instants say nothing", obs: timeline("a", "?", "b", "")},
		{name: "a fault and one of Steward's", obs: timeline("", "a", "a b", "a b Q", "a", ""),
			windows: []Window{{Member: "b", Fault: FaultDeletePod, From: at(2), To: at(2)}}},
		{name: "a kill noticed late still counts as the fault", obs: timeline("", "", "", "", "", "", "", "a", "a b", "a", ""),
			windows: []Window{{Member: "b", Fault: FaultKillEtcd, From: at(0), To: at(0)}}},
		{name: "quorum lost with no fault", obs: timeline("", "a b Q", ""), want: []string{InvOneDisruption, InvQuorum}},
		{name: "quorum lost while a partition lasts", obs: timeline("", "c Q", "c Q", "c", ""),
			windows: []Window{{Member: "c", Fault: FaultPartitionMember, From: at(1), To: at(3)}}},
		{name: "Steward disrupts while a fault is on", obs: timeline("", "a", "a", "a", "a", "a", "a b", "a", ""),
			windows: []Window{{Member: "a", Fault: FaultStallDisk, From: at(1), To: at(7)}}, want: []string{InvFixBefore}},
		{name: "Steward began just as the fault struck", obs: timeline("", "a", "a b", "a", ""),
			windows: []Window{{Member: "a", Fault: FaultPartitionMember, From: at(1), To: at(3)}}},
		{name: "Steward replaces the faulted member itself", obs: timeline("", "a", "a", "a", "a", "a", ""),
			windows: []Window{{Member: "a", Fault: FaultPartitionMember, From: at(1), To: at(2)}}},
		{name: "the member list failed while a kill landed (seed 5's soak)", obs: func() []Observation {
			tl := timeline("", "c", "c Q", "c b", "c")
			tl[2].End = tl[2].At.Add(3 * time.Second) // three tries of a second each
			return tl
		}(), windows: []Window{{Member: "b", Fault: FaultKillEtcd, From: at(2).Add(50 * time.Millisecond), To: at(2).Add(60 * time.Millisecond)}}},
		{name: "the same failure read at its start alone", obs: timeline("", "c", "c Q", "c"),
			windows: []Window{{Member: "b", Fault: FaultKillEtcd, From: at(2).Add(50 * time.Millisecond), To: at(2).Add(60 * time.Millisecond)}},
			want:    []string{InvQuorum}},
		{name: "a member down long after its fault is Steward's", obs: timeline(append(make([]string, 14), "a", "a b", "")...),
			windows: []Window{{Member: "a", Fault: FaultKillEtcd, From: at(0), To: at(0)}}, want: []string{InvOneDisruption}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Account(c.obs, c.windows)
			var names []string
			for _, v := range got {
				names = append(names, v.Invariant)
			}
			if strings.Join(names, "|") != strings.Join(c.want, "|") {
				t.Fatalf("violations %+v, want %v", got, c.want)
			}
		})
	}
}

func TestAccountReportsEachBreachOnce(t *testing.T) {
	got := Account(timeline("a b", "a b", "a b", ""), nil)
	if len(got) != 1 || got[0].At != t0 {
		t.Fatalf("%+v, want one violation at the first instant", got)
	}
}
