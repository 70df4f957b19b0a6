//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The campaign's faults act on the local Kubernetes from the host, as root: a container is found
// by its ID in the cgroup paths of /proc, its network namespace entered with nsenter and cut off
// with iptables, its process killed or frozen with signals.

// containerPIDs are the host PIDs of a Pod's container.
func containerPIDs(p *corev1.Pod, container string) ([]int, error) {
	var id string
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container {
			_, id, _ = strings.Cut(s.ContainerID, "://")
		}
	}
	if id == "" {
		return nil, fmt.Errorf("pod %s: container %s has no ID (not started)", p.Name, container)
	}
	paths, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	var pids []int
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(data), id) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path))); err == nil {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("pod %s: no process of container %s", p.Name, id[:12])
	}
	return pids, nil
}

// processNamed is the container's process whose command is name (etcd, steward).
func processNamed(p *corev1.Pod, container, name string) (int, error) {
	pids, err := containerPIDs(p, container)
	if err != nil {
		return 0, err
	}
	for _, pid := range pids {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == name {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("pod %s: no %s process among %v", p.Name, name, pids)
}

// iptablesIn runs iptables in the network namespace of process pid.
func iptablesIn(pid int, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	full := append([]string{"-t", strconv.Itoa(pid), "-n", "iptables", "-w", "5"}, args...)
	if out, err := exec.CommandContext(ctx, "nsenter", full...).CombinedOutput(); err != nil {
		return fmt.Errorf("nsenter %s: %w: %s", strings.Join(full, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// cut drops a namespace's traffic by rules (iptables -I); heal deletes them. A rule gone with
// its namespace (the Pod was rebuilt meanwhile) is not an error: the fault ended with it.
type cut struct {
	pid   int
	rules [][]string
}

func (c *cut) apply() error {
	for _, r := range c.rules {
		if err := iptablesIn(c.pid, append([]string{"-I"}, r...)...); err != nil {
			return err
		}
	}
	return nil
}

func (c *cut) heal() {
	for _, r := range c.rules {
		_ = iptablesIn(c.pid, append([]string{"-D"}, r...)...)
	}
}

// partitionPod cuts a Pod off the network but for its loopback: no peer, client, probe or
// kubelet traffic in or out.
func partitionPod(p *corev1.Pod, container string) (*cut, error) {
	pids, err := containerPIDs(p, container)
	if err != nil {
		return nil, err
	}
	c := &cut{pid: pids[0], rules: [][]string{{"INPUT", "!", "-i", "lo", "-j", "DROP"}, {"OUTPUT", "!", "-o", "lo", "-j", "DROP"}}}
	return c, c.apply()
}

// partitionFrom cuts a Pod's outgoing connections to the given IPs only (the operator from the
// members, still reaching the API server).
func partitionFrom(p *corev1.Pod, container string, ips []string) (*cut, error) {
	pids, err := containerPIDs(p, container)
	if err != nil {
		return nil, err
	}
	c := &cut{pid: pids[0]}
	for _, ip := range ips {
		c.rules = append(c.rules, []string{"OUTPUT", "-d", ip, "-j", "REJECT"})
	}
	return c, c.apply()
}

// signalEtcd sends sig to a member's etcd process.
func signalEtcd(p *corev1.Pod, sig syscall.Signal) error {
	pid, err := processNamed(p, "etcd", "etcd")
	if err != nil {
		return err
	}
	return syscall.Kill(pid, sig)
}

// operatorPod is the running operator's Pod (the leader, when several run).
func operatorPod(ctx context.Context) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := f.Client.List(ctx, &pods, client.InNamespace(f.OperatorNamespace)); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no running operator Pod in %s", f.OperatorNamespace)
}

// restartAPIServer stops the local kube-apiserver and starts it again after down.
func restartAPIServer(down time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "../../hack/localkube/restart-apiserver.sh", strconv.Itoa(int(down.Seconds())))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("restart-apiserver.sh: %w: %s", err, out)
	}
	return nil
}
