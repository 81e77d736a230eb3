# `make run` sets up and launches the app on its demo; `make test` sets up and runs every test.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NATIVE := $(VENV)/.native

.PHONY: install run test lint bench clean

install: $(STAMP) $(NATIVE)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

# The native LSTM, GRU and SimpleRNN kernels (~60 s of g++); without a compiler the app uses
# TensorFlow's loops.
$(NATIVE): $(STAMP) lstmviz/engine/native/src/lstm_kernels.cc lstmviz/engine/native/src/gru_kernels.cc \
		lstmviz/engine/native/src/rnn_kernels.cc lstmviz/engine/native/src/step_norms.cc lstmviz/engine/native/src/gate_stats.cc \
		lstmviz/engine/native/src/panel_gemm.h lstmviz/engine/native/src/kernel_common.h lstmviz/engine/native/src/cell_activations.h \
		lstmviz/engine/native/src/gate_sums.h \
		lstmviz/engine/native/kernels.py
	$(PY) -m lstmviz.engine.native
	touch $(NATIVE)

run: install
	$(PY) main.py --demo

# The tests in TEST_WORKERS processes (pytest-xdist), each test file in one of them (its module
# fixtures made once), the heaviest files first; tests marked `serial` run while the others
# wait (tests/conftest.py).
# Many tests wait for a subprocess, a computing process or Qt: one worker more than cores.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))

test: install
	QT_QPA_PLATFORM=offscreen $(PY) -m ruff check lstmviz tests bench main.py
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

lint: install
	$(PY) -m ruff check lstmviz tests bench main.py

bench: install
	$(PY) bench/bench.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info lstmviz/engine/native/_lib
