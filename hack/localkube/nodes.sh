# shellcheck shell=bash
# The nodes of the local cluster (sourced after lib.sh, pki.sh and config.sh). Each node is a
# kubelet, a containerd and a kube-proxy in the node's own network namespace (entered with
# nsenter --net only: `ip netns exec` would also give them a mount namespace of their own, and
# the kubelet's volume mounts must be seen by containerd and the host), in the node's own cgroup
# (/localkube/<node> in every v1 hierarchy: its kubepods live under it and so do the container
# shims, so stopping a node kills all of it), with state under $NODES_DIR/<node>/.
#
# Network: node K's namespace holds eth0 = $NODE_NET.K/32 (a veth whose host end is lkn<K>,
# with no address: the host answers for $NODE_IP on it) and the Pod bridge $NODE_BRIDGE with
# $NODE_POD_NET.K.1/24. The host routes $NODE_NET.K and $NODE_POD_NET.K.0/24 to lkn<K>; each
# node's default route is the host. So everything reaches everything, through the host, where
# a partition is one iptables chain (LK-CUT).

source "$ROOT/hack/localkube/image-template.sh"

CGROUP_HIERARCHIES=(cpu cpuacct cpuset memory pids blkio devices freezer systemd)

# cgroup_dir HIERARCHY NODE
cgroup_dir() { echo "/sys/fs/cgroup/$1/$CGROUP_PARENT/$2"; }

node_make_cgroups() {
  local h d
  for h in "${CGROUP_HIERARCHIES[@]}"; do
    [[ -d /sys/fs/cgroup/$h ]] || continue
    d=$(cgroup_dir "$h" "$1")
    mkdir -p "$d"
    if [[ $h == cpuset ]]; then
      # A cpuset cgroup takes no process until it has CPUs and memory nodes.
      cat "/sys/fs/cgroup/cpuset/cpuset.cpus" >"/sys/fs/cgroup/cpuset/$CGROUP_PARENT/cpuset.cpus"
      cat "/sys/fs/cgroup/cpuset/cpuset.mems" >"/sys/fs/cgroup/cpuset/$CGROUP_PARENT/cpuset.mems"
      cat "/sys/fs/cgroup/cpuset/cpuset.cpus" >"$d/cpuset.cpus"
      cat "/sys/fs/cgroup/cpuset/cpuset.mems" >"$d/cpuset.mems"
    fi
  done
}

# node_pids NODE: every process in the node's cgroup tree (kubelet, containerd, shims, containers).
node_pids() {
  local d
  d=$(cgroup_dir pids "$1")
  [[ -d $d ]] || return 0
  find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u
}

# node_exec NODE CMD...: CMD inside NODE's network namespace (and mount namespace of the host).
node_exec() { local n=$1; shift; nsenter --net="/run/netns/$(node_netns "$n")" -- "$@"; }

# node_start_proc NODE NAME CMD...: start CMD as a process of NODE: in its cgroup and namespace.
node_start_proc() {
  local node=$1 name=$2; shift 2
  START_EXE=$1 start_proc "$node.$name" "$ROOT/hack/localkube/in-node.sh" "$node" "$@"
}

node_network_up() {
  local node=$1 k ns veth ip
  k=$(node_index "$node"); ns=$(node_netns "$node"); veth=$(node_veth "$node"); ip=$(node_ip "$node")
  [[ -e /run/netns/$ns ]] || ip netns add "$ns"
  if ! ip link show "$veth" >/dev/null 2>&1; then
    ip link add "$veth" type veth peer name eth0 netns "$ns"
  fi
  ip link set "$veth" up
  node_exec "$node" ip link set lo up
  node_exec "$node" ip link set eth0 up
  node_exec "$node" ip addr replace "$ip/32" dev eth0
  node_exec "$node" ip route replace "$NODE_IP/32" dev eth0
  node_exec "$node" ip route replace default via "$NODE_IP" dev eth0 onlink
  ip route replace "$ip/32" dev "$veth" src "$NODE_IP"
  ip route replace "$NODE_POD_NET.$k.0/24" via "$ip" dev "$veth" onlink
  node_exec "$node" sysctl -qw net.ipv4.ip_forward=1
  node_exec "$node" sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
}

node_network_down() {
  local node=$1
  ip link set "$(node_veth "$node")" down 2>/dev/null || true
  node_exec "$node" ip link set eth0 down 2>/dev/null || true
}

# node_processes_start NODE [NEW]: containerd, then kubelet and kube-proxy. Images must be in
# containerd before the kubelet runs Pods (they cannot be pulled): a NEW node's containerd root
# starts as a copy of the image template (image-template.sh); a restarted node still has them.
node_processes_start() {
  local node=$1 new=${2:-0} d=$NODES_DIR/$1
  ((new)) && template_clone "$node"
  node_start_proc "$node" containerd containerd --config "$d/containerd/config.toml" --log-level warn
  wait_for "$node's containerd" 30 ctr --address "$(node_sock "$node")" version
  local labels taints=() pool
  labels="topology.kubernetes.io/zone=$(cat "$d/zone")"
  pool=$(cat "$d/pool" 2>/dev/null || true)
  if [[ -n $pool ]]; then
    labels+=",$POOL_KEY=$pool"
    taints=(--register-with-taints "$POOL_KEY=$pool:NoSchedule")
  fi
  node_start_proc "$node" kubelet "$(kube_bin kubelet)" --config "$d/kubelet/config.yaml" \
    --kubeconfig "$d/kubelet.kubeconfig" --root-dir "$d/kubelet/root" \
    --hostname-override "$node" --node-ip "$(node_ip "$node")" \
    --node-labels "$labels" "${taints[@]}" --v=1
  node_start_proc "$node" kube-proxy "$(kube_bin kube-proxy)" --config "$d/kube-proxy.yaml" --v=1
}

# node_load_images NODE [ARCHIVE...]: import image archives (default: all) into NODE's containerd.
node_load_images() {
  local node=$1 a; shift
  (($#)) || set -- "$IMAGES_DIR"/*.tar
  for a in "$@"; do
    ctr_ "$node" images import --no-unpack=false "$a" >/dev/null || die "importing $a into $node failed"
  done
}

node_ready() {
  [[ $(kctl get node "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}') == True ]]
}

# node_add [ZONE [POOL]]: a new node, named after the next index (names are never reused),
# started. Prints its name. A POOL node is labelled and tainted $POOL_KEY=POOL (NoSchedule):
# only Pods that tolerate it run there, so a test can stop, cut or delete its own nodes
# without touching the Pods of tests running beside it.
node_add() {
  local k node zone
  mkdir -p "$NODES_DIR"
  # Tests add nodes concurrently: the index is taken under a lock.
  k=$(
    exec 9>"$NODES_DIR/.lock"
    flock 9
    k=$(($(cat "$NODES_DIR/.last" 2>/dev/null || echo 0) + 1))
    echo "$k" >"$NODES_DIR/.last"
    echo "$k"
  )
  ((k <= 254)) || die "no node index left"
  node=$NODE_PREFIX$k
  zone=${1:-${ZONES[$(((k - 1) % ${#ZONES[@]}))]}}
  mkdir -p "$NODES_DIR/$node"
  echo "$zone" >"$NODES_DIR/$node/zone"
  [[ -z ${2:-} ]] || echo "$2" >"$NODES_DIR/$node/pool"
  echo "$k" >"$NODES_DIR/$node/index"
  node_pki "$node"
  write_containerd_config "$node"
  write_kubelet_config "$node"
  write_kube_proxy_config "$NODES_DIR/$node/kube-proxy.yaml" "$node" "$LK/kubeconfigs/node-kube-proxy"
  node_make_cgroups "$node"
  node_network_up "$node"
  node_processes_start "$node" 1
  log "node $node ($zone, $(node_ip "$node")) started"
  echo "$node"
}

# node_kill NODE: every process of the node dies at once (SIGKILL to its whole cgroup tree,
# thawed first so frozen ones die too), as when a machine loses power.
node_kill() {
  local node=$1 pid i
  node_thaw "$node"
  for i in 1 2 3 4 5; do
    local pids
    pids=$(node_pids "$node")
    [[ -n $pids ]] || break
    for pid in $pids; do kill -KILL "$pid" 2>/dev/null || true; done
    sleep 0.2
  done
  for pid in containerd kubelet kube-proxy; do rm -f "$PIDS/$node.$pid"; done
}

# node_stop NODE: the machine goes off: processes killed, network down. Its Node object stays.
node_stop() {
  node_kill "$1"
  node_network_down "$1"
  log "node $1 stopped"
}

# node_start NODE: a stopped node comes back with its state (containers restart as after a reboot).
node_start() {
  local node=$1
  [[ -f $NODES_DIR/$node/index ]] || die "no node $node"
  node_uncut "$node"
  node_network_up "$node"
  # runc's records of containers that died with the node; the kubelet starts them anew.
  local c root
  root=$(node_runc_root "$node")
  for c in $(runc --root "$root" list -q 2>/dev/null); do runc --root "$root" delete -f "$c" >/dev/null 2>&1 || true; done
  node_processes_start "$node"
  log "node $node started"
}

node_freeze() { local d; d=$(cgroup_dir freezer "$1"); [[ ! -d $d ]] || echo FROZEN >"$d/freezer.state"; }
node_thaw() { local d; d=$(cgroup_dir freezer "$1"); [[ ! -d $d ]] || echo THAWED >"$d/freezer.state"; }

# node_cut NODE: the node's network is cut at the host (to and from the node and its Pods), its
# processes live on: a partition. Traffic between the node's own Pods still flows.
node_cut() {
  local k
  k=$(node_index "$1")
  iptables -N LK-CUT 2>/dev/null || true
  local c
  for c in INPUT OUTPUT FORWARD; do
    iptables -C "$c" -j LK-CUT 2>/dev/null || iptables -I "$c" -j LK-CUT
  done
  local net
  for net in "$(node_ip "$1")/32" "$NODE_POD_NET.$k.0/24"; do
    iptables -C LK-CUT -s "$net" -j DROP 2>/dev/null || iptables -A LK-CUT -s "$net" -j DROP
    iptables -C LK-CUT -d "$net" -j DROP 2>/dev/null || iptables -A LK-CUT -d "$net" -j DROP
  done
}

node_uncut() {
  local k net
  k=$(node_index "$1")
  for net in "$(node_ip "$1")/32" "$NODE_POD_NET.$k.0/24"; do
    while iptables -D LK-CUT -s "$net" -j DROP 2>/dev/null; do :; done
    while iptables -D LK-CUT -d "$net" -j DROP 2>/dev/null; do :; done
  done
}

# node_remove NODE: the node's processes, network, cgroups, mounts and state are gone from the
# host (the Node object and the node's volumes are node_delete's business).
node_remove() {
  local node=$1 h
  node_kill "$node"
  node_uncut "$node"
  ip netns del "$(node_netns "$node")" 2>/dev/null || true
  ip link del "$(node_veth "$node")" 2>/dev/null || true
  # Pod volumes, overlay root filesystems, Pod network namespaces.
  unmount_under "$NODES_DIR/$node"
  for h in "${CGROUP_HIERARCHIES[@]}"; do
    [[ -d $(cgroup_dir "$h" "$node") ]] || continue
    find "$(cgroup_dir "$h" "$node")" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  rm -rf --one-file-system "${NODES_DIR:?}/$node"
  rm -f "$LK/pki/kubelet-$node.key" "$LK/pki/kubelet-$node.crt"
}

# node_delete NODE: the cloud deletes the machine: it stops, its local volumes are gone with it,
# and its Node object is deleted (what a cloud controller manager does).
node_delete() {
  local node=$1
  node_remove "$node"
  unmount_under "$LK/pv/$node"
  rm -rf --one-file-system "${LK:?}/pv/$node"
  kctl delete node "$node" --ignore-not-found --wait=false >/dev/null
  log "node $node deleted"
}
