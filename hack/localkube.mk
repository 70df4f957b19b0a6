# Local single-node Kubernetes (built from source, run as host processes, root only),
# the README sandbox and the end-to-end tests. Included by the root Makefile.
# State: _out/localkube/ (admin kubeconfig: _out/localkube/kubeconfig).

LOCALKUBE := hack/localkube

.PHONY: localkube-build cluster-up cluster-down cluster-status load-images sandbox e2e bench-backup bench-scale chaos perf-report

localkube-build: ## Build Kubernetes, etcd, CoreDNS, provisioner, operator and images (cached).
	$(LOCALKUBE)/build.sh

cluster-up: localkube-build ## Start the local cluster (returns when Ready; refuses to start twice).
	$(LOCALKUBE)/up.sh

cluster-down: ## Stop the local cluster and remove all its state from the host.
	$(LOCALKUBE)/down.sh

cluster-status: ## Show the local cluster's processes and node.
	$(LOCALKUBE)/status.sh

load-images: ## Rebuild the operator image and import all images into the running cluster.
	$(LOCALKUBE)/build.sh addons operator images
	$(LOCALKUBE)/load-images.sh

sandbox: ## Cluster + Steward installed from config/ + the sample EtcdCluster (PROMETHEUS=1: and a Prometheus).
	PROMETHEUS=$(PROMETHEUS) hack/sandbox.sh

e2e: ## End-to-end tests against the local cluster (KEEP_CLUSTER=1 keeps it up).
	hack/e2e.sh

bench-backup: ## Backup/restore figures of a 256 MiB database (STEWARD_E2E_BACKUP_MIB=1024 for 1 GiB); outside CI.
	STEWARD_E2E_BENCH=1 E2E_RUN=TestBackupMeasure E2E_INSTALL_PHASE=0 E2E_CHAOS_PHASE=0 hack/e2e.sh

bench-scale: ## 100 one-member clusters under one operator (BENCH_CLUSTERS=N; BENCH_GOGC=N sets the operator's GOGC): RSS, CPU, writes, repair notice; outside CI.
	E2E_RUN=TestBenchScale E2E_ARGS='-tags e2e,bench' E2E_INSTALL_PHASE=0 E2E_CHAOS_PHASE=0 E2E_TIMEOUT=60m hack/e2e.sh

chaos: ## The fault campaign alone: SEED=N[,M] (default: the CI seeds) DURATION=2h per seed (default 10m). Reports in _out/e2e/chaos/.
	STEWARD_CHAOS_SEEDS=$(SEED) STEWARD_CHAOS_DURATION=$(or $(DURATION),10m) E2E_SCENARIO_PHASE=0 E2E_INSTALL_PHASE=0 \
	  E2E_CHAOS_TIMEOUT=$(or $(CHAOS_TIMEOUT),24h) hack/e2e.sh

perf-report: ## Regenerate docs/performance.md and its chart: Steward's rolls beside a plain StatefulSet's (~15 min, outside CI).
	hack/perf-report.sh
