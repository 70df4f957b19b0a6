#!/usr/bin/env bash
# Regenerates docs/performance.md and its chart (docs/performance.svg): runs the comparison scenarios
# one at a time on the local Kubernetes (started if needed, as `make e2e` does), then hack/perfreport
# turns their MEASURE lines into the page. About 13 minutes: of the CA rotations, only the PVC one
# with auth runs (the three took 704 of the 1,176 s on 2026-12-06; an empty E2E_ARGS= runs all).
# Env: KEEP_CLUSTER=1 keeps a cluster this script started.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$ROOT/_out/perf"
log=$ROOT/_out/perf/e2e.log
E2E_RUN='^(TestStatefulSetBaseline|TestRollOptionsAndMetadata|TestRollVersion|TestResizeInPlace|TestScale|TestRepairDeletedPods|TestRepairCrashLoop|TestCARotation|TestDefragmentation)$' \
  E2E_PARALLEL=1 E2E_INSTALL_PHASE=0 E2E_CHAOS_PHASE=0 \
  E2E_ARGS="${E2E_ARGS--skip=TestCARotation/(PVC-operator-killed-in-SwapLeaves|Memory)}" \
  "$ROOT/hack/e2e.sh" 2>&1 | tee "$log"
(cd "$ROOT/hack/perfreport" && GOWORK=off go run . -chart "$ROOT/docs/performance.svg" <"$log" >"$ROOT/docs/performance.md")
echo "perf-report: wrote docs/performance.md and docs/performance.svg from $log"
