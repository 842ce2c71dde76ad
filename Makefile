# Thin driver around CMake. Quick start: `make run` and `make test` (README).
# On a cluster with the dependencies already loaded as modules: SKIP_DEPS=1 make ...
BUILD_DIR ?= build
SANITIZE_DIR ?= build-sanitize
BUILD_TYPE ?= Release
# The CPUs this process may run on. GNU nproc honours OMP_NUM_THREADS and OMP_THREAD_LIMIT (HPC
# module set-ups export OMP_NUM_THREADS=1, and nproc then prints 1): the count ignores them, but
# still honours CPU affinity (taskset, a batch job's cgroup).
JOBS ?= $(shell env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
RANKS ?= 2
SKIP_DEPS ?= 0
CTEST_ARGS ?=

.PHONY: all deps configure build run test sanitize bench format format-check clean

all: build

deps:
ifeq ($(SKIP_DEPS),1)
	@echo "SKIP_DEPS=1: using the toolchain and modules already in the environment"
else
	@bash scripts/install-deps.sh
endif

configure: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	@bash scripts/mpirun.sh -n $(RANKS) $(BUILD_DIR)/fluence train inputs/quickstart.toml --out out/quickstart --force
	@echo "Results: out/quickstart/results.h5  (plot: /usr/bin/python3 analysis/plot_training.py out/quickstart/results.h5)"

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# The whole suite built with AddressSanitizer + UndefinedBehaviorSanitizer in a build directory of its
# own (docs/operations.md "Sanitizer build"); tests/sanitizer/run_checked.sh sets the runtime options.
sanitize: deps
	@cmake -S . -B $(SANITIZE_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLUENCE_SANITIZE=ON >/dev/null
	@cmake --build $(SANITIZE_DIR) -j $(JOBS)
	@cd $(SANITIZE_DIR) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

bench: build
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target benchmarks
	@bash bench/run_all.sh $(BUILD_DIR)

format:
	@clang-format -i $$(git ls-files '*.cpp' '*.hpp')

format-check:
	@clang-format --dry-run --Werror $$(git ls-files '*.cpp' '*.hpp')

clean:
	@rm -rf $(BUILD_DIR) $(SANITIZE_DIR)
