#!/usr/bin/env bash
# Installs Steward into the running local cluster the way users install it: the
# kustomize bundle config/default (CRDs, RBAC, the manager Deployment) with kubectl's
# built-in kustomize. Imports the freshly built operator image first and restarts the
# Deployment when that image changed (its tag stays :dev with IfNotPresent, so a new
# build would otherwise never run). Waits for the Deployment to be Available.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OPERATOR_NS=${OPERATOR_NS:-steward-system}
OPERATOR_DEPLOYMENT=${OPERATOR_DEPLOYMENT:-steward-controller-manager}
# Another kustomization (an overlay of config/default, say) can be installed instead.
KUSTOMIZE_DIR=${STEWARD_KUSTOMIZE_DIR:-$ROOT/config/default}

cluster_running || die "the local cluster is not running (make cluster-up)"
[[ -f $IMAGES_DIR/steward.tar ]] || die "no operator image: hack/localkube/build.sh operator images (needs cmd/steward)"
[[ -d $KUSTOMIZE_DIR ]] || die "$KUSTOMIZE_DIR does not exist: nothing to install"

existed=0
kctl -n "$OPERATOR_NS" get "deployment/$OPERATOR_DEPLOYMENT" >/dev/null 2>&1 && existed=1
# The image on every node (a node that lacks it cannot run the operator: no registry).
digests() { local n; for n in $(node_names); do image_digest "$n" "$OPERATOR_IMAGE"; done; }
before=$(digests)
"$ROOT/hack/localkube/load-images.sh" "$IMAGES_DIR/steward.tar"
after=$(digests)

log "kubectl apply -k ${KUSTOMIZE_DIR#"$ROOT"/}"
# Server-side apply: CRDs with full Pod-shaped schemas outgrow the client-side
# last-applied annotation (256 KiB).
kctl apply --server-side --force-conflicts -k "$KUSTOMIZE_DIR" >/dev/null
kctl wait --for condition=Established --timeout 60s crd --all >/dev/null

if ((existed)) && [[ $before != "$after" ]]; then
  log "operator image changed ($before -> $after); restarting $OPERATOR_DEPLOYMENT"
  kctl -n "$OPERATOR_NS" rollout restart "deployment/$OPERATOR_DEPLOYMENT" >/dev/null
fi
log "waiting for deployment/$OPERATOR_DEPLOYMENT to be Available"
if ! kctl -n "$OPERATOR_NS" rollout status "deployment/$OPERATOR_DEPLOYMENT" --timeout "${OPERATOR_TIMEOUT:-180s}"; then
  kctl -n "$OPERATOR_NS" get pods -o wide >&2 || true
  kctl -n "$OPERATOR_NS" describe pods >&2 || true
  kctl -n "$OPERATOR_NS" logs "deployment/$OPERATOR_DEPLOYMENT" --all-containers --tail 50 >&2 || true
  die "the operator did not become Available"
fi
kctl -n "$OPERATOR_NS" wait --for condition=Available --timeout 60s "deployment/$OPERATOR_DEPLOYMENT" >/dev/null
log "Steward is installed and Available in namespace $OPERATOR_NS"
