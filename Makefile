# Thin entry points: each target is one obvious command. See README.md.
SHELL := /bin/bash
VENV := $(CURDIR)/.venv
export PATH := $(VENV)/bin:$(PATH)
export VIRTUAL_ENV := $(VENV)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export CONTAINERS_CONF := $(CURDIR)/molecule/containers.conf

SCENARIOS := $(sort $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml))))

.PHONY: setup test molecule-beside unit-beside check lint unit docs testbed cluster-up test-slow molecule $(addprefix molecule-,$(SCENARIOS)) lab lab-validate lab-down lab-test sim bench arena

setup:            ## host packages, test image, pinned .venv and collections (idempotent)
	scripts/setup.sh

test: lint        ## everything CI runs: lint; the test bed with every Molecule scenario beside it; the lab with the unit tests beside it
	$(MAKE) --no-print-directory --output-sync=target -j 2 testbed molecule-beside
	$(MAKE) --no-print-directory --output-sync=target -j 2 lab-test unit-beside

# The test bed and the lab leave part of the CPU idle while they wait on API servers, nodes and kubeadm (about half
# and a fifth): Molecule and the unit tests take it at the lowest priority (scripts/low-priority.sh), so that the
# waits of the test bed and the lab run about as they would alone.
molecule-beside unit-beside: %-beside:
	scripts/low-priority.sh $(MAKE) --no-print-directory $*

check: lint unit  ## the inner loop: lint and unit tests, no containers

lint:
	ruff check .
	ruff format --check .
	mypy
	yamllint --strict .
	ansible-lint

unit:
	pytest -n 2

docs:             ## every role's README.md and docs/variables.md from the argument specs and README.prose.md
	python scripts/role_docs.py

testbed:          ## tests against real Kubernetes: control plane on loopback, a real node, the MPI operator (root)
	pytest tests/k8s -p no:xdist --durations=15

cluster-up:       ## a test-bed cluster to debug against (prints KUBECONFIG); Ctrl-C stops it and cleans up
	railforge testbed up

test-slow:        ## long property-based runs and the full trace replays
	pytest -n 2 -m slow

molecule:         ## every scenario side by side: each has its own containers (no network) and ephemeral directory
	$(MAKE) --no-print-directory --output-sync=target -j $(words $(SCENARIOS)) $(addprefix molecule-,$(SCENARIOS))

$(addprefix molecule-,$(SCENARIOS)): molecule-%:
	molecule test -s $*

lab:              ## a kubeadm cluster in Podman node containers by playbooks/site.yml, then an MPIJob across two nodes
	scripts/lab.sh up

lab-validate:     ## on the lab: validate.yml's node checks, the CPU benchmark and the per-node table
	ansible-playbook -i inventories/lab/hosts.yml playbooks/validate.yml

lab-down:
	scripts/lab.sh down

lab-test:         ## the lab end to end with its checks (tests/lab): up, job, second run, check run, down
	pytest tests/lab -p no:xdist --durations=0

sim:              ## replay Philly and every ITP trace through all policies -> docs/simulation-results.md (long)
	railforge simulate-report --all --period 60 --jobs 2 --cache reports/sim-cache

arena:            ## railforge beside kube-scheduler (defaults, native gangs) and coscheduling on one API server with KWOK nodes (root)
	python benchmarks/bench_arena.py

bench:            ## scheduler decide() timings, the exact search's reach, the whole Philly replay on a 1-minute cycle
	python benchmarks/bench_decide.py --quick
	python benchmarks/bench_exact_search.py
	python benchmarks/bench_replay.py --period 60
