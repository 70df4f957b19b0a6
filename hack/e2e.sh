#!/usr/bin/env bash
# End-to-end tests (`make e2e`): builds what is missing, starts the local cluster unless
# one is running, installs Steward from config/default, then runs the Go tests in
# test/e2e (build tag e2e). A cluster this script started is stopped at the end unless
# KEEP_CLUSTER=1; a cluster that was already running is left as it was.
#
# The tests get the environment as STEWARD_E2E_* variables, among them the S3 server's
# STEWARD_E2E_S3_{ENDPOINT,BUCKET,REGION,ACCESS_KEY,SECRET_KEY} (from _out/localkube/s3/env).
#
# Env: E2E_RUN (go test -run pattern), E2E_TIMEOUT (default 65m: the scenarios took 51 min on a 2-core CI machine at stop 37), E2E_PARALLEL (default 4: with the backup scenarios, 6 at a time starved etcd of CPU on 2 cores), KEEP_CLUSTER=1,
#      E2E_ARGS (extra go test arguments), E2E_INSTALL_PHASE=0 (skip the Helm install phase that
#      follows the scenarios: TestInstall with STEWARD_E2E_INSTALL_PHASE=1), E2E_CHAOS_PHASE=0 (skip
#      the fault campaign that comes last), E2E_SCENARIO_PHASE=0 (skip the scenarios themselves).
#      Failure dumps go to _out/e2e/.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/localkube/lib.sh"
need_root

started=0
failures=$OUT/e2e/failures.txt
rm -f "$failures"
cm_pid=""
cpu_pid=""
finish() {
  local rc=$?
  cpu_stop
  if [[ -n $cm_pid ]]; then kill "$cm_pid" 2>/dev/null || true; wait "$cm_pid" 2>/dev/null || true; fi
  if ((started)) && [[ ${KEEP_CLUSTER:-0} != 1 ]]; then
    "$ROOT/hack/localkube/down.sh" || rc=1
  elif ((started)); then
    log "KEEP_CLUSTER=1: the cluster stays up (export KUBECONFIG=$KUBECONFIG_ADMIN)"
  fi
  # Last, after the CPU report and the cluster's shutdown: CI shows only the tail (stop 57's CI
  # failure printed its message above them, where the tail no longer reached).
  if [[ -s $failures ]]; then cat "$failures"; fi
  exit "$rc"
}
# cpu_start NAME / cpu_stop: hack/cpushare records whose CPU the phase used, into
# _out/e2e/cpu-NAME.txt, printed when the phase ends. On CI's 2 cores the scenarios run CPU-bound,
# so the phase's time is its CPU: this says where it went. Best effort: never fails the run.
cpu_start() {
  cpu_stop
  [[ -x $OUT/bin/cpushare ]] || return 0
  "$OUT/bin/cpushare" -out "$OUT/e2e/cpu-$1.txt" &
  cpu_pid=$!
  cpu_file=$OUT/e2e/cpu-$1.txt
}
cpu_stop() {
  [[ -n $cpu_pid ]] || return 0
  kill "$cpu_pid" 2>/dev/null || true
  wait "$cpu_pid" 2>/dev/null || true
  cpu_pid=""
  if [[ -f $cpu_file ]]; then log "CPU of the phase ($cpu_file):"; head -16 "$cpu_file" || true; fi
}
trap finish EXIT

"$ROOT/hack/localkube/build.sh"
if cluster_running; then
  log "reusing the running local cluster"
else
  started=1
  # Three nodes in three zones: the placement, drain and node-loss scenarios need them, and
  # every other scenario runs where its users run (NODES=1 to try one node).
  NODES=${NODES:-3} "$ROOT/hack/localkube/up.sh"
fi
"$ROOT/hack/localkube/install-operator.sh"

mkdir -p "$OUT/e2e"
go build -o "$OUT/bin/cpushare" "$ROOT/hack/cpushare" || log "WARNING: hack/cpushare did not build; no CPU figures"
# cert-manager, for the CertManager-source scenario: built from the module proxy
# (hack/certmanager) and run as a host process against the cluster, so no image is needed.
"$ROOT/hack/toolchain.sh" certmanager
kctl apply --server-side -f "$("$ROOT/hack/toolchain.sh" path certmanager-crds)" >/dev/null
"$("$ROOT/hack/toolchain.sh" path certmanager)" --kubeconfig "$KUBECONFIG_ADMIN" >"$OUT/e2e/cert-manager.log" 2>&1 &
cm_pid=$!
log "cert-manager controller running (pid $cm_pid, log _out/e2e/cert-manager.log)"
export KUBECONFIG=$KUBECONFIG_ADMIN
export PATH=$(dirname "$(kube_bin kubectl)"):$PATH
export STEWARD_E2E_ETCD_VERSIONS="${STEWARD_E2E_ETCD_VERSIONS:-$(etcd_versions)}"
export STEWARD_E2E_ETCD_IMAGE_REPOSITORY=$ETCD_IMAGE_REPO
# Cluster DNS (CoreDNS on the host): clients resolve Service names as applications in Pods do.
export STEWARD_E2E_CLUSTER_DNS=$DNS_IP STEWARD_E2E_CLUSTER_DOMAIN=$CLUSTER_DOMAIN
export STEWARD_E2E_OPERATOR_NAMESPACE=${OPERATOR_NS:-steward-system}
export STEWARD_E2E_OPERATOR_DEPLOYMENT=${OPERATOR_DEPLOYMENT:-steward-controller-manager}
export STEWARD_E2E_ARTIFACTS=$OUT/e2e
# The S3 server up.sh started (versitygw on the host, reachable from Pods and from here).
if [[ -f $S3_ENV ]]; then
  while IFS='=' read -r k v; do
    if [[ $k == STEWARD_S3_* ]]; then export "STEWARD_E2E_S3_${k#STEWARD_S3_}=$v"; fi
  done <"$S3_ENV"
else
  log "WARNING: no $S3_ENV (a cluster started before the S3 server existed?); S3 tests will fail"
fi
"$ROOT/hack/toolchain.sh" envtest >/dev/null # cached; a scenario runs its kube-apiserver as an etcd client
STEWARD_E2E_KUBE_APISERVER=$("$ROOT/hack/toolchain.sh" path envtest)/kube-apiserver
export STEWARD_E2E_KUBE_APISERVER
"$ROOT/hack/toolchain.sh" helm >/dev/null # cached; the install phase installs the chart with it
STEWARD_E2E_HELM=$("$ROOT/hack/toolchain.sh" path helm)
export STEWARD_E2E_HELM
"$ROOT/hack/toolchain.sh" prometheus >/dev/null # cached; TestPrometheus runs it on the shipped monitors and rules
STEWARD_E2E_PROMETHEUS=$("$ROOT/hack/toolchain.sh" path prometheus)
export STEWARD_E2E_PROMETHEUS

cd "$ROOT"
# go_test LOG ARGS...: go test of the e2e packages, its output also kept in _out/e2e/LOG; on
# failure each failed test's last own lines are printed again, and once more when the script ends,
# where CI's tail of the output shows them.
go_test() {
  local log=$OUT/e2e/$1; shift
  # shellcheck disable=SC2086 # E2E_ARGS is a list of words
  if ! go test -tags e2e ./test/e2e/... -v -count=1 "$@" ${E2E_ARGS:-} 2>&1 | tee "$log"; then
    awk -f "$ROOT/hack/e2e-failures.awk" "$log" | tee -a "$failures"
    return 1
  fi
}
if [[ ${E2E_SCENARIO_PHASE:-1} == 1 ]]; then
  log "go test -tags e2e ./test/e2e/... (etcd: $STEWARD_E2E_ETCD_VERSIONS)"
  # Scenarios run in parallel namespaces; go test's default (GOMAXPROCS = 2 here) would serialize them.
  cpu_start scenarios
  go_test go-test.log -timeout "${E2E_TIMEOUT:-65m}" -parallel "${E2E_PARALLEL:-4}" ${E2E_RUN:+-run "$E2E_RUN"}
  cpu_stop
fi

# Install phase, only after the scenarios above passed (set -e), one test at a time: TestInstall
# scales the operator installed from config/default to zero and installs the Helm chart in
# namespaced mode in its place; TestUpgradeFromPreviousRelease runs the previous release's
# operator image, then this one's. Each puts the suite's operator back at the end, so nothing else
# may run meanwhile. E2E_INSTALL_PHASE=0 skips it.
if [[ ${E2E_INSTALL_PHASE:-1} == 1 ]]; then
  STEWARD_E2E_PREVIOUS_IMAGE=$("$ROOT/hack/localkube/previous-release.sh")
  export STEWARD_E2E_PREVIOUS_IMAGE
  log "install phase: go test -tags e2e ./test/e2e/... -run 'TestInstall|TestUpgradeFromPreviousRelease' (STEWARD_E2E_INSTALL_PHASE=1)"
  install_start=$SECONDS
  cpu_start install
  STEWARD_E2E_INSTALL_PHASE=1 go_test go-test-install.log -timeout 15m -parallel 1 -run 'TestInstall|TestUpgradeFromPreviousRelease'
  cpu_stop
  log "install phase passed in $((SECONDS - install_start))s"
fi

# Chaos phase: the fault campaign (TestChaos, docs/chaos.md) kills the operator and restarts the API
# server, so it runs alone, its seeds in parallel. STEWARD_CHAOS_SEEDS and STEWARD_CHAOS_DURATION
# (per seed) override the CI seeds and their 2 minutes; E2E_CHAOS_PHASE=0 skips it.
if [[ ${E2E_CHAOS_PHASE:-1} == 1 ]]; then
  log "chaos phase: go test -tags e2e ./test/e2e/... -run '^TestChaos$' (STEWARD_E2E_CHAOS_PHASE=1)"
  chaos_start=$SECONDS
  cpu_start chaos
  STEWARD_E2E_CHAOS_PHASE=1 go_test go-test-chaos.log -timeout "${E2E_CHAOS_TIMEOUT:-20m}" -parallel 8 -run '^TestChaos$'
  cpu_stop
  log "chaos phase passed in $((SECONDS - chaos_start))s (reports: _out/e2e/chaos/)"
fi
