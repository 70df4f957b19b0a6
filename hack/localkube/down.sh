#!/usr/bin/env bash
# Stops the local cluster and removes everything it left on the host: processes (by the
# PIDs up.sh recorded, the S3 server among them, plus containerd shims and runc containers
# found by our state paths), mounts under the state directory, iptables chains, the bridge,
# the addresses on lo, kubelet's cgroups, and finally the state directory itself (with the
# S3 server's buckets). Safe to run repeatedly and after a failed or crashed start. The
# last cluster's logs go to _out/localkube-last-logs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$ROOT/hack/localkube/nodes.sh"

need_root

# pids_matching STRING: PIDs whose command line contains STRING (our unique state path),
# so leftovers of *this* cluster are found without matching on a program name.
pids_matching() {
  local p
  for p in /proc/[0-9]*; do
    [[ ${p#/proc/} != "$$" ]] || continue
    [[ $(tr '\0' ' ' 2>/dev/null <"$p/cmdline") == *"$1"* ]] && echo "${p#/proc/}"
  done
  return 0
}

# stop_workloads NODE: kill every container through containerd first: shims exit cleanly
# and remove their sockets in /run/containerd/s.
stop_workloads() {
  if alive "$1.containerd"; then
    local t
    for t in $(ctr_ "$1" tasks ls -q 2>/dev/null); do ctr_ "$1" tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true; done
    sleep 0.5
    for t in $(ctr_ "$1" tasks ls -q 2>/dev/null); do ctr_ "$1" tasks delete -f "$t" >/dev/null 2>&1 || true; done
  fi
}

stop_leftovers() {
  local pid c root n
  # containerd-shim-runc-v2 processes outlive containerd; they carry our state path (and
  # a node's cgroup holds them: node_kill).
  for n in $(node_names); do node_kill "$n"; done
  for pid in $(pids_matching "$NODES_DIR/"); do
    log "killing leftover process $pid"
    kill -KILL "$pid" 2>/dev/null || true
  done
  for root in "$NODES_DIR"/*/runc; do
    [[ -d $root ]] || continue
    for c in $(runc --root "$root" list -q 2>/dev/null); do
      log "removing leftover runc container $c"
      runc --root "$root" kill "$c" KILL >/dev/null 2>&1 || true
      runc --root "$root" delete -f "$c" >/dev/null 2>&1 || true
    done
  done
}

unmount_all() {
  [[ -d $LK ]] || return 0
  unmount_under "$LK"
}

# Chains of kube-proxy and kubelet (KUBE-*), of CNI plugins (CNI-*) and of node.sh's
# partitions (LK-*), IPv4 and IPv6. The nodes' own chains go with their namespaces.
clean_iptables() {
  local ipt table chains c rule
  for ipt in iptables ip6tables; do
    command -v "$ipt" >/dev/null || continue
    for table in filter nat mangle raw; do
      chains=$("$ipt" -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^(KUBE-|CNI-|LK-)/ {print $2}') || continue
      [[ -n $chains ]] || continue
      # Rules in built-in chains that jump into ours.
      "$ipt" -t "$table" -S | awk '$1 == "-A" && $2 !~ /^(KUBE-|CNI-|LK-)/ && / -j (KUBE-|CNI-|LK-)/' |
        while read -r rule; do
          eval "$ipt -t $table ${rule/-A/-D}" 2>/dev/null || true
        done
      for c in $chains; do "$ipt" -t "$table" -F "$c" 2>/dev/null || true; done
      for c in $chains; do "$ipt" -t "$table" -X "$c" 2>/dev/null || true; done
    done
  done
}

clean_network() {
  # A Pod's veth goes away with its network namespace, but a namespace lives on while
  # an orphaned TCP socket in it retransmits to a peer that died with it (minutes).
  # Delete our bridge's ports ourselves; the hidden namespace then holds nothing visible.
  local v ns
  for v in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    ip link del "$v" 2>/dev/null || true
  done
  if ip link show "$BRIDGE" >/dev/null 2>&1; then ip link del "$BRIDGE"; fi
  # The nodes' namespaces (their Pod bridges and veths go with them) and host veth ends.
  for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^lk-/ {print $1}'); do
    ip netns del "$ns" 2>/dev/null || true
  done
  for v in $(ip -o link show 2>/dev/null | awk -F': ' '$2 ~ /^lkn[0-9]+@/ {print $2}' | cut -d@ -f1); do
    ip link del "$v" 2>/dev/null || true
  done
  local a
  for a in "$NODE_IP" "$DNS_IP"; do
    # (Not `ip … | grep -q`: grep quitting early makes ip die of SIGPIPE, and with
    # pipefail the match reads as a failure.)
    [[ $(ip -4 addr show dev lo) == *" $a/32 "* ]] && ip addr del "$a/32" dev lo
  done
  # Leftover veths of Pods whose namespaces died with their bridge go by themselves; any
  # still named like CNI's (vethXXXXXXXX) and bridged to nothing are not ours to judge.
  if [[ -f $LK/sysctl.orig ]]; then
    local kv
    while read -r kv; do sysctl -qw "$kv" || true; done <"$LK/sysctl.orig"
  fi
  return 0
}

# The nodes' cgroups (/localkube/<node>, kubelet's kubepods under each) in each v1
# hierarchy, and kubepods/ at the root left by a single-node cluster of older scripts.
clean_cgroups() {
  local d
  for d in /sys/fs/cgroup/*/"$CGROUP_PARENT" /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [[ -d $d ]] || continue
    find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}

# Files the components insist on writing outside their configured directories.
clean_host_files() {
  local l
  if [[ -d /var/log/containers ]]; then
    for l in /var/log/containers/*; do
      # Ours, or dangling ones of a local cluster from another checkout.
      if [[ -L $l && ($(readlink "$l") == "$LK/"* || (! -e $l && $(readlink "$l") == */localkube/*kubelet/pod-logs/*)) ]]; then
        rm -f "$l"
      fi
    done
    if [[ -f $LK/created-var-log-containers ]]; then rmdir /var/log/containers 2>/dev/null || true; fi
  fi
  # libcni's result cache: one file per sandbox for our network and one for loopback,
  # both named after the sandbox ID.
  local r id
  for r in /var/lib/cni/results/localkube-*; do
    [[ -e $r ]] || continue
    id=${r#*/localkube-}; id=${id%-*}
    rm -f "$r" "/var/lib/cni/results/cni-loopback-$id-lo"
  done
  if [[ -f $LK/created-var-lib-cni ]]; then
    rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null || true
  fi
  # Sockets of shims that were killed rather than stopped (nobody listens on them).
  local sock listening
  listening=$(ss -xlH 2>/dev/null)
  for sock in /run/containerd/s/*; do
    [[ -S $sock && $listening != *"$sock"* ]] && rm -f "$sock"
  done
  if [[ -f $LK/created-run-containerd ]]; then
    rmdir /run/containerd/s /run/containerd/runc/k8s.io /run/containerd/runc /run/containerd/fifo \
      /run/containerd 2>/dev/null || true
  fi
  return 0
}

main() {
  local start=$SECONDS n
  if [[ ! -d $LK ]]; then
    log "no cluster state in $LK"
  fi
  # Nodes and add-ons first so nothing restarts containers while we remove them.
  for n in $(node_names); do
    stop_proc "$n.kubelet" 10
    stop_proc "$n.kube-proxy" 5
  done
  for n in provisioner coredns kube-proxy kube-scheduler kube-controller-manager versitygw; do
    stop_proc "$n" 10
  done
  for n in $(node_names); do
    stop_workloads "$n"
    stop_proc "$n.containerd" 10
  done
  stop_leftovers
  stop_proc kube-apiserver 15
  stop_proc etcd 10
  if [[ -d $PIDS ]]; then
    for n in "$PIDS"/*; do
      if [[ -e $n ]]; then stop_proc "$(basename "$n")" 5; fi
    done
  fi

  unmount_all
  clean_iptables
  clean_network
  clean_cgroups
  clean_host_files

  if [[ -d $LK ]]; then
    if awk -v p="$LK/" 'index($5, p) == 1 {found = 1} END {exit !found}' /proc/self/mountinfo; then
      die "mounts remain under $LK; not removing it (see /proc/self/mountinfo)"
    fi
    rm -rf "$LK_LOGS_LAST"
    [[ -d $LK/logs ]] && mv "$LK/logs" "$LK_LOGS_LAST"
    rm -rf --one-file-system "$LK"
  fi
  log "cluster down in $((SECONDS - start))s (last logs: $LK_LOGS_LAST)"
}

main "$@"
