#!/usr/bin/env bash
# Regenerates docs/performance.md and its chart (docs/performance.svg): runs the comparison scenarios
# one at a time on the local Kubernetes (started if needed, as `make e2e` does), then hack/perfreport
# turns their MEASURE lines into the page, with the operator at 100 clusters (TestBenchScale) last.
# About 15 minutes: of the CA rotations, only the PVC one with auth runs (the three took 704 of the
# 1,176 s on 2026-12-06; an empty E2E_ARGS= runs all).
# Env: KEEP_CLUSTER=1 keeps a cluster this script started.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/hack/localkube/lib.sh"
mkdir -p "$ROOT/_out/perf"
log=$ROOT/_out/perf/e2e.log
running=0
cluster_running && running=1
# A cluster this script started goes when it ends, unless KEEP_CLUSTER=1 (each run below keeps it
# for the next).
stop() { if ((!running)) && [[ ${KEEP_CLUSTER:-0} != 1 ]]; then "$ROOT/hack/localkube/down.sh"; fi; }
trap stop EXIT
KEEP_CLUSTER=1 E2E_RUN='^(TestStatefulSetBaseline|TestRollOptionsAndMetadata|TestRollVersion|TestResizeInPlace|TestScale|TestRepairDeletedPods|TestRepairCrashLoop|TestCARotation|TestDefragmentation)$' \
  E2E_PARALLEL=1 E2E_INSTALL_PHASE=0 E2E_CHAOS_PHASE=0 \
  E2E_ARGS="${E2E_ARGS--skip=TestCARotation/(PVC-operator-killed-in-SwapLeaves|Memory)}" \
  "$ROOT/hack/e2e.sh" 2>&1 | tee "$log"
# Then the operator at 100 clusters (`make bench-scale`), without the rolls: its 100 clusters would
# load their nodes. (The rolls' namespaces may still be going when it starts: on 2026-12-06 it formed
# the 100 clusters in 139 s here, in 93 s on a fresh cluster.)
KEEP_CLUSTER=1 E2E_RUN='^TestBenchScale$' E2E_ARGS='-tags e2e,bench' E2E_INSTALL_PHASE=0 E2E_CHAOS_PHASE=0 \
  "$ROOT/hack/e2e.sh" 2>&1 | tee -a "$log"
(cd "$ROOT/hack/perfreport" && GOWORK=off go run . -chart "$ROOT/docs/performance.svg" <"$log" >"$ROOT/docs/performance.md")
echo "perf-report: wrote docs/performance.md and docs/performance.svg from $log"
