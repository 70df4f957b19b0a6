package ports

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// helperLow..helperHigh (exclusive) is the helper's range: just above Free's, so that no other
// test process, picking from Free's range meanwhile, can hold one of them (CI once saw "only 3 of 4
// free loopback ports in 31990-31993" when the range lay inside Free's), and below the ephemeral
// range.
const helperLow, helperHigh = High, High + 4

// The helper process reserves every port of a small range and waits for its stdin to close.
func TestMain(m *testing.M) {
	if os.Getenv("PORTS_HELPER") != "" {
		got, err := pick(helperLow, helperHigh, 4)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("reserved", got)
		_, _ = os.Stdin.Read(make([]byte, 1))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The CI failure: another process's port, free again after its etcd was killed, must not be
// handed out here.
func TestPortsOfAnotherProcessAreNotHandedOut(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PORTS_HELPER=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	line := make([]byte, 200)
	n, _ := out.Read(line)
	if !strings.HasPrefix(string(line[:n]), "reserved") {
		t.Fatalf("helper: %q", line[:n])
	}
	// The helper listens on none of them: only the reservation keeps them from us.
	if got, err := pick(helperLow, helperHigh, 1); err == nil {
		t.Fatalf("got port %v, reserved by another process", got)
	}
	_ = stdin.Close()
	_ = cmd.Wait()
	if got, err := pick(helperLow, helperHigh, 4); err != nil || len(got) != 4 {
		t.Fatalf("after the other process exited: %v, %v", got, err)
	}
}

func TestPortsAreFreeAndDistinct(t *testing.T) {
	got, err := Free(50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range got {
		if seen[p] || p < Low || p >= High {
			t.Fatalf("port %d repeated or out of range", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("port %d not free: %v", p, err)
		}
		_ = l.Close()
	}
	more, err := Free(1)
	if err != nil || seen[more[0]] {
		t.Fatalf("a port handed out twice in one process: %v, %v", more, err)
	}
}
