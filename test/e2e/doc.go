// Package e2e holds Steward's end-to-end tests. They run against a real Kubernetes
// cluster with the operator installed as users install it, and are compiled only with
// the `e2e` build tag: run them with `make e2e` (hack/e2e.sh), which builds and starts
// the local single-node cluster first. The reusable parts live in ./framework.
package e2e
