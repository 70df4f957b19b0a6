//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// TestNOSPACERecovered (issue 12): a 3-member TLS cluster fills its 16 MiB quota and takes no
// writes; with the default spec.maintenance.nospace Recover, Steward compacts, defragments the
// members one at a time and disarms, and writes succeed again without a human and without any
// member restarting.
func TestNOSPACERecovered(t *testing.T) {
	t.Parallel()
	// etcd auth on (issue 29): Steward's compaction, defragmentation and disarm run as root.
	ns := settledCluster(t, "db", 3, "", authOn, func(ec *stewardv1.EtcdCluster) {
		ec.Spec.Options.QuotaBackendBytes = ptr.To(resource.MustParse("16Mi"))
	})
	waitAuthOf(t, ns, "db", "auth on", 2*time.Minute, func(a *stewardv1.AuthStatus) bool { return a.Phase == "On" })
	before := uids(t, ns, "db")
	cl := clientFor(t, ns, "db")
	fillUntilNoSpace(t, cl)
	full := time.Now()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var attempts int
	for {
		attempts++
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cl.Put(wctx, "/after", "ok")
		wcancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			f.Dump(t, ns)
			t.Fatalf("not writable %s after NOSPACE (%d attempts, last: %v)", time.Since(full).Round(time.Second), attempts, err)
		}
		time.Sleep(time.Second)
	}
	measure(t, "NOSPACE to writable again, no human action", time.Since(full))
	waitSettled(t, ns, "db", 3, 2*time.Minute)
	measure(t, "NOSPACE to settled", time.Since(full))

	if after := uids(t, ns, "db"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("Pods or restart counts changed %v -> %v: NOSPACE recovery must not restart anyone", before, after)
	}
	ec, err := get(context.Background(), ns, "db")
	if err != nil {
		t.Fatal(err)
	}
	// Whether defragmenting alone frees enough depends on how bbolt laid out the pages (free pages
	// were 3.5-4 MiB of the 16 in runs so far, against the 3.2 MiB needed): both paths are right.
	compactions, disarms := eventsWith(t, ns, "db", "Compact"), eventsWith(t, ns, "db", "DisarmAlarm")
	m := ec.Status.Maintenance
	switch {
	case m == nil || m.LastDisarm == nil || len(disarms) == 0:
		t.Errorf("status.maintenance = %+v, DisarmAlarm events %q: want the disarm recorded", m, disarms)
	case m.LastCompaction != nil:
		if len(compactions) == 0 || !strings.Contains(compactions[0], "up to revision") {
			t.Errorf("compacted (%+v) but the Compact events %q do not name the revision", *m.LastCompaction, compactions)
		}
		t.Logf("MEASURE NOSPACE recovery path: defragment, compact to %d (head %d), defragment, disarm",
			m.LastCompaction.Revision, m.LastCompaction.HeadRevision)
	default:
		t.Logf("MEASURE NOSPACE recovery path: defragment, disarm (no compaction needed)")
	}
	// A member is defragmented only when its file is at or over 80% of its quota or has free pages
	// to give back (CI: db-0's file was 12.6 MiB, 78.5% of 16 MiB, while db-1's reached the quota;
	// Steward disarmed without disrupting db-0). So each member is either defragmented, with a
	// Defragmented event or, when another scenario killed the operator while its call ran, the
	// next operator's record that it was interrupted; or the disarm named its file under 80%.
	defrags := eventsWith(t, ns, "db", "Defragmented")
	interrupted := eventsWith(t, ns, "db", "RecordDefragmentation")
	t.Logf("defragmentations: %q; interrupted: %q; disarms: %q", defrags, interrupted, disarms)
	if len(defrags)+len(interrupted) == 0 {
		t.Errorf("no member defragmented: a member's file reached the quota, so at least one had to be")
	}
	var lastDisarm string
	if len(disarms) > 0 {
		lastDisarm = disarms[len(disarms)-1]
	}
	for _, m := range ec.Status.Members {
		named := func(prefix string) func(string) bool {
			return func(e string) bool { return strings.HasPrefix(e, prefix) }
		}
		defragmented := slices.ContainsFunc(defrags, named(m.Name+": ")) || slices.ContainsFunc(interrupted, named(m.Name+"'s defragmentation"))
		if !defragmented {
			size, quota, ok := fileAtDisarm(lastDisarm, m.Name)
			if !ok || size.Value()*100 >= 80*quota.Value() {
				t.Errorf("%s: not defragmented, and the disarm %q does not name its file under 80%% of its quota", m.Name, lastDisarm)
			}
			continue
		}
		// Steward disarms once every file is under 80% of its quota: that holds for the size each
		// member's last defragmentation left.
		if m.Quota == nil || m.Defragmentation == nil || m.Defragmentation.Last == nil || m.Defragmentation.Last.SizeAfter == nil ||
			m.Defragmentation.Last.SizeAfter.Value()*100 >= 80*m.Quota.Value() {
			t.Errorf("%s: defragmentation %+v of quota %v: want the last one under 80%%", m.Name, m.Defragmentation, m.Quota)
		}
	}
	// Writes after the disarm may grow the files again (CI saw 12.1 MiB after the
	// defragmentations, 14.1 MiB at this read), so now they need only be under the quota, unalarmed.
	for _, m := range ec.Status.Members {
		if m.DBSize == nil || m.Quota == nil || m.DBSize.Value() >= m.Quota.Value() || len(m.Alarms) > 0 {
			t.Errorf("%s: dbSize %v of quota %v, alarms %v after recovery", m.Name, m.DBSize, m.Quota, m.Alarms)
		}
	}
}

// fileAtDisarm reads a member's file size and quota from a DisarmAlarm message, which lists every
// member as "<name> <size> of <quota>" in parentheses.
func fileAtDisarm(msg, member string) (size, quota resource.Quantity, ok bool) {
	open, closing := strings.LastIndex(msg, "("), strings.LastIndex(msg, ")")
	if open < 0 || closing < open {
		return size, quota, false
	}
	for _, part := range strings.Split(msg[open+1:closing], ", ") {
		w := strings.Fields(part)
		if len(w) != 4 || w[0] != member || w[2] != "of" {
			continue
		}
		s, err1 := resource.ParseQuantity(w[1])
		q, err2 := resource.ParseQuantity(w[3])
		return s, q, err1 == nil && err2 == nil
	}
	return size, quota, false
}
