package segment

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

func put(key, value string, create, mod, version, lease int64) *mvccpb.Event {
	return &mvccpb.Event{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte(value),
		CreateRevision: create, ModRevision: mod, Version: version, Lease: lease}}
}

func del(key string, mod int64) *mvccpb.Event {
	return &mvccpb.Event{Type: mvccpb.Event_DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: mod}}
}

var t0 = time.Date(2026, 12, 4, 14, 2, 10, 123456789, time.UTC)

// sample is a segment after revision 10: a put, a leased put, a transaction of three changes, a delete.
func sample(t *testing.T) ([]byte, []Revision) {
	t.Helper()
	revs := []Revision{
		{Revision: 11, Stamp: t0, Flags: FlagLive, Events: []*mvccpb.Event{put("/a", "1", 11, 11, 1, 0)}},
		{Revision: 12, Stamp: t0.Add(time.Millisecond), Events: []*mvccpb.Event{put("/l", "x", 12, 12, 1, 0x77)}},
		{Revision: 13, Stamp: t0.Add(2 * time.Millisecond), Flags: FlagLive, Events: []*mvccpb.Event{
			put("/a", "2", 11, 13, 2, 0), del("/b", 13), put("/c", "", 13, 13, 1, 0)}},
		{Revision: 15, Stamp: t0.Add(time.Second), Events: []*mvccpb.Event{del("/a", 15)}},
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{ClusterID: "cafe", After: 10, Member: "1"})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range revs {
		if i == 1 {
			if err := w.Lease(Lease{ID: 0x77, TTL: 30}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Revision(r); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if tr.First != 11 || tr.Last != 15 || tr.Revisions != 4 || tr.Events != 6 || tr.Leases != 1 ||
		!tr.FirstStamp.Equal(t0) || !tr.LastStamp.Equal(t0.Add(time.Second)) {
		t.Fatalf("trailer %+v", tr)
	}
	return buf.Bytes(), revs
}

func readAll(b []byte) (Header, []Revision, []Lease, error) {
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		return Header{}, nil, nil, err
	}
	var revs []Revision
	var leases []Lease
	for {
		rev, l, err := r.Next()
		if errors.Is(err, io.EOF) {
			return r.Header(), revs, leases, nil
		}
		if err != nil {
			return r.Header(), revs, leases, err
		}
		if rev != nil {
			revs = append(revs, *rev)
		} else {
			leases = append(leases, *l)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	b, want := sample(t)
	h, got, leases, err := readAll(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.ClusterID != "cafe" || h.After != 10 || h.FormatVersion != FormatVersion || h.Member != "1" {
		t.Errorf("header %+v", h)
	}
	if len(leases) != 1 || leases[0] != (Lease{ID: 0x77, TTL: 30}) {
		t.Errorf("leases %+v", leases)
	}
	if len(got) != len(want) {
		t.Fatalf("%d revisions, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Revision != w.Revision || !g.Stamp.Equal(w.Stamp) || g.Flags != w.Flags || g.Live() != (w.Flags == FlagLive) || len(g.Events) != len(w.Events) {
			t.Fatalf("revision %d: got %+v", w.Revision, g)
		}
		for j := range w.Events {
			if !proto.Equal(g.Events[j], w.Events[j]) {
				t.Errorf("revision %d event %d: %v, want %v", w.Revision, j, g.Events[j], w.Events[j])
			}
		}
	}
}

func TestEmptySegment(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{ClusterID: "cafe", After: 10})
	if err != nil {
		t.Fatal(err)
	}
	if w.Last() != 10 {
		t.Errorf("Last %d, want the header's 10", w.Last())
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, revs, _, err := readAll(buf.Bytes()); err != nil || len(revs) != 0 {
		t.Errorf("an empty segment: %d revisions, %v", len(revs), err)
	}
}

func TestWriterRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		rev  Revision
		want string
	}{
		{"a revision not after the last", Revision{Revision: 10, Events: []*mvccpb.Event{put("/a", "", 10, 10, 1, 0)}}, "revisions go up"},
		{"an empty revision", Revision{Revision: 11}, "no events"},
		{"an event of another revision", Revision{Revision: 11, Events: []*mvccpb.Event{put("/a", "", 9, 9, 1, 0)}}, "an event of revision 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewWriter(io.Discard, Header{After: 10})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Revision(tc.rev); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// Every cut of a segment short of its end is refused, never read as a shorter chain.
func TestTruncatedEverywhere(t *testing.T) {
	b, _ := sample(t)
	for n := range len(b) {
		_, _, _, err := readAll(b[:n])
		if err == nil {
			t.Fatalf("a segment cut at %d of %d bytes was read whole", n, len(b))
		}
	}
	_, _, _, err := readAll(b[:len(b)-1])
	if !errors.Is(err, ErrTruncated) {
		t.Errorf("cut before the trailer's last byte: %v, want ErrTruncated", err)
	}
}

// Every single flipped byte is refused: the frames decode wrongly, or the hash disagrees.
func TestAlteredEverywhere(t *testing.T) {
	b, _ := sample(t)
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x01
		if _, _, _, err := readAll(c); err == nil {
			t.Fatalf("a segment with byte %d of %d flipped was read", i, len(b))
		}
	}
}

func TestReaderRefuses(t *testing.T) {
	b, _ := sample(t)
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"another format", []byte("PK\x03\x04 a zip file"), "wrong magic"},
		{"empty", nil, "truncated segment"},
		{"bytes after the trailer", append(bytes.Clone(b), 0), "bytes after the trailer"},
		{"a newer format", newerFormat(t), "segment format 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := readAll(tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func newerFormat(t *testing.T) []byte {
	var buf bytes.Buffer
	buf.WriteString(magic)
	h := []byte(`{"formatVersion":2,"clusterID":"cafe","after":1}`)
	buf.WriteByte(kindHeader)
	buf.WriteByte(byte(len(h)))
	buf.Write(h)
	return buf.Bytes()
}

func TestName(t *testing.T) {
	n := Name(100, 180, t0, "zst", "age")
	if n != "00000000000000000100-00000000000000000180-1796392930123.seg.zst.age" {
		t.Fatalf("Name = %q", n)
	}
	p, err := ParseName("ns/c/_segments/" + n)
	if err != nil || p.After != 100 || p.Last != 180 || !p.LastStamp.Equal(t0.Truncate(time.Millisecond)) || strings.Join(p.Encodings, ",") != "zst,age" {
		t.Errorf("ParseName = %+v %v", p, err)
	}
	if p, err := ParseName(Name(0, 1, t0)); err != nil || p.Encodings != nil {
		t.Errorf("a plain segment: %+v %v", p, err)
	}
	// Names sort in revision order, whatever the stamps.
	if !(Name(9, 99, t0.Add(time.Hour)) < Name(99, 100, t0) && Name(99, 100, t0) < Name(100, 1000, t0)) {
		t.Error("names do not sort by revision")
	}
	for _, bad := range []string{"", "manifest.json", "100-180-1.seg", Name(5, 5, t0), Name(6, 5, t0),
		"00000000000000000100-00000000000000000180.seg", "00000000000000000100-00000000000000000180-1.segx",
		"0000000000000000010a-00000000000000000180-1.seg", "00000000000000000100-00000000000000000180--1.seg"} {
		if _, err := ParseName(bad); err == nil {
			t.Errorf("ParseName(%q) accepted", bad)
		}
	}
}
