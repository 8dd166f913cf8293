# Two commands do all the set-up: `make test` and `make demo`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test test-slow demo bench lint clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

test: lint
	$(VENV)/bin/pytest -q -n 2

test-slow: $(STAMP)
	$(VENV)/bin/pytest -q -m slow

GT := $(VENV)/bin/graphtune
OUT := demo_out

# The main job end to end: model zoo -> import -> the guide's ResNet-50 plan and O3 ->
# simulated on the STCP920 -> a compiled artifact that runs.
demo: $(STAMP)
	mkdir -p $(OUT)
	$(GT) zoo resnet50 --batch 16 --weights inputs -o $(OUT)/resnet50.onnx
	$(GT) info $(OUT)/resnet50.onnx
	$(GT) schedule make $(OUT)/resnet50.onnx --plan resnet50 -o $(OUT)/resnet50_plan.json
	$(GT) schedule show $(OUT)/resnet50_plan.json
	$(GT) simulate $(OUT)/resnet50.onnx --schedule $(OUT)/resnet50_plan.json --trace $(OUT)/resnet50_trace.json
	$(GT) simulate $(OUT)/resnet50.onnx --level 3
	$(GT) zoo tiny_cnn --batch 4 -o $(OUT)/tiny_cnn.onnx
	$(GT) compile $(OUT)/tiny_cnn.onnx --level 3 -o $(OUT)/tiny_cnn.stcobj
	$(GT) run $(OUT)/tiny_cnn.stcobj -o $(OUT)/tiny_cnn_out.npz

bench: $(STAMP)
	$(PY) bench/sim_speed.py
	$(PY) bench/logs_load.py

clean:
	rm -rf $(VENV) build *.egg-info demo_out
