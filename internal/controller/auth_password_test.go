package controller

import (
	"fmt"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// A password's comparison is remembered, right or wrong, and what is remembered stays bounded: every
// password change leaves an entry behind, and the operator runs for months.
func TestPasswordMatchesRemembersBounded(t *testing.T) {
	h, err := bcrypt.GenerateFromPassword([]byte("right"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	recorded := string(h)
	if !passwordMatches(recorded, []byte("right")) || passwordMatches(recorded, []byte("wrong")) {
		t.Fatal("the comparison itself is wrong")
	}
	if passwordMatches("", []byte("")) {
		t.Error("no recorded digest matched an empty password")
	}
	for i := range matchedSize + 100 {
		passwordMatches(recorded, fmt.Appendf(nil, "guess-%d", i))
	}
	if n := matched.Len(); n > matchedSize {
		t.Errorf("%d comparisons remembered, more than %d", n, matchedSize)
	}
	if !passwordMatches(recorded, []byte("right")) {
		t.Error("the right password no longer matches after the cache turned over")
	}
}
