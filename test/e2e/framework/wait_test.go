package framework

import (
	"testing"
	"time"
)

func TestPollIntervalBacksOffOnce(t *testing.T) {
	for _, tc := range []struct {
		waited, want time.Duration
	}{
		{0, 250 * time.Millisecond},
		{29 * time.Second, 250 * time.Millisecond},
		{30 * time.Second, 500 * time.Millisecond},
		{10 * time.Minute, 500 * time.Millisecond}, // never slower: a state may last a second
	} {
		if got := pollInterval(tc.waited); got != tc.want {
			t.Errorf("after %s: %s, want %s", tc.waited, got, tc.want)
		}
	}
}
