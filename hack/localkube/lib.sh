# shellcheck shell=bash
# Shared settings of the local cluster (sourced by the other scripts): one control plane on
# the host, N nodes each in its own network namespace and cgroup (hack/localkube/nodes.sh).
# The measured recipe behind these choices: ../shared/localkube.md in the workspace.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
OUT=$ROOT/_out
LK=${LOCALKUBE_DIR:-$OUT/localkube}     # ALL runtime state; removed by cluster-down
LK_LOGS_LAST=$OUT/localkube-last-logs   # logs of the last stopped cluster, for post-mortems
LK_BIN=$OUT/bin/localkube               # coredns, provisioner, pause, images tool
IMAGES_DIR=$OUT/images                  # image archives imported at start
KUBECONFIG_ADMIN=$LK/kubeconfig

# Addresses: 198.18.0.0/15 is reserved for benchmarking and never routed, so it cannot
# collide with a real network. Pods get 198.18/16, node K the /24 198.18.K.0 on a bridge in
# its own network namespace; Services 198.19.0/17; the control plane's address (NODE_IP,
# the apiserver's) and DNS sit on lo as /32s (no `dummy` link type in this kernel), outside
# the Service range so the apiserver can never hand them out as ClusterIPs. Node K's own
# address is 198.19.130.K, on the node end of a veth pair whose host end is lkn<K>.
POD_CIDR=198.18.0.0/16
BRIDGE=lkbr0                            # host-side anchor: the S3 address and the Service route
BRIDGE_IP=198.18.0.1
SERVICE_CIDR=198.19.0.0/17
KUBERNETES_SVC_IP=198.19.0.1
NODE_IP=198.19.128.1
DNS_IP=198.19.128.10
NODE_NET=198.19.130                     # node K: $NODE_NET.K
NODE_POD_NET=198.18                     # node K's Pods: $NODE_POD_NET.K.0/24
NODE_BRIDGE=cbr0                        # the Pod bridge inside each node's namespace
NODE_PREFIX=node-                       # node names: node-1, node-2, ...; never reused
ZONES=(zone-a zone-b zone-c)            # node K is in ZONES[(K-1) % 3] unless told otherwise
NODES_DIR=$LK/nodes                     # one directory per node: its whole state
CGROUP_PARENT=localkube                 # each node's processes: /localkube/<node> in every hierarchy
POOL_KEY=localkube.steward.dev/pool     # label and NoSchedule taint of a node added to a pool
CLUSTER_DOMAIN=cluster.local
APISERVER_PORT=6443
ETCD_CLIENT_PORT=12379                  # control-plane etcd, loopback only; off the usual
ETCD_PEER_PORT=12380                    # 2379/2380 so a developer's own etcd is left alone
APISERVER_URL=https://127.0.0.1:$APISERVER_PORT
NODE_APISERVER_URL=https://$NODE_IP:$APISERVER_PORT  # as the nodes reach it

# The S3 server (versitygw, POSIX backend) runs on the host on the bridge's gateway address:
# Pods reach it through their default route, the host (the e2e tests) directly. Plain HTTP.
# Its endpoint, bucket, region and the root credentials generated at cluster-up are in
# $S3_ENV as STEWARD_S3_* lines (shell-sourceable).
S3_DIR=$LK/s3                           # data/ (one directory per bucket), meta/, env
S3_ENV=$S3_DIR/env
S3_PORT=17070                           # versitygw's usual 7070, moved off it like etcd's
S3_ENDPOINT=http://$BRIDGE_IP:$S3_PORT
S3_BUCKET=steward-backups
S3_REGION=us-east-1

PAUSE_IMAGE=registry.k8s.io/pause:3.10
OPERATOR_IMAGE=ghcr.io/etcd-steward/steward:dev
ETCD_IMAGE_REPO=gcr.io/etcd-development/etcd
CNI_BIN_DIR=/usr/lib/cni                # Debian's containernetworking-plugins

PIDS=$LK/pids

log() { printf '%s localkube: %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

need_root() { [[ $(id -u) == 0 ]] || die "must run as root (it starts kubelet, containerd, iptables)"; }

# toolchain KEY: one value of `hack/toolchain.sh versions`.
toolchain_var() {
  local line
  line=$("$ROOT/hack/toolchain.sh" versions | grep "^$1=") || die "toolchain.sh has no $1"
  eval "echo ${line#*=}"
}

# Kubernetes, etcd and versitygw binaries come from the foundation's toolchain script.
kube_bin() { "$ROOT/hack/toolchain.sh" path "$1"; }

# The nodes run containerd 2 (hack/toolchain.sh containerd): first on PATH, so the nodes'
# containerd, the runc shim it starts and ctr are its binaries, not Debian's 1.6 (which cannot
# mount image volumes). runc stays Debian's.
PATH=$("$ROOT/hack/toolchain.sh" versions | sed -n 's/^CONTAINERD_BIN_DIR=//p'):$PATH
export PATH

# etcd_versions: the built etcd versions, e.g. "v3.5.35 v3.6.16 v3.7.3 v3.6.10": one of each minor,
# then older patches for single tests (the e2e picks the first of a minor).
etcd_versions() {
  local k
  for k in ETCD_35_VERSION ETCD_36_VERSION ETCD_37_VERSION ETCD_36OLD_VERSION; do toolchain_var "$k"; done | xargs
}

# ---- processes -------------------------------------------------------------------------
# Every process we start is recorded as $PIDS/<name> holding "PID EXE"; stop_proc checks
# that the PID still runs that executable before signalling it (PIDs get reused).

# start_proc NAME CMD...: run CMD in its own session (so a Ctrl-C in the calling terminal
# does not take the cluster down with it), stdout+stderr to $LK/logs/NAME.log. START_EXE,
# when set, is the executable CMD ends up running (CMD is a wrapper that execs it).
start_proc() {
  local name=$1; shift
  mkdir -p "$PIDS" "$LK/logs"
  local exe
  exe=$(readlink -f "$(command -v "${START_EXE:-$1}")") || die "${START_EXE:-$1}: not found"
  setsid "$@" >>"$LK/logs/$name.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid $exe" >"$PIDS/$name"
  log "started $name (pid $pid)"
}

# alive NAME: the recorded process is still running its recorded executable.
alive() {
  local f=$PIDS/$1 pid exe
  [[ -f $f ]] || return 1
  read -r pid exe <"$f"
  [[ -n $pid && -d /proc/$pid ]] || return 1
  [[ $(readlink -f "/proc/$pid/exe" 2>/dev/null) == "$exe" ]]
}

# stop_proc NAME [GRACE_SECONDS]: SIGTERM, wait, then SIGKILL; forget the PID.
stop_proc() {
  local name=$1 grace=${2:-10} pid exe i
  if alive "$name"; then
    read -r pid exe <"$PIDS/$name"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
      alive "$name" || break
      sleep 0.1
    done
    if alive "$name"; then
      log "$name (pid $pid) ignored SIGTERM; killing"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.2
    fi
    log "stopped $name"
  fi
  rm -f "$PIDS/$name"
}

# unmount_under DIR: every mount under DIR, deepest first (lazily at the last try: a dying
# process may still hold one), then the loop devices over image files under DIR (the
# provisioner's XFS volumes).
unmount_under() {
  local m i dev file
  for i in 1 2 3; do
    mapfile -t mounts < <(awk -v p="$1/" 'index($5, p) == 1 {print $5}' /proc/self/mountinfo | sort -r)
    ((${#mounts[@]})) || break
    for m in "${mounts[@]}"; do
      umount "$m" 2>/dev/null || { ((i < 3)) || umount -l "$m" 2>/dev/null || true; }
    done
  done
  while read -r dev file; do
    [[ $file == "$1/"* ]] && losetup --detach "$dev" 2>/dev/null
  done < <(losetup --noheadings --output NAME,BACK-FILE 2>/dev/null)
  return 0
}

# wait_for DESC TIMEOUT_SECONDS CMD...: poll CMD every 0.25 s until it succeeds.
wait_for() {
  local desc=$1 timeout=$2 deadline; shift 2
  deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { log "timed out after ${timeout}s waiting for $desc"; return 1; }
    sleep 0.25
  done
}

# ---- nodes -----------------------------------------------------------------------------
# node K's state lives in $NODES_DIR/<name>/ with `index` (K) and `zone` files.

node_names() {
  local d
  for d in "$NODES_DIR"/"$NODE_PREFIX"*; do [[ -f $d/index ]] && basename "$d"; done
  return 0
}
node_index() { cat "$NODES_DIR/$1/index"; }
node_ip() { echo "$NODE_NET.$(node_index "$1")"; }
node_netns() { echo "lk-$1"; }
node_veth() { echo "lkn$(node_index "$1")"; }
node_sock() { echo "$NODES_DIR/$1/containerd/containerd.sock"; }
node_runc_root() { echo "$NODES_DIR/$1/runc"; }

# ctr_ NODE ARGS...: ctr against NODE's containerd, in the CRI's namespace.
ctr_() { local n=$1; shift; ctr --address "$(node_sock "$n")" --namespace k8s.io "$@"; }

# image_digest NODE REF: the manifest digest NODE's containerd holds for REF (empty when absent).
image_digest() { ctr_ "$1" images ls "name==$2" 2>/dev/null | awk 'NR == 2 {print $3}'; }

kctl() { "$(kube_bin kubectl)" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }

cluster_running() { alive kube-apiserver && [[ -n $(node_names) ]]; }
