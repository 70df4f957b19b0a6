package segment

import (
	"fmt"
	"strconv"
	"strings"
)

// Dir is the directory of a cluster's segments under its backups' key (<namespace>/<cluster>):
// an underscore keeps it apart from every backup, whose names are DNS names.
const Dir = "_segments"

// Suffix ends every segment object's name; the object's encodings follow it (".zst", ".age").
const Suffix = ".seg"

// Name is a segment object's name under Dir: after and last, zero-padded so that names sort in
// revision order, then Suffix and the encodings ("00000000000000000100-00000000000000000180.seg.zst").
// A name says the range without opening the object, so the restorable range is one List.
func Name(after, last int64, encodings ...string) string {
	n := fmt.Sprintf("%020d-%020d%s", after, last, Suffix)
	for _, e := range encodings {
		n += "." + e
	}
	return n
}

// ParseName reads a segment object's name (its last path element): the revision it continues
// from, its last revision, and its encodings in the order they were applied.
func ParseName(name string) (after, last int64, encodings []string, err error) {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	base, rest, ok := strings.Cut(name, Suffix)
	a, l, ok2 := strings.Cut(base, "-")
	if !ok || !ok2 || len(a) != 20 || len(l) != 20 {
		return 0, 0, nil, fmt.Errorf("%q is not a segment name", name)
	}
	if after, err = strconv.ParseInt(a, 10, 64); err != nil {
		return 0, 0, nil, fmt.Errorf("%q is not a segment name", name)
	}
	if last, err = strconv.ParseInt(l, 10, 64); err != nil || last <= after || after < 0 {
		return 0, 0, nil, fmt.Errorf("%q is not a segment name", name)
	}
	if rest != "" {
		if rest[0] != '.' {
			return 0, 0, nil, fmt.Errorf("%q is not a segment name", name)
		}
		encodings = strings.Split(rest[1:], ".")
	}
	return after, last, encodings, nil
}
