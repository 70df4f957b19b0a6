#!/usr/bin/env bash
# Regenerates docs/performance.md and its chart (docs/performance.svg): runs the comparison scenarios
# one at a time on the local Kubernetes (started if needed, as `make e2e` does), then hack/perfreport
# turns their MEASURE lines into the page. About 15 minutes. Env: KEEP_CLUSTER=1 keeps a cluster this script started.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$ROOT/_out/perf"
log=$ROOT/_out/perf/e2e.log
E2E_RUN='^(TestStatefulSetBaseline|TestRollOptionsAndMetadata|TestRollVersion|TestResizeInPlace|TestScale|TestRepairDeletedPods|TestRepairCrashLoop|TestCARotation|TestDefragmentation)$' \
  E2E_PARALLEL=1 E2E_INSTALL_PHASE=0 E2E_CHAOS_PHASE=0 E2E_ARGS="${E2E_ARGS:-}" "$ROOT/hack/e2e.sh" 2>&1 | tee "$log"
(cd "$ROOT/hack/perfreport" && GOWORK=off go run . -chart "$ROOT/docs/performance.svg" <"$log" >"$ROOT/docs/performance.md")
echo "perf-report: wrote docs/performance.md and docs/performance.svg from $log"
