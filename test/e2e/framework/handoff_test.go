package framework

import "testing"

func TestHandedOff(t *testing.T) {
	move := []string{"moving leadership from db-0 to db-1 before replacing it"}
	for _, tc := range []struct {
		name    string
		moves   []string
		leaders []string
		seen    bool
		want    bool
	}{
		{"the operator moved it", move, []string{"db-0"}, true, true},
		{"a move from another member", []string{"moving leadership from db-2 to db-1 before x"}, []string{"db-0"}, true, false},
		{"an election before the removal", nil, []string{"db-0", "db-2"}, true, true},
		{"removed while leading", nil, []string{"db-0"}, true, false},
		{"elected away and back before the removal", nil, []string{"db-0", "db-1", "db-0"}, true, false},
		{"the removal never seen", nil, []string{"db-0", "db-2"}, false, false},
		{"nothing seen of the leader", nil, []string{"db-1", "db-2"}, true, false},
		{"an empty trail", nil, nil, true, false},
	} {
		if got := HandedOff("db-0", tc.moves, tc.leaders, tc.seen); got != tc.want {
			t.Errorf("%s: HandedOff = %v, want %v", tc.name, got, tc.want)
		}
	}
}
