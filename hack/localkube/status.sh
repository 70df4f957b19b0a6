#!/usr/bin/env bash
# Shows whether the local cluster runs: each recorded process with its PID, CPU time and
# RSS, the S3 server's endpoint, then the nodes. Exit status 0 when the apiserver and kubelet are alive.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ -d $PIDS ]] || { echo "no local cluster ($LK)"; exit 1; }
printf '%-24s %8s %10s %9s\n' PROCESS PID CPU-TIME RSS-MiB
for f in "$PIDS"/*; do
  n=$(basename "$f")
  read -r pid _ <"$f"
  if alive "$n"; then
    printf '%-24s %8s %10s %9s\n' "$n" "$pid" "$(ps -o time= -p "$pid")" "$(($(ps -o rss= -p "$pid") / 1024))"
  else
    printf '%-24s %8s %10s\n' "$n" "$pid" dead
  fi
done
echo
if [[ -f $S3_ENV ]]; then
  echo "S3 server: $(grep -h '^STEWARD_S3_ENDPOINT=' "$S3_ENV" | cut -d= -f2-)" \
    "bucket $(grep -h '^STEWARD_S3_BUCKET=' "$S3_ENV" | cut -d= -f2-) (credentials: $S3_ENV)"
  echo
fi
"$ROOT/hack/localkube/node.sh" list 2>&1 || true
echo
kctl get nodes -L topology.kubernetes.io/zone -o wide 2>&1 || true
echo
echo "export KUBECONFIG=$KUBECONFIG_ADMIN"
cluster_running
