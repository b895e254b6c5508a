# mtkit: every set-up step is one of these targets.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export OMP_NUM_THREADS ?= 2
DEMO_MINUTES ?= 15

# Made by every install: targets that only need an installed .venv depend on it, so a fresh clone installs
# first and later runs do not reinstall (again only when pyproject.toml is newer than the last install).
INSTALLED := $(VENV)/.installed

.PHONY: install lint test test-fast demo demo-software bench bench-peers bench-peers-install gpu-check gpu-check-tests \
  gpu-check-bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# torch==2.13.0 first: the local CPU wheel, so pyproject's `torch>=2.5` below installs nothing from CUDA.
install: $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,ctranslate2,serve,documents,document-libraries,tensorboard,hf,browser,clients,langid,moses,plots,align]'
	touch $(INSTALLED)

$(INSTALLED): pyproject.toml
	$(MAKE) --no-print-directory install

# ruff, as pyproject.toml configures it (120 columns): the formatter's check and the linter, no file changed.
lint: $(INSTALLED)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

# Machines of our kind differ in CPU: on a CPU with AVX-512 the tests that prove an exactness claim (marked
# `exactness`) run a second time with torch, MKL and oneDNN held to their AVX2 kernels, the paths of a CPU without
# AVX-512. On a CPU whose best kernels are AVX2 already, the first pass ran those paths: the second is skipped.
# That pass keeps torch.compile's kernels apart: under the forced capability inductor reused AVX-512 kernels that a
# native run had left in its shared cache (NaN; docs/training.md).
FORCE_AVX2 := ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2

# The suite's own thread count, as tests/conftest.py sets it when none is given, not the 2 exported above for the
# demo and benchmarks: tests that need more threads set them. In the test process CTranslate2 shares torch's OpenMP
# runtime, and at 2 threads each the in-process CTranslate2 tests ran 3x slower (test_ct2engine.py 27.0 -> 9.1 s,
# the whole first pass 388 -> 356 s on a 2-core Zen 4, 2026-11-25).
TEST_ENV := OMP_NUM_THREADS=1
# Two test processes (pytest-xdist), one per core of the 2-core machines the suite is held to, each test module
# whole in one of them (its module fixtures made once); a session fixture's run is trained by one process while
# the other waits for it (tests/conftest.py, trained_once). The longest modules go first (conftest.py,
# LONGEST_FIRST), in that order: --no-loadscope-reorder, or xdist hands out the modules of most tests first.
TEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

# Ends with its own wall time (each pass and the total), the figure the suite is held to. Both passes share one
# folder of the runs the session fixtures train (tests/conftest.py, trained_once): the AVX2 pass copies them.
test: $(INSTALLED)
	@start=$$(date +%s); \
	fixtures=$$(mktemp -d); trap 'rm -rf "$$fixtures"' EXIT; export MTKIT_TEST_FIXTURE_CACHE=$$fixtures; \
	$(TEST_ENV) $(PYTEST) -q -x --durations=15 || exit 1; \
	first=$$(date +%s); \
	capability=$$($(PY) -c 'import torch; print(torch.backends.cpu.get_cpu_capability())') || exit 1; \
	case "$$capability" in \
	AVX512*) echo "exactness tests again on the AVX2 kernels ($(FORCE_AVX2))"; \
		$(TEST_ENV) $(FORCE_AVX2) TORCHINDUCTOR_CACHE_DIR=$$fixtures/inductor-avx2 \
			$(PYTEST) -q -x -m exactness --durations=5 || exit 1;; \
	*) echo "CPU kernels: $$capability, no AVX-512: the pass above ran the AVX2 paths; no forced-AVX2 pass";; \
	esac; \
	end=$$(date +%s); \
	echo "make test: $$(((end - start) / 60)) min $$(((end - start) % 60)) s (first pass $$(((first - start) / 60)) min $$(((first - start) % 60)) s, AVX2 pass $$(((end - first) / 60)) min $$(((end - first) % 60)) s)"

# The suite without the tests marked slow, and no forced-AVX2 pass: a quick check while working.
test-fast: $(INSTALLED)
	$(TEST_ENV) $(PYTEST) -q -m 'not slow'

demo: $(INSTALLED)
	MINUTES=$(DEMO_MINUTES) PY=$(PY) bash recipes/multi30k-en-de/run.sh

# The same for software strings, from this machine's gettext catalogs (recipes/software-en-de/README.md).
demo-software: $(INSTALLED)
	MINUTES=$(DEMO_MINUTES) PY=$(PY) bash recipes/software-en-de/run.sh

# The CPU scenarios of benchmarks/run.py (preprocess, train, translate, serve, finetune), small sizes, one round
# each; results in benchmarks/results/. Full sizes: $(PY) benchmarks/run.py all.
bench: $(INSTALLED)
	$(PY) benchmarks/run.py all --small

# Training speed with fairseq and OpenNMT-py in the same rounds. benchmarks/peers/ installs each peer, when its
# marker is missing, into a virtual environment of its own under $$PEERS, outside the clone and never into .venv:
# their torch builds and pins are not mtkit's. Installing takes 1-3 minutes a peer (benchmarks/peers/README.md).
export PEERS ?= $(HOME)/.cache/mtkit-peers
PEER_NAMES := fairseq onmt
PEER_INSTALLED := $(PEER_NAMES:%=$(PEERS)/%/.installed)
PEER_PREPARED := $(PEER_NAMES:%=$(PEERS)/runs/%/.prepared)

$(PEER_INSTALLED): $(PEERS)/%/.installed:
	bash benchmarks/peers/bench_$*.sh install

$(PEER_PREPARED): $(PEERS)/runs/%/.prepared: $(PEERS)/%/.installed
	bash benchmarks/peers/bench_$*.sh prep

bench-peers-install: $(PEER_PREPARED)

bench-peers: $(INSTALLED) bench-peers-install
	$(PY) benchmarks/run.py train --peers

# On a machine with CUDA: tests/gpu, then the GPU benchmark; results in bench-out/gpu-check/summary.md (or
# GPU_CHECK_OUT). Without CUDA: one line, exit 0. Uses .venv when there is one, else python3 (a CUDA torch).
# Its two halves on an H200 (2026-11-28): gpu-check-tests 3 minutes (3 workers), gpu-check-bench about 10 (summed
# from its stages' measured times).
GPU_PY = $(if $(wildcard $(PY)),$(PY),$(PYTHON))

gpu-check:
	@PY=$(GPU_PY) bash benchmarks/gpu_check.sh all

gpu-check-tests:
	@PY=$(GPU_PY) bash benchmarks/gpu_check.sh tests

gpu-check-bench:
	@PY=$(GPU_PY) bash benchmarks/gpu_check.sh bench

clean:
	rm -rf build *.egg-info .pytest_cache demo-run bench-out
