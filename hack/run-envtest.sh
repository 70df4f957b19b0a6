#!/usr/bin/env bash
# Runs Steward against a throwaway envtest control plane (no nodes): see hack/devenv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
hack/toolchain.sh envtest
KUBEBUILDER_ASSETS=$PWD/_out/envtest exec go run ./hack/devenv "$@"
