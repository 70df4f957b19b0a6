package plan

// Golden action sequences (issue 24): every simulator world records the action it applied at each
// step, and TestMain compares what a passing run recorded with testdata/sequences/<Test>.golden.
// A reshaping of the planner must leave every sequence as it was: a step that decides differently,
// one step earlier or later, shows as a diff here even where no scenario asserts on it.
//
// Messages are left out (they are for humans and may be reworded); the kind, the member, the target
// and the reason are the decision. `go test ./internal/plan -run X -update-sequences` rewrites the
// files of the tests that ran.

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

var updateSequences = flag.Bool("update-sequences", false, "rewrite testdata/sequences/*.golden from this run")

// sequences holds, per top-level test, each world's recorded lines under its full test name.
var sequences = struct {
	sync.Mutex
	byTest map[string]map[string][]string // top-level test -> "subtest name #world" -> lines
	count  map[string]int                 // full test name -> worlds made under it
}{byTest: map[string]map[string][]string{}, count: map[string]int{}}

// recordSequence makes w record its steps and hand them over when its test ends. Forks (liveness
// probes) do not record: fork clears seq and recording.
func (w *world) recordSequence() {
	t, ok := w.t.(*testing.T)
	if !ok {
		return
	}
	name := t.Name()
	sequences.Lock()
	k := sequences.count[name]
	sequences.count[name]++
	sequences.Unlock()
	w.recording = true
	t.Cleanup(func() {
		top, _, _ := strings.Cut(name, "/")
		sequences.Lock()
		defer sequences.Unlock()
		if sequences.byTest[top] == nil {
			sequences.byTest[top] = map[string][]string{}
		}
		sequences.byTest[top][fmt.Sprintf("%s #%d", name, k)] = w.seq
	})
}

// noteStep records one applied action.
func (w *world) noteStep(a Action) {
	if w.recording {
		w.seq = append(w.seq, fmt.Sprintf("%3d %s", w.step, a.String()))
	}
}

func sequenceFile(top string) string {
	return filepath.Join("testdata", "sequences", top+".golden")
}

func renderSequences(worlds map[string][]string) []byte {
	keys := make([]string, 0, len(worlds))
	for k := range worlds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "== %s\n", k)
		for _, l := range worlds[k] {
			b.WriteString(l + "\n")
		}
	}
	return []byte(b.String())
}

// checkSequences compares (or with -update-sequences rewrites) the golden file of every top-level
// test that made worlds in this run, section by section, so a run narrowed by -run checks (or
// rewrites) only the worlds it made. It returns where the sequences differ.
func checkSequences(full bool) ([]string, error) {
	var differ []string
	for top, worlds := range sequences.byTest {
		path := sequenceFile(top)
		want := map[string][]string{}
		if b, err := os.ReadFile(path); err == nil {
			want = parseSequences(string(b))
		} else if !*updateSequences {
			return nil, fmt.Errorf("%s: %w (record it with -update-sequences)", path, err)
		}
		if *updateSequences {
			if full {
				want = map[string][]string{}
			}
			for k, l := range worlds {
				want[k] = l
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(path, renderSequences(want), 0o644); err != nil {
				return nil, err
			}
			continue
		}
		for k, got := range worlds {
			if d := firstDifference(want[k], got, k); d != "" {
				differ = append(differ, fmt.Sprintf("%s: %s", top, d))
			}
		}
		if full {
			for k := range want {
				if _, ok := worlds[k]; !ok {
					differ = append(differ, fmt.Sprintf("%s: %q was recorded but did not run", top, k))
				}
			}
		}
	}
	sort.Strings(differ)
	return differ, nil
}

func parseSequences(s string) map[string][]string {
	out := map[string][]string{}
	cur := ""
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if k, ok := strings.CutPrefix(l, "== "); ok {
			cur = k
			out[cur] = []string{}
			continue
		}
		out[cur] = append(out[cur], l)
	}
	return out
}

// firstDifference says where two sequences of one world part; "" when equal.
func firstDifference(want, got []string, section string) string {
	if want == nil {
		return fmt.Sprintf("%q is not in the golden file (record it with -update-sequences)", section)
	}
	for i := 0; i < len(want) || i < len(got); i++ {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w != g {
			return fmt.Sprintf("%q, action %d: want %q, got %q", section, i+1, w, g)
		}
	}
	return ""
}

func TestMain(m *testing.M) {
	code := m.Run()
	// Only a run whose scenarios passed has sequences worth comparing; a failing one already says
	// what is wrong.
	if code == 0 {
		differ, err := checkSequences(flag.Lookup("test.run").Value.String() == "")
		switch {
		case err != nil:
			fmt.Fprintln(os.Stderr, "sequences:", err)
			code = 1
		case len(differ) > 0:
			fmt.Fprintln(os.Stderr, "FAIL: the simulator's action sequences changed (issue 24: the planner's reshaping "+
				"must not change a decision):\n  "+strings.Join(differ, "\n  "))
			code = 1
		}
	}
	os.Exit(code)
}
