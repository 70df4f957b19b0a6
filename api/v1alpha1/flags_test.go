package v1alpha1_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// The refused-flag lists exist twice: in Go (for the Pod builder) and in the CRD's CEL rules (for
// admission). This keeps them equal, so a flag added to one cannot be missed in the other.
func TestFlagListsMatchCRD(t *testing.T) {
	raw, err := os.ReadFile("../../config/crd/bases/etcd.steward.dev_etcdclusters.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Pull each `rule:` on extraArgs back into one line, then the quoted list out of it.
	crd := strings.Join(strings.Fields(string(raw)), " ")
	list := regexp.MustCompile(`rule: self\.all\(k, !\(k in \[([^\]]*)\]\)\)`)
	var found [][]string
	for _, m := range list.FindAllStringSubmatch(crd, -1) {
		var flags []string
		for _, f := range strings.Split(m[1], ",") {
			flags = append(flags, strings.Trim(strings.TrimSpace(f), "'"))
		}
		found = append(found, flags)
	}
	for _, want := range [][]string{stewardv1.OwnedFlags, stewardv1.TypedFlags} {
		ok := slices.ContainsFunc(found, func(got []string) bool {
			return slices.Equal(sorted(got), sorted(want))
		})
		if !ok {
			t.Errorf("no CEL rule refuses exactly %v; rules found: %v", want, found)
		}
	}
}

func sorted(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
