#!/usr/bin/env bash
# Starts the local Kubernetes from the binaries build.sh made, all state in _out/localkube/:
# a control plane on the host and NODES nodes (default 1; the e2e suite takes 3), each in its
# own network namespace and cgroup (nodes.sh), node K in zone ZONES[(K-1) % 3]. Returns once
# every node is Ready, DNS answers, the StorageClasses and the `default` ServiceAccount exist.
# Refuses to start twice; stop with down.sh.
#
# Order: the S3 server, control-plane etcd -> kube-apiserver -> (ready) controller-manager,
# scheduler, the host's kube-proxy, CoreDNS, provisioner -> the nodes (containerd, images,
# kubelet, kube-proxy each) -> waits (and the S3 server's bucket).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$ROOT/hack/localkube/pki.sh"
source "$ROOT/hack/localkube/config.sh"
source "$ROOT/hack/localkube/nodes.sh"

need_root
START=$SECONDS
NODES=${NODES:-1}
[[ $NODES =~ ^[1-9][0-9]?$ ]] || die "NODES=$NODES: want 1 to 99"

preflight() {
  local n b
  if [[ -d $PIDS ]]; then
    for n in "$PIDS"/*; do
      if [[ -e $n ]] && alive "$(basename "$n")"; then
        die "the cluster is already running (KUBECONFIG=$KUBECONFIG_ADMIN); 'make cluster-down' first"
      fi
    done
  fi
  for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
    kube_bin "$b" >/dev/null || die "$b is not built: run hack/localkube/build.sh"
  done
  for b in coredns provisioner; do
    [[ -x $LK_BIN/$b ]] || die "$LK_BIN/$b is not built: run hack/localkube/build.sh"
  done
  kube_bin versitygw >/dev/null || die "versitygw is not built: run hack/localkube/build.sh"
  [[ -f $IMAGES_DIR/pause.tar ]] || die "no image archives in $IMAGES_DIR: run hack/localkube/build.sh"
  for b in containerd runc iptables; do
    command -v "$b" >/dev/null || die "$b is not installed: run hack/localkube/build.sh (packages, containerd)"
  done
  # A cluster of another checkout (same addresses) or anything else on our ports.
  if [[ -n $(ss -ltnH "( sport = :$APISERVER_PORT or sport = :$ETCD_CLIENT_PORT or sport = :$S3_PORT )") ]]; then
    die "ports $APISERVER_PORT/$ETCD_CLIENT_PORT/$S3_PORT are in use (another local cluster?)"
  fi
  # Remains of a cluster whose processes were killed (a stopped session, a reboot without
  # cluster-down): clean them rather than make the user do it.
  if [[ -e $LK ]]; then
    log "cleaning up the remains of a cluster that is no longer running"
    "$ROOT/hack/localkube/down.sh"
  fi
  # The same from another checkout: its state directory is unknown, the host-wide parts
  # (bridge, addresses, iptables chains) are not.
  if ip link show "$BRIDGE" >/dev/null 2>&1 || [[ $(ip -4 addr show dev lo) == *" $NODE_IP/32 "* ]]; then
    log "cleaning up host network state left by another local cluster"
    LOCALKUBE_DIR=$OUT/.no-such-localkube "$ROOT/hack/localkube/down.sh"
  fi
}

# Host networking: sysctls (old values saved for down.sh), the control plane's and DNS
# addresses on lo, and a bridge with no ports that holds the S3 server's address and anchors
# the Service route (the host's kube-proxy rewrites Service addresses to Pod addresses, which
# the nodes' routes then carry).
setup_host() {
  mkdir -p "$LK"
  local k
  : >"$LK/sysctl.orig"
  modprobe br_netfilter 2>/dev/null || true
  for k in net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables; do
    echo "$k=$(sysctl -n "$k")" >>"$LK/sysctl.orig"
    sysctl -qw "$k=1"
  done
  ip addr add "$NODE_IP/32" dev lo
  ip addr add "$DNS_IP/32" dev lo
  ip link add "$BRIDGE" type bridge
  ip addr add "$BRIDGE_IP/32" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  # Services too, via the bridge, whatever the host's default route is.
  ip route add "$SERVICE_CIDR" dev "$BRIDGE" src "$NODE_IP"
  [[ -d /var/log/containers ]] || touch "$LK/created-var-log-containers"
  [[ -d /run/containerd ]] || touch "$LK/created-run-containerd"
  [[ -d /var/lib/cni ]] || touch "$LK/created-var-lib-cni"
}

start_etcd() {
  start_proc etcd "$(kube_bin etcd)" --name localkube --data-dir "$LK/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "localkube=http://127.0.0.1:$ETCD_PEER_PORT" \
    --listen-metrics-urls "" --unsafe-no-fsync --quota-backend-bytes 4294967296 \
    --log-level warn
}

start_apiserver() {
  start_proc kube-apiserver "$(kube_bin kube-apiserver)" \
    --etcd-servers "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --bind-address 0.0.0.0 --secure-port "$APISERVER_PORT" --advertise-address "$NODE_IP" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --client-ca-file "$PKI/ca.crt" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP,Hostname \
    --service-account-issuer "https://kubernetes.default.svc.$CLUSTER_DOMAIN" \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --allow-privileged=true --profiling=false --v=1
}

# The S3 server: versitygw's POSIX backend with its metadata in a sidecar directory (no
# xattrs needed, so any filesystem under _out/ does), root credentials made up now and
# written with the endpoint to $S3_ENV; bound to the bridge's gateway address, which Pods
# and the host both reach. The credentials go in through the environment, not argv.
start_s3() {
  mkdir -p "$S3_DIR/data" "$S3_DIR/meta"
  chmod 0700 "$S3_DIR"
  (
    umask 077
    cat >"$S3_ENV" <<EOF
STEWARD_S3_ENDPOINT=$S3_ENDPOINT
STEWARD_S3_BUCKET=$S3_BUCKET
STEWARD_S3_REGION=$S3_REGION
STEWARD_S3_ACCESS_KEY=$(openssl rand -hex 10 | tr a-f A-F)
STEWARD_S3_SECRET_KEY=$(openssl rand -hex 20)
EOF
  )
  local STEWARD_S3_ACCESS_KEY STEWARD_S3_SECRET_KEY
  # shellcheck source=/dev/null # KEY=VALUE lines written by start_s3
  source "$S3_ENV"
  ROOT_ACCESS_KEY_ID=$STEWARD_S3_ACCESS_KEY ROOT_SECRET_ACCESS_KEY=$STEWARD_S3_SECRET_KEY \
    start_proc versitygw "$(kube_bin versitygw)" --port "${S3_ENDPOINT#http://}" --health /health \
    --region "$S3_REGION" posix --sidecar "$S3_DIR/meta" "$S3_DIR/data"
}

s3_ready() { curl -fsS "$S3_ENDPOINT/health" >/dev/null; }

# The default bucket, by an S3 CreateBucket (so versitygw records its owner and ACL; a bare
# mkdir in data/ would list too, without them). curl signs it (SigV4).
s3_create_bucket() {
  local STEWARD_S3_ACCESS_KEY STEWARD_S3_SECRET_KEY empty_sha256
  # shellcheck source=/dev/null # KEY=VALUE lines written by start_s3
  source "$S3_ENV"
  empty_sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
  curl -fsS -X PUT --aws-sigv4 "aws:amz:$S3_REGION:s3" \
    --user "$STEWARD_S3_ACCESS_KEY:$STEWARD_S3_SECRET_KEY" -H "x-amz-content-sha256: $empty_sha256" \
    "$S3_ENDPOINT/$S3_BUCKET" >/dev/null || die "creating bucket $S3_BUCKET on $S3_ENDPOINT failed"
  [[ -d $S3_DIR/data/$S3_BUCKET ]] || die "bucket $S3_BUCKET was created but $S3_DIR/data/$S3_BUCKET is missing"
  log "S3 server up: $S3_ENDPOINT bucket $S3_BUCKET (credentials: $S3_ENV)"
}

apiserver_ready() { kctl get --raw /readyz >/dev/null; }

start_nodes_and_addons() {
  start_proc kube-controller-manager "$(kube_bin kube-controller-manager)" \
    --kubeconfig "$LK/kubeconfigs/controller-manager" \
    --authentication-kubeconfig "$LK/kubeconfigs/controller-manager" \
    --authorization-kubeconfig "$LK/kubeconfigs/controller-manager" \
    --bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" --allocate-node-cidrs=false --profiling=false \
    --node-monitor-grace-period 24s --v=1
  start_proc kube-scheduler "$(kube_bin kube-scheduler)" \
    --kubeconfig "$LK/kubeconfigs/scheduler" \
    --authentication-kubeconfig "$LK/kubeconfigs/scheduler" \
    --authorization-kubeconfig "$LK/kubeconfigs/scheduler" \
    --bind-address 127.0.0.1 --leader-elect=false --profiling=false --v=1
  start_proc kube-proxy "$(kube_bin kube-proxy)" --config "$LK/kube-proxy.yaml" --v=1
  start_proc coredns "$LK_BIN/coredns" -conf "$LK/Corefile"
  start_proc provisioner "$LK_BIN/provisioner" -kubeconfig "$LK/kubeconfigs/addons" -base-dir "$LK/pv"
}

all_nodes_ready() {
  local n
  for n in $(node_names); do node_ready "$n" || return 1; done
}
dns_answers() {
  curl -fsS "http://$DNS_IP:8181/ready" >/dev/null &&
    [[ $(busybox nslookup "kubernetes.default.svc.$CLUSTER_DOMAIN" "$DNS_IP") == *"$KUBERNETES_SVC_IP"* ]]
}

main() {
  preflight
  STARTING=1
  log "starting the cluster in $LK"
  setup_host
  make_pki
  write_kube_proxy_config "$LK/kube-proxy.yaml" host "$LK/kubeconfigs/kube-proxy"
  write_corefile

  start_s3
  start_etcd
  wait_for "control-plane etcd" 30 curl -fsS "http://127.0.0.1:$ETCD_CLIENT_PORT/health"
  start_apiserver
  wait_for "kube-apiserver /readyz" 90 apiserver_ready
  start_nodes_and_addons
  storageclass_manifest | kctl apply -f - >/dev/null
  local i
  for ((i = 0; i < NODES; i++)); do node_add >/dev/null; done

  wait_for "$NODES node(s) Ready" 120 all_nodes_ready
  wait_for "default ServiceAccount" 60 kctl get serviceaccount default -n default
  wait_for "StorageClasses" 30 kctl get storageclass standard network expandable
  wait_for "cluster DNS" 60 dns_answers
  wait_for "S3 server $S3_ENDPOINT" 30 s3_ready
  s3_create_bucket
  log "cluster up in $((SECONDS - START))s"
  cat >&2 <<EOF

  export KUBECONFIG=$KUBECONFIG_ADMIN
  kubectl get nodes        # kubectl: $(kube_bin kubectl)
  hack/localkube/node.sh   # add, stop, start, freeze, cut, delete nodes
  cat $S3_ENV    # the S3 server (for Pods and the host): endpoint, bucket, credentials
  make cluster-down        # stops it and removes all of $LK

EOF
}

# On any failure, leave the logs where the user can read them; down.sh cleans up.
trap 'rc=$?; ((rc == 0 || !STARTING)) || log "cluster-up failed (logs: $LK/logs); run make cluster-down to clean up"' EXIT
STARTING=0
main "$@"
