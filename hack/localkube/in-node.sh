#!/usr/bin/env bash
# in-node.sh NODE CMD...: exec CMD as a process of NODE: moved into the node's cgroup in every
# v1 hierarchy (so its children, containerd's shims among them, are found and killed with the
# node) and into the node's network namespace only (nsenter --net; the mount namespace stays
# the host's, which the kubelet, containerd and the volume provisioner share).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
node=$1; shift
for h in /sys/fs/cgroup/*/; do
  d=$h$CGROUP_PARENT/$node
  [[ -d $d ]] && echo $$ >"$d/cgroup.procs"
done
exec nsenter --net="/run/netns/$(node_netns "$node")" -- "$@"
