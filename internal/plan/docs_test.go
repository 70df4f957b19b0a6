package plan

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	v1alpha1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// TestRolloutDocMatchesCompare keeps docs/rollout.md's field table equal to fieldCases, which
// TestCompare proves against Compare: the table users read is the behaviour they get.
func TestRolloutDocMatchesCompare(t *testing.T) {
	raw, err := os.ReadFile("../../docs/rollout.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-zA-Z]+)`[^|]*\\| ([^|]+) \\| ([^|]+) \\| ([^|]+) \\|$")
	doc := map[string][3]string{}
	for _, m := range row.FindAllStringSubmatch(string(raw), -1) {
		doc[m[1]] = [3]string{strings.TrimSpace(m[2]), strings.TrimSpace(m[3]), strings.TrimSpace(m[4])}
	}
	jsonName := map[string]string{}
	typ := reflect.TypeOf(v1alpha1.MemberTemplate{})
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		jsonName[f.Name] = strings.Split(f.Tag.Get("json"), ",")[0]
	}
	words := func(c Change, medium string) string {
		switch {
		case c == ChangeRoll && medium == "pvc":
			return "restart"
		case c == ChangeRoll:
			return "replace"
		case c == ChangeMetadata:
			return "in place"
		case c == 0 && medium == "pvc":
			return "PVC expansion in place"
		}
		return c.String()
	}
	for _, c := range fieldCases {
		name := jsonName[c.field]
		got, ok := doc[name]
		if !ok {
			t.Errorf("docs/rollout.md has no row for `%s`", name)
			continue
		}
		if want := [3]string{words(c.pvc, "pvc"), words(c.memory, "memory"), c.inPlace}; got != want {
			t.Errorf("docs/rollout.md says `%s` does %q; the planner does %q", name, got, want)
		}
	}
	if len(doc) != len(fieldCases) {
		t.Errorf("docs/rollout.md lists %d fields, the template has %d", len(doc), len(fieldCases))
	}
}
