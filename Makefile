# Two commands do all the set-up: `make test` and `make demo`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test test-slow demo bench bench-tune lint clean

# setup.py and the C source: a changed search core is rebuilt (pip install -e builds it in place)
$(STAMP): pyproject.toml setup.py search_space/_cwalk.c search_space/_cprofile.c search_space/_cprofile.h search_space/_cdag.c search_space/_cpart.c search_space/_cshape.c search_space/_canalyse.c search_space/_cutil.h sim/_csim.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,torch]'
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
# tuned on the STCP920 simulator (Ray workers on loopback) -> compiled under the tuning
# log -> a compiled artifact whose outputs are checked against onnxruntime on the same
# inputs (run --expect); prints the speed-ups over O3 and the guide's plan, writes the
# Perfetto traces and the tuning curve, and ends naming the files and `report`/`dashboard`.
DEMO_TRIALS ?= 300
DEMO_WORKERS ?= 2
demo: $(STAMP)
	mkdir -p $(OUT)
	$(GT) zoo resnet50 --batch 16 --weights inputs -o $(OUT)/resnet50.onnx
	$(GT) info $(OUT)/resnet50.onnx
	$(GT) schedule make $(OUT)/resnet50.onnx --plan resnet50 -o $(OUT)/resnet50_plan.json
	$(GT) simulate $(OUT)/resnet50.onnx --schedule $(OUT)/resnet50_plan.json --trace $(OUT)/resnet50_trace.json
	$(GT) tune $(OUT)/resnet50.onnx --trials $(DEMO_TRIALS) --workers $(DEMO_WORKERS) --seed 0 --log $(OUT)/resnet50_tune.jsonl
	$(GT) schedule make $(OUT)/resnet50.onnx --log $(OUT)/resnet50_tune.jsonl -o $(OUT)/resnet50_tuned.json
	$(GT) simulate $(OUT)/resnet50.onnx --schedule $(OUT)/resnet50_tuned.json --trace $(OUT)/resnet50_tuned_trace.json
	$(GT) compile $(OUT)/resnet50.onnx --log $(OUT)/resnet50_tune.jsonl -o $(OUT)/resnet50_tuned.stcobj
	$(PY) tools/ort_reference.py $(OUT)/resnet50.onnx --inputs $(OUT)/resnet50_inputs.npz --ref $(OUT)/resnet50_ort.npz
	$(GT) run $(OUT)/resnet50_tuned.stcobj --inputs $(OUT)/resnet50_inputs.npz -o $(OUT)/resnet50_tuned_out.npz --expect $(OUT)/resnet50_ort.npz --rtol 1e-4 --atol 1e-5
	@echo "files in $(OUT)/: resnet50.onnx (model), resnet50_plan.json and resnet50_tuned.json (schedules),"
	@echo "  resnet50_tune.jsonl (tuning log), resnet50_tune.journal (studies), resnet50_tune.curve.png (tuning curve),"
	@echo "  resnet50_trace.json and resnet50_tuned_trace.json (Perfetto traces: ui.perfetto.dev),"
	@echo "  resnet50_tuned.stcobj (artifact), resnet50_inputs.npz, resnet50_ort.npz (onnxruntime), resnet50_tuned_out.npz (checked)"
	@echo "next: $(GT) report $(OUT)/resnet50_tune.jsonl --model $(OUT)/resnet50.onnx -o $(OUT)/report.html"
	@echo "      $(GT) dashboard $(OUT)/resnet50_tune.jsonl   (then open http://127.0.0.1:8080/dashboard)"

bench: $(STAMP)
	$(PY) bench/sim_speed.py
	$(PY) bench/logs_load.py
	$(PY) bench/tune_workers.py
	$(PY) bench/search_efficiency.py
	$(PY) bench/tune_kill.py
	$(PY) bench/driver_scale.py --quick --out bench/results/quick

# The benchmark suite (bench/__main__.py): ten models x (O0-O3, the guide's plans, guided,
# TPE, NSGA-II, random) at equal measurement budgets; tables and plots in bench/results/suite.
# BENCH_ARGS=--quick for a CI-sized run.
BENCH_ARGS ?=
bench-tune: $(STAMP)
	$(PY) -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info demo_out search_space/_cwalk*.so
