package controller_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	"github.com/etcd-steward/steward/internal/controller"
)

// The CI failure: three members defragmented between two status writes gave three events of one
// cluster object version and one reason, and the events API's real broadcaster merged them into a
// series keeping only the first message. Each member's event stands on its own.
func TestMemberEventsAreNotMerged(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ec := unmanagedCluster(ns)
	ec.ResourceVersion = "42" // the same object version for all three, as between two status writes
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	stop := make(chan struct{})
	defer close(stop)
	b.StartRecordingToSink(stop)
	r := &controller.EtcdClusterReconciler{Client: env.Client, Recorder: realRecorder{b.NewRecorder(env.Client.Scheme(), "steward")}}
	for _, m := range []string{"ghost-2", "ghost-1", "ghost-0"} {
		r.MemberEvent(ec, m, "Defragmented", m+": 28MiB -> 0.1MiB")
	}
	var notes []string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		list, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		notes = notes[:0]
		for _, e := range list.Items {
			if e.Reason == "Defragmented" {
				notes = append(notes, e.Note+seriesText(e))
			}
		}
		if len(notes) == 3 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	sort.Strings(notes)
	if fmt.Sprint(notes) != "[ghost-0: 28MiB -> 0.1MiB ghost-1: 28MiB -> 0.1MiB ghost-2: 28MiB -> 0.1MiB]" {
		t.Errorf("Defragmented events %q, want one per member", notes)
	}
}

func seriesText(e eventsv1.Event) string {
	if e.Series != nil {
		return fmt.Sprintf(" (series of %d)", e.Series.Count)
	}
	return ""
}

// realRecorder is client-go's events recorder, the one the manager hands out, with the annotated
// variant controller-runtime's interface adds (unused here).
type realRecorder struct{ events.EventRecorderLogger }

func (realRecorder) AnnotatedEventf(runtime.Object, runtime.Object, map[string]string, string, string, string, string, ...any) {
}
