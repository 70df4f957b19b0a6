package replay

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"

	"github.com/etcd-steward/steward/internal/segment"
)

// synthetic is a consistent history on an empty database: puts over a working set of keys (a
// create, then versions), every tenth revision a 3-change transaction.
type synthetic struct {
	n, rev  int64
	created map[string][2]int64 // key -> create revision, version
	value   []byte
}

func (s *synthetic) put(key string) *mvccpb.Event {
	c, ok := s.created[key]
	if !ok {
		c = [2]int64{s.rev, 0}
	}
	c[1]++
	s.created[key] = c
	return &mvccpb.Event{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: s.value, CreateRevision: c[0], ModRevision: s.rev, Version: c[1]}}
}

func (s *synthetic) Next() (*segment.Revision, *segment.Lease, error) {
	if s.rev-1 >= s.n {
		return nil, nil, io.EOF
	}
	s.rev++
	r := &segment.Revision{Revision: s.rev, Stamp: time.Unix(0, s.rev)}
	r.Events = append(r.Events, s.put(fmt.Sprintf("/bench/%05d", s.rev%5000)))
	if s.rev%10 == 0 {
		r.Events = append(r.Events, s.put(fmt.Sprintf("/bench/t%05d", s.rev%777)), s.put(fmt.Sprintf("/bench/u%05d", s.rev%333)))
	}
	return r, nil, nil
}

// BenchmarkReplay reports the replay rate in revisions per second (a segment's decoding not
// included): `go test ./internal/replay -run x -bench Replay -benchtime 20000x`. Values are 256
// bytes; STEWARD_REPLAY_VALUE_BYTES sets another size (1024 with -benchtime 1000000x replays
// about 1.2 GiB of values).
func BenchmarkReplay(b *testing.B) {
	size := 256
	if v, err := strconv.Atoi(os.Getenv("STEWARD_REPLAY_VALUE_BYTES")); err == nil && v > 0 {
		size = v
	}
	path := filepath.Join(b.TempDir(), "db")
	be := backend.NewDefaultBackend(zap.NewNop(), path)
	s := mvcc.NewStore(zap.NewNop(), be, nil, mvcc.StoreConfig{}) // an empty database at revision 1
	_ = s.Close()
	_ = be.Close()
	src := &synthetic{n: int64(b.N), rev: 1, created: map[string][2]int64{}, value: make([]byte, size)}
	b.ResetTimer()
	start := time.Now()
	res, err := Apply(context.Background(), path, src, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(res.Revisions)/time.Since(start).Seconds(), "revisions/s")
	b.ReportMetric(float64(res.Events)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(float64(res.Events)*float64(size)/(1<<20)/time.Since(start).Seconds(), "value-MiB/s")
}
