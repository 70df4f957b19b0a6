#!/usr/bin/env bash
# Writes internal/versionguard/flags/<major.minor>.txt from the etcd binaries hack/localkube built:
# every flag and feature gate each version's `etcd --help` lists. Steward refuses extraArgs a
# version does not know before rolling onto it (an upgrade) or enabling a downgrade to it, instead of
# finding out from a crash loop. Run after adding an etcd version to the build.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/internal/versionguard/flags"
mkdir -p "$out"
for bin in $(ls -d "$root"/_out/bin/etcd/v*/etcd | sort -V); do  # the newest patch of a minor writes last
  v="$(basename "$(dirname "$bin")")"   # v3.6.16
  minor="$(echo "${v#v}" | cut -d. -f1,2)"
  help="$("$bin" --help 2>&1)"
  {
    echo "# etcd $v --help (hack/etcd-flags.sh)"
    echo "$help" | grep -oE '^[[:space:]]+--[a-z0-9-]+' | tr -d ' ' | sed 's/^--/flag /' | sort -u
    echo "$help" | grep -oE '^[[:space:]]+[A-Za-z0-9]+=true\|false' | tr -d ' ' | sed 's/=true|false$//; s/^/gate /' | sort -u || true
  } > "$out/$minor.txt"
done
