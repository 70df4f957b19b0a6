#!/usr/bin/env bash
# restart-apiserver.sh [DOWN_SECONDS]: stop the local kube-apiserver (SIGTERM, as a node reboot or
# an upgrade would), keep it down DOWN_SECONDS (default 2), start it again with the very arguments
# it ran with, and wait until it is ready. For the fault campaign (make chaos); everything talking
# to the cluster sees the outage.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root
alive kube-apiserver || die "kube-apiserver is not running"
read -r pid _ <"$PIDS/kube-apiserver"
mapfile -d '' args <"/proc/$pid/cmdline"
stop_proc kube-apiserver 10
sleep "${1:-2}"
start_proc kube-apiserver "${args[@]}"
wait_for "kube-apiserver /readyz" 90 kctl get --raw /readyz
log "kube-apiserver restarted"
