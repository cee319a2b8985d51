# mgkflow: two commands that work on a fresh machine.
#   make demo  - set up .venv and run the ordering comparison on built-in synthetic data
#   make test  - set up .venv and run the test suite and the package's doctests (GPU tests skip without a GPU)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint venv clean

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test,chem]" ruff
	# python-tsp without its tsplib95 pin (which would pull networkx back to 2.x)
	$(PY) -m pip install -q --no-deps "python-tsp==0.5.0"
	$(PY) -c "import python_tsp.heuristics, networkx; assert int(networkx.__version__.split('.')[0]) >= 3"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/mgkflow compare nws ba --n-graphs 16 --labeled --orderings natural,random,rcm,pbr,tsp,morton,hilbert \
		--solve --out reports/demo

test: $(STAMP)
	$(PY) -m ruff check mgkflow tests datasets
	$(PY) -m pytest -q --doctest-modules tests mgkflow

lint: $(STAMP)
	$(PY) -m ruff check mgkflow tests datasets

clean:
	rm -rf $(VENV) reports/demo .pytest_cache
