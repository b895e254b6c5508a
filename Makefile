# mtkit: every set-up step is one of these targets.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export OMP_NUM_THREADS ?= 2
DEMO_MINUTES ?= 15

# Made by every install: targets that only need an installed .venv depend on it, so a fresh clone installs
# first and later runs do not reinstall (again only when pyproject.toml is newer than the last install).
INSTALLED := $(VENV)/.installed

.PHONY: install test test-fast demo bench bench-peers clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# torch==2.13.0 first: the local CPU wheel, so `torch>=2.4` below installs nothing from CUDA.
install: $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,ctranslate2,serve]'
	touch $(INSTALLED)

$(INSTALLED): pyproject.toml
	$(MAKE) --no-print-directory install

test: $(INSTALLED)
	$(PY) -m pytest -q -x --durations=15

test-fast: $(INSTALLED)
	$(PY) -m pytest -q -m 'not slow'

demo: install
	MINUTES=$(DEMO_MINUTES) PY=$(PY) bash recipes/multi30k-en-de/run.sh

bench:
	$(PY) benchmarks/run.py

bench-peers:
	PY=$(PY) bash benchmarks/peers.sh

clean:
	rm -rf build *.egg-info .pytest_cache demo-run bench-out
