package dist

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// The namespaces TestChartRBAC's namespaced mode watches.
var watched = []string{"team-a", "team-b"}

const operatorSA = "steward-controller-manager"

// TestChartRBAC lists every permission each mode of the chart grants, as lines
// "<who> <scope> <apiGroup> <resource> <verb>", and compares them with the reviewed lists
// charts/steward/testdata/rbac-{clusterwide,namespaced}.txt. who is "operator" for the operator's
// ServiceAccount; the ClusterRoles for people are listed by what they aggregate into, and
// unbound ones by name. STEWARD_UPDATE_RBAC=1 rewrites the lists (review the diff).
//
// Beyond the lists: cluster-wide mode grants the operator exactly config/rbac/role.yaml (plus its
// leader election Role), and namespaced mode nothing outside it, no namespaced resource
// cluster-wide, and nothing in namespaces it does not watch but its own.
func TestChartRBAC(t *testing.T) {
	generated := roleRules(t, filepath.Join(repoRoot(t), "config", "rbac", "role.yaml"))
	for _, c := range []struct {
		mode string
		set  []string
	}{
		{"clusterwide", nil},
		{"namespaced", []string{"watchNamespaces={" + strings.Join(watched, ",") + "}"}},
	} {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			lines, op := grants(t, mustHelmTemplate(t, c.set))
			compareReviewed(t, filepath.Join(repoRoot(t), chartDir, "testdata", "rbac-"+c.mode+".txt"), lines)

			leader := op["namespace/"+releaseNamespace]
			if c.mode == "clusterwide" {
				if got := op["cluster"]; !slices.Equal(got, generated) {
					t.Errorf("cluster-wide grants differ from config/rbac/role.yaml:\n  only in the chart: %v\n  only in role.yaml: %v",
						minus(got, generated), minus(generated, got))
				}
				if extra := minus(leader, leaderElection); len(extra) > 0 {
					t.Errorf("the operator's own namespace grants more than leader election: %v", extra)
				}
				return
			}
			for scope, g := range op {
				if extra := minus(g, append(slices.Clone(generated), leaderElection...)); len(extra) > 0 {
					t.Errorf("%s: the operator is granted what config/rbac/role.yaml does not: %v", scope, extra)
				}
				ns, isNS := strings.CutPrefix(scope, "namespace/")
				if isNS && ns != releaseNamespace && !slices.Contains(watched, ns) {
					t.Errorf("the operator is granted %v in %s, which it does not watch", g, ns)
				}
			}
			for _, g := range op["cluster"] {
				if !clusterScoped[strings.Join(strings.Fields(g)[:2], " ")] {
					t.Errorf("namespaced mode grants %q cluster-wide; it belongs in the watched namespaces' Roles", g)
				}
			}
			for _, ns := range watched {
				if missing := minus(minus(generated, op["cluster"]), op["namespace/"+ns]); len(missing) > 0 {
					t.Errorf("watched namespace %s lacks %v", ns, missing)
				}
			}
		})
	}
}

// clusterScoped are the "<apiGroup> <resource>" pairs config/rbac/role.yaml names that are
// cluster-scoped: in namespaced mode, only these may be granted cluster-wide.
var clusterScoped = map[string]bool{
	"storage.k8s.io storageclasses":             true,
	"authentication.k8s.io tokenreviews":        true,
	"authorization.k8s.io subjectaccessreviews": true,
	"core nodes":             true,
	"core persistentvolumes": true,
	// get only: a cluster deleted mid-adoption reads its namespace (one being deleted takes the
	// source with it, so the teardown is not held for a member-by-member abort).
	"core namespaces": true,
	// The eviction webhook's configuration, whose caBundle the certificate rotator fills.
	"admissionregistration.k8s.io validatingwebhookconfigurations": true,
}

// leaderElection is what config/rbac/leader_election_role.yaml grants in the operator's namespace.
var leaderElection = []string{
	"coordination.k8s.io leases create", "coordination.k8s.io leases delete", "coordination.k8s.io leases get",
	"coordination.k8s.io leases list", "coordination.k8s.io leases patch", "coordination.k8s.io leases update",
	"coordination.k8s.io leases watch", "core events create", "core events patch",
}

// grants flattens a render's RBAC into reviewed-list lines, and the operator's grants by scope
// ("cluster" or "namespace/<ns>") as sorted "<apiGroup> <resource> <verb>" triples.
func grants(t *testing.T, objs []*unstructured.Unstructured) ([]string, map[string][]string) {
	t.Helper()
	rules := map[string][]rbacv1.PolicyRule{} // "ClusterRole/<name>" or "Role/<ns>/<name>"
	var labels = map[string]map[string]string{}
	var bindings []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetAPIVersion() != "rbac.authorization.k8s.io/v1" {
			continue
		}
		switch u.GetKind() {
		case "ClusterRole", "Role":
			var r rbacv1.ClusterRole // the same fields as a Role
			convert(t, u, &r)
			k := u.GetKind() + "/" + nsPrefix(u.GetNamespace()) + u.GetName()
			rules[k], labels[k] = r.Rules, u.GetLabels()
		case "ClusterRoleBinding", "RoleBinding":
			bindings = append(bindings, u)
		}
	}
	var lines []string
	op := map[string][]string{}
	bound := map[string]bool{}
	for _, u := range bindings {
		var b rbacv1.RoleBinding // the same fields as a ClusterRoleBinding
		convert(t, u, &b)
		scope := "cluster"
		if u.GetKind() == "RoleBinding" {
			scope = "namespace/" + u.GetNamespace()
		}
		ref := b.RoleRef.Kind + "/" + b.RoleRef.Name
		if b.RoleRef.Kind == "Role" {
			ref = "Role/" + u.GetNamespace() + "/" + b.RoleRef.Name
		}
		r, ok := rules[ref]
		if !ok {
			t.Errorf("%s %s binds %s, which the chart does not render", u.GetKind(), u.GetName(), ref)
			continue
		}
		bound[ref] = true
		for _, s := range b.Subjects {
			who := s.Kind + ":" + s.Namespace + "/" + s.Name
			if s.Kind == "ServiceAccount" && s.Name == operatorSA && s.Namespace == releaseNamespace {
				who = "operator"
				op[scope] = append(op[scope], triples(r)...)
			}
			for _, tr := range triples(r) {
				lines = append(lines, who+" "+scope+" "+tr)
			}
		}
	}
	for ref, r := range rules {
		if bound[ref] {
			continue
		}
		who := "unbound:" + ref
		var agg []string
		for l, v := range labels[ref] {
			if a, ok := strings.CutPrefix(l, "rbac.authorization.k8s.io/aggregate-to-"); ok && v == "true" {
				agg = append(agg, a)
			}
		}
		if len(agg) > 0 {
			sort.Strings(agg)
			who = "aggregated-to:" + strings.Join(agg, ",")
		}
		for _, tr := range triples(r) {
			lines = append(lines, who+" cluster "+tr)
		}
	}
	for k := range op {
		op[k] = sortUniq(op[k])
	}
	return sortUniq(lines), op
}

func nsPrefix(ns string) string {
	if ns == "" {
		return ""
	}
	return ns + "/"
}

func convert(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// triples expands rules into "<apiGroup> <resource> <verb>" ("core" for the empty group,
// "nonresource <url> <verb>" for non-resource URLs).
func triples(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, v := range r.Verbs {
			for _, g := range r.APIGroups {
				if g == "" {
					g = "core"
				}
				for _, res := range r.Resources {
					names := ""
					if len(r.ResourceNames) > 0 {
						names = " names=" + strings.Join(r.ResourceNames, ",")
					}
					out = append(out, g+" "+res+" "+v+names)
				}
			}
			for _, u := range r.NonResourceURLs {
				out = append(out, "nonresource "+u+" "+v)
			}
		}
	}
	return sortUniq(out)
}

func roleRules(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r rbacv1.ClusterRole
	if err := yaml.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return triples(r.Rules)
}

func sortUniq(s []string) []string {
	sort.Strings(s)
	return slices.Compact(s)
}

// minus is a without b's elements.
func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

const reviewedHeader = `# Every permission the Steward chart grants in this mode, one per line:
#   <who> <scope> <apiGroup> <resource> <verb>
# who: "operator" (its ServiceAccount), "aggregated-to:<roles>" (ClusterRoles for people, aggregated
# into the built-in roles), "unbound:<role>" (bound by the user). Checked by test/dist TestChartRBAC:
# a line the chart adds fails the test until a reviewer adds it here.
`

// compareReviewed fails on any line not in the reviewed file, and on reviewed lines no longer
// granted. STEWARD_UPDATE_RBAC=1 writes the file instead.
func compareReviewed(t *testing.T, path string, lines []string) {
	t.Helper()
	rel, _ := filepath.Rel(repoRoot(t), path)
	if os.Getenv("STEWARD_UPDATE_RBAC") == "1" {
		if err := os.WriteFile(path, []byte(reviewedHeader+strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: review the diff before committing it", rel)
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (STEWARD_UPDATE_RBAC=1 go test ./test/dist -run TestChartRBAC writes it)", err)
	}
	var reviewed []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			reviewed = append(reviewed, strings.Join(strings.Fields(l), " "))
		}
	}
	if added := minus(lines, reviewed); len(added) > 0 {
		t.Errorf("the chart grants %d permission(s) not in the reviewed list %s:\n  %s\n"+
			"review them (least privilege: does the operator need each, and at this scope?), then add them to %s "+
			"(STEWARD_UPDATE_RBAC=1 go test ./test/dist -run TestChartRBAC rewrites it)",
			len(added), rel, strings.Join(added, "\n  "), rel)
	}
	if removed := minus(reviewed, lines); len(removed) > 0 {
		t.Errorf("%s lists %d permission(s) the chart no longer grants; remove them:\n  %s",
			rel, len(removed), strings.Join(removed, "\n  "))
	}
}
