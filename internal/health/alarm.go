package health

import (
	"fmt"
	"slices"
	"strings"
)

// What each alarm means for the cluster and what the user does about it. Steward does not disarm on
// its own: a NOSPACE disarmed without freeing space is raised again by the next write, and freeing
// space means deciding which data to compact away, which is the user's call.
var alarmAdvice = map[string]string{
	"NOSPACE": "the cluster accepts only reads and deletes; compact, defragment and disarm (etcdctl alarm disarm)",
	"CORRUPT": "etcd found members' data inconsistent and refuses writes; replace the corrupt member or restore from a backup, then disarm",
}

// AlarmMessage describes the active alarms for humans, one clause per type:
// "NOSPACE alarm raised on demo-0, demo-1: the cluster accepts only reads and deletes; ...".
// Members are named from the live member list, by ID otherwise. Empty when no alarm is active.
func (f Facts) AlarmMessage() string {
	on := map[string][]string{}
	for _, a := range f.Alarms {
		name := fmt.Sprintf("member %x", a.MemberID)
		for _, m := range f.Members {
			if m.ID == a.MemberID && m.Name != "" {
				name = m.Name
			}
		}
		if !slices.Contains(on[a.Type], name) {
			on[a.Type] = append(on[a.Type], name)
		}
	}
	var parts []string
	for _, t := range sortedKeys(on) {
		slices.Sort(on[t])
		advice, ok := alarmAdvice[t]
		if !ok {
			advice = "see etcd's documentation for this alarm, then disarm (etcdctl alarm disarm)"
		}
		parts = append(parts, fmt.Sprintf("%s alarm raised on %s: %s", t, strings.Join(on[t], ", "), advice))
	}
	return strings.Join(parts, "; ")
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
