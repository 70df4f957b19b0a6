#!/usr/bin/env bash
# The README's first command (`make sandbox`): builds what is missing, starts the local
# single-node cluster (or reuses the running one), installs Steward from config/default
# the way users install it, applies config/samples (a 3-member PVC-backed EtcdCluster),
# creates the Secret `s3-credentials` for backups to the cluster's S3 server in the
# sample's namespace, and prints what to type next. Needs root (see docs: a VM, not a
# container).
#
# Waits until every sample is Available with all members Ready, timeout SANDBOX_TIMEOUT
# (5m); SANDBOX_WAIT_AVAILABLE=0 skips the wait. PROMETHEUS=1 also runs a Prometheus on this host
# (built from the module proxy) on the shipped monitors and rules, at http://127.0.0.1:9090.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/localkube/lib.sh"

SANDBOX_WAIT_AVAILABLE=${SANDBOX_WAIT_AVAILABLE:-1}
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

# Backups go to the S3 server up.sh started (versitygw on the host; see $S3_ENV): its root
# credentials as the Secret an EtcdBackup's credentialsSecretRef names.
[[ -f $S3_ENV ]] || die "no $S3_ENV: this cluster predates the S3 server; make cluster-down and retry"
STEWARD_S3_ENDPOINT="" STEWARD_S3_BUCKET="" STEWARD_S3_REGION="" STEWARD_S3_ACCESS_KEY="" STEWARD_S3_SECRET_KEY=""
# shellcheck source=/dev/null # KEY=VALUE lines written by up.sh
source "$S3_ENV"
kctl -n "$ns" create secret generic s3-credentials --dry-run=client -o yaml \
  --from-literal "accessKeyID=$STEWARD_S3_ACCESS_KEY" --from-literal "secretAccessKey=$STEWARD_S3_SECRET_KEY" |
  kctl apply -f - >/dev/null
log "Secret $ns/s3-credentials holds the S3 server's credentials"

if [[ $SANDBOX_WAIT_AVAILABLE == 1 ]]; then
  for c in $clusters; do
    log "waiting for EtcdCluster $c to be Available with every member Ready"
    replicas=$(kctl -n "${c%%/*}" get etcdcluster "${c#*/}" -o 'jsonpath={.spec.replicas}')
    kctl -n "${c%%/*}" wait --for condition=Available --timeout "${SANDBOX_TIMEOUT:-5m}" "etcdcluster/${c#*/}" >/dev/null
    kctl -n "${c%%/*}" wait --for "jsonpath={.status.readyMembers}=$replicas" --timeout "${SANDBOX_TIMEOUT:-5m}" "etcdcluster/${c#*/}" >/dev/null
  done
  kctl get etcdclusters -A
fi

if [[ ${PROMETHEUS:-0} == 1 ]]; then
  # The scraper's identity is the one config/prometheus binds to steward-metrics-reader.
  "$ROOT/hack/toolchain.sh" prometheus >/dev/null
  kctl create namespace monitoring --dry-run=client -o yaml | kctl apply -f - >/dev/null
  kctl -n monitoring create serviceaccount prometheus-k8s --dry-run=client -o yaml | kctl apply -f - >/dev/null
  kctl apply -f "$ROOT/config/prometheus/metrics_reader_binding.yaml" >/dev/null
  prom=$LK/prometheus
  mkdir -p "$prom"
  kctl -n monitoring create token prometheus-k8s --duration 24h >"$prom/token"
  (cd "$ROOT" && go run ./hack/prometheus -dir "$prom" -kubeconfig "$KUBECONFIG_ADMIN" -token-file "$prom/token")
  stop_proc prometheus 5
  start_proc prometheus "$("$ROOT/hack/toolchain.sh" path prometheus)" --config.file="$prom/prometheus.yml" \
    --storage.tsdb.path="$prom/data" --web.listen-address=127.0.0.1:9090
  wait_for "Prometheus on 127.0.0.1:9090" 60 bash -c 'exec 3<>/dev/tcp/127.0.0.1/9090'
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

Backups go to an S3 server on this host (versitygw, plain HTTP; Pods and the host reach it):
  endpoint $STEWARD_S3_ENDPOINT  bucket $STEWARD_S3_BUCKET  region $STEWARD_S3_REGION
  credentials in $S3_ENV and in the Secret $ns/s3-credentials
Take a backup of $name now, then list backups (EtcdBackup; the Secret is already there):
kubectl -n $ns apply -f - <<'YAML'
apiVersion: etcd.steward.dev/v1alpha1
kind: EtcdBackup
metadata: {name: $name-now}
spec:
  clusterName: $name
  destination:
    s3: {bucket: $STEWARD_S3_BUCKET, endpoint: $STEWARD_S3_ENDPOINT, region: $STEWARD_S3_REGION, forcePathStyle: true,
         credentialsSecretRef: {name: s3-credentials}}
YAML
  kubectl -n $ns get etcdbackups
  find $S3_DIR/data/$STEWARD_S3_BUCKET -type f    # the uploaded snapshots, as plain files

  make cluster-down      # removes the cluster and all of its state (the S3 server's too)
EOF
if [[ ${PROMETHEUS:-0} == 1 ]]; then
  cat <<EOF

Prometheus (the shipped ServiceMonitor, PodMonitor and rules; docs/metrics.md) at http://127.0.0.1:9090:
  curl -s 'http://127.0.0.1:9090/api/v1/targets?state=active' | grep -o '"health":"[a-z]*"' | sort | uniq -c
  curl -s http://127.0.0.1:9090/api/v1/alerts
  curl -s 'http://127.0.0.1:9090/api/v1/query?query=steward_cluster_members'
EOF
fi
