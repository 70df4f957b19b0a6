#!/usr/bin/env bash
# Acts on the local cluster's nodes like a cloud provider and its failures would.
#
#   node.sh list                 nodes: name, index, zone, address, state
#   node.sh add [ZONE [POOL]]    a new node (next unused name), Ready; prints its name. A
#                                POOL node is labelled and tainted (NoSchedule)
#                                localkube.steward.dev/pool=POOL: only Pods tolerating it go there
#   node.sh stop NODE            power off: all its processes killed, its network down
#   node.sh start NODE           power on again (state kept, containers restart)
#   node.sh freeze|thaw NODE     every process of the node stopped (SIGSTOP-like) or resumed
#   node.sh cut|heal NODE        its network cut at the host while its processes live, or restored
#   node.sh delete NODE          the machine is deleted: stopped, its node-local volumes gone,
#                                its Node object deleted
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$ROOT/hack/localkube/pki.sh"
source "$ROOT/hack/localkube/config.sh"
source "$ROOT/hack/localkube/nodes.sh"

need_root
cluster_running || die "the local cluster is not running (make cluster-up)"
cmd=${1:-list}
node=${2:-}
if [[ $cmd != list && $cmd != add ]]; then
  [[ -n $node && -f $NODES_DIR/$node/index ]] || die "no node '$node' (node.sh list)"
fi

state() {
  local f
  f=$(cgroup_dir freezer "$1")/freezer.state
  if [[ -f $f && $(cat "$f") == FROZEN ]]; then echo frozen; return; fi
  if ! alive "$1.kubelet"; then echo stopped; return; fi
  if iptables -S LK-CUT 2>/dev/null | grep -q -- "-s $(node_ip "$1")/32 "; then echo cut; return; fi
  echo running
}

case $cmd in
  list)
    printf '%-10s %-6s %-8s %-14s %-8s %s\n' NODE INDEX ZONE ADDRESS STATE POOL
    for n in $(node_names); do
      printf '%-10s %-6s %-8s %-14s %-8s %s\n' "$n" "$(node_index "$n")" "$(cat "$NODES_DIR/$n/zone")" "$(node_ip "$n")" \
        "$(state "$n")" "$(cat "$NODES_DIR/$n/pool" 2>/dev/null || echo -)"
    done
    ;;
  add)
    n=$(node_add "$node" "${3:-}")
    wait_for "node $n Ready" 120 node_ready "$n"
    echo "$n"
    ;;
  stop) node_stop "$node" ;;
  start) node_start "$node" ;;
  freeze) node_freeze "$node"; log "node $node frozen" ;;
  thaw) node_thaw "$node"; log "node $node thawed" ;;
  cut) node_cut "$node"; log "node $node cut off" ;;
  heal) node_uncut "$node"; log "node $node reachable again" ;;
  delete) node_delete "$node" ;;
  *) die "unknown command $cmd (see the header of $0)" ;;
esac
