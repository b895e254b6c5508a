# mtkit: every set-up step is one of these targets.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export OMP_NUM_THREADS ?= 2
DEMO_MINUTES ?= 15

.PHONY: install test test-fast demo bench bench-peers clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# torch==2.13.0 first: the local CPU wheel, so `torch>=2.4` below installs nothing from CUDA.
install: $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,ctranslate2,serve]'

test:
	$(PY) -m pytest -q -x --durations=15

test-fast:
	$(PY) -m pytest -q -m 'not slow'

demo: install
	MINUTES=$(DEMO_MINUTES) PY=$(PY) bash recipes/multi30k-en-de/run.sh

bench:
	$(PY) benchmarks/run.py

bench-peers:
	PY=$(PY) bash benchmarks/peers.sh

clean:
	rm -rf build *.egg-info .pytest_cache demo-run bench-out
