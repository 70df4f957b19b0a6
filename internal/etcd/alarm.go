package etcd

import (
	"regexp"
	"strconv"
	"strings"
)

// Alarm is one alarm active in the cluster: the member that raised it and its type (NOSPACE,
// CORRUPT). etcd replicates alarms through raft, so every member reports the same list.
type Alarm struct {
	MemberID uint64
	Type     string
}

// etcd's Status response lists the active alarms among its errors, as the text form of each
// AlarmMember. The text is read here rather than asking AlarmList: AlarmList is a raft proposal (a
// log entry on every call) and needs quorum, while every Status answer already carries the list.
// 3.7's protobuf runtime varies the spacing of that text on purpose, hence the \s*.
var alarmText = regexp.MustCompile(`memberID:\s*(\d+)\s+alarm:\s*([A-Z_]+)`)

// splitErrors separates the alarms from the other errors of a Status response. An error that names
// an alarm but does not parse stays an alarm (type as printed): it is still not a broken member.
func splitErrors(all []string) (errs []string, alarms []Alarm) {
	for _, e := range all {
		if m := alarmText.FindStringSubmatch(e); m != nil {
			id, _ := strconv.ParseUint(m[1], 10, 64)
			alarms = append(alarms, Alarm{MemberID: id, Type: m[2]})
			continue
		}
		if strings.Contains(e, "alarm:") {
			alarms = append(alarms, Alarm{Type: strings.TrimSpace(e)})
			continue
		}
		errs = append(errs, e)
	}
	return errs, alarms
}
