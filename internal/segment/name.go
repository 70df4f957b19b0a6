package segment

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Dir is the directory of a cluster's segments under its backups' key (<namespace>/<cluster>):
// an underscore keeps it apart from every backup, whose names are DNS names.
const Dir = "_segments"

// Suffix ends every segment object's name; the object's encodings follow it (".zst", ".age").
const Suffix = ".seg"

// Name is a segment object's name under Dir: the revision it continues from, its last revision
// (both zero-padded, so names sort in revision order), its last revision's stamp in unix
// milliseconds, then Suffix and the encodings:
//
//	00000000000000000100-00000000000000000180-1796392930123.seg.zst.age
//
// A name says the range and where it ends in time without opening the object, so the restorable
// range and a time's revision come from one List.
func Name(after, last int64, lastStamp time.Time, encodings ...string) string {
	n := fmt.Sprintf("%020d-%020d-%d%s", after, last, lastStamp.UnixMilli(), Suffix)
	for _, e := range encodings {
		n += "." + e
	}
	return n
}

// Parsed is what a segment's name says.
type Parsed struct {
	After, Last int64
	LastStamp   time.Time
	// Encodings in the order they were applied ("zst", then "age").
	Encodings []string
}

// ParseName reads a segment object's name (its last path element).
func ParseName(name string) (Parsed, error) {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	bad := fmt.Errorf("%q is not a segment name", name)
	base, rest, ok := strings.Cut(name, Suffix)
	parts := strings.Split(base, "-")
	if !ok || len(parts) != 3 || len(parts[0]) != 20 || len(parts[1]) != 20 {
		return Parsed{}, bad
	}
	var p Parsed
	var err1, err2 error
	p.After, err1 = strconv.ParseInt(parts[0], 10, 64)
	p.Last, err2 = strconv.ParseInt(parts[1], 10, 64)
	ms, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || p.After < 0 || p.Last <= p.After || ms < 0 {
		return Parsed{}, bad
	}
	p.LastStamp = time.UnixMilli(ms).UTC()
	if rest != "" {
		if rest[0] != '.' {
			return Parsed{}, bad
		}
		p.Encodings = strings.Split(rest[1:], ".")
	}
	return p, nil
}
