#!/usr/bin/env bash
# The README's first command (`make sandbox`): builds what is missing, starts the local
# single-node cluster (or reuses the running one), installs Steward from config/default
# the way users install it, applies config/samples (a 3-member PVC-backed EtcdCluster)
# and prints what to type next. Needs root (see docs: a VM, not a container).
#
# Waiting until the sample is Available (all members Ready), timeout SANDBOX_TIMEOUT (5m):
#   SANDBOX_WAIT_AVAILABLE=auto (default) waits when a controller reconciles the sample,
#     i.e. its status.observedGeneration appears within 20 s; before the lifecycle
#     controller existed nothing did, and the script said so instead of timing out.
#   SANDBOX_WAIT_AVAILABLE=1 always waits; 0 never does.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/localkube/lib.sh"

SANDBOX_WAIT_AVAILABLE=${SANDBOX_WAIT_AVAILABLE:-auto}
need_root

"$ROOT/hack/localkube/build.sh"
if cluster_running; then
  log "reusing the running local cluster"
else
  "$ROOT/hack/localkube/up.sh"
fi
"$ROOT/hack/localkube/install-operator.sh"

samples=$ROOT/config/samples
[[ -d $samples ]] || die "config/samples does not exist yet"
src=(-f "$samples")
[[ -f $samples/kustomization.yaml ]] && src=(-k "$samples")
kctl apply "${src[@]}"

# The sample EtcdClusters as namespace/name.
clusters=$(kctl get "${src[@]}" --no-headers -o custom-columns=K:.kind,NS:.metadata.namespace,N:.metadata.name |
  awk '$1 == "EtcdCluster" {print $2 "/" $3}')
[[ -n $clusters ]] || die "config/samples holds no EtcdCluster"
first=$(head -n1 <<<"$clusters")
ns=${first%%/*} name=${first#*/}

# reconciled NS/NAME: some controller has written the object's status.
reconciled() { [[ -n $(kctl -n "${1%%/*}" get etcdcluster "${1#*/}" -o 'jsonpath={.status.observedGeneration}') ]]; }

if [[ $SANDBOX_WAIT_AVAILABLE == auto ]]; then
  SANDBOX_WAIT_AVAILABLE=0
  if wait_for "the operator to reconcile $first" 20 reconciled "$first"; then SANDBOX_WAIT_AVAILABLE=1; fi
fi
if [[ $SANDBOX_WAIT_AVAILABLE == 1 ]]; then
  for c in $clusters; do
    log "waiting for EtcdCluster $c to be Available with every member Ready"
    replicas=$(kctl -n "${c%%/*}" get etcdcluster "${c#*/}" -o 'jsonpath={.spec.replicas}')
    kctl -n "${c%%/*}" wait --for condition=Available --timeout "${SANDBOX_TIMEOUT:-5m}" "etcdcluster/${c#*/}" >/dev/null
    kctl -n "${c%%/*}" wait --for "jsonpath={.status.readyMembers}=$replicas" --timeout "${SANDBOX_TIMEOUT:-5m}" "etcdcluster/${c#*/}" >/dev/null
  done
  kctl get etcdclusters -A
else
  cat >&2 <<EOF

NOTE: Steward is installed and the sample EtcdCluster $first is applied, but nothing
      reconciles it: the lifecycle controller has not landed in this build, so no
      members will be created. (SANDBOX_WAIT_AVAILABLE=1 would wait for it anyway.)
EOF
fi

cat <<EOF

Next:
  export KUBECONFIG=$KUBECONFIG_ADMIN
  export PATH=$(dirname "$(kube_bin kubectl)"):\$PATH
  kubectl get etcdclusters -A
  kubectl -n $ns get pods,pvc -o wide
  kubectl -n $ns exec $name-0 -- etcdctl --endpoints https://localhost:2379 --cacert /etc/etcd/tls/client-ca.crt \\
      --cert /etc/etcd/tls/server.crt --key /etc/etcd/tls/server.key endpoint status --cluster -w table
  kubectl -n steward-system logs deploy/steward-controller-manager -f
  make cluster-down      # removes the cluster and all of its state
EOF
