# ptn: the two set-up commands are `make demo` and `make test` (see README.md).
# Every target installs what it needs first (`make deps`, quiet when all is present).

BUILD      ?= build
JOBS       ?= $(shell nproc)
SANITIZE   ?= 0
COVERAGE   ?= 0
CMAKE_ARGS ?=
FUZZ_SECONDS ?= 60

DEBIAN_PACKAGES = build-essential cmake pkg-config ccache git \
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcpp-httplib-dev \
  libpcre2-dev libcli11-dev nodejs npm clang libclang-rt-14-dev gnuplot-nox python3-numpy \
  chromium libhiredis-dev redis-server haproxy gcovr

# The sanitizer build is -O1 with line tables only (-g1): the library files compile in about 0.4 of
# the time of -O2 -g (docs/reliability.md), and ASan's reports still name file and line.
ifeq ($(SANITIZE),1)
  BUILD := build-san
  CMAKE_ARGS += -DPTN_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
endif
BUILD_COV := $(BUILD)-cov
# COVERAGE=1 adds gcov instrumentation (alone or with SANITIZE=1) in its own directory, build-cov or
# build-san-cov, so an uninstrumented tree is never reused by mistake; `make coverage` prints the table.
ifeq ($(COVERAGE),1)
  BUILD := $(BUILD)-cov
  CMAKE_ARGS += -DPTN_COVERAGE=ON
endif

.PHONY: all deps build test test-aarch64 bench demo clean fuzz coverage

all: build

deps:
	@scripts/install-deps.sh $(DEBIAN_PACKAGES)

$(BUILD)/CMakeCache.txt:
	@cmake -S . -B $(BUILD) $(CMAKE_ARGS) >/dev/null

build: deps $(BUILD)/CMakeCache.txt
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@scripts/test-setup.sh
ifeq ($(COVERAGE),1)
	@find $(BUILD) -name '*.gcda' -delete  # counts from this run only (test discovery at build time runs the tests too)
endif
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# Line and branch coverage of src/ per folder from a COVERAGE=1 test run (scripts/coverage.sh);
# `make coverage SANITIZE=1` is CI's combination, `CTEST_ARGS='-L core'` narrows the run.
coverage:
	@$(MAKE) --no-print-directory test COVERAGE=1
	@JOBS=$(JOBS) scripts/coverage.sh $(BUILD_COV)

# Cross-build for aarch64 in build-aarch64 and run the kernel tests and `ptn verify` at every
# NEON level under qemu-aarch64 user mode (scripts/test-aarch64.sh; CI runs it).
test-aarch64: deps
	@scripts/install-aarch64-deps.sh
	@JOBS=$(JOBS) scripts/test-aarch64.sh build-aarch64

bench: deps
	@cmake -S . -B build-bench -DPTN_BUILD_BENCH=ON -DPTN_BUILD_TESTS=OFF >/dev/null
	@cmake --build build-bench -j $(JOBS)
	@scripts/run-bench.sh build-bench

# libFuzzer targets built with clang in build-fuzz, each run FUZZ_SECONDS seconds (scripts/fuzz.sh).
fuzz: deps
	@JOBS=$(JOBS) scripts/fuzz.sh build-fuzz $(FUZZ_SECONDS)

demo: build
	@scripts/demo.sh $(BUILD)/ptn

clean:
	rm -rf build build-san build-cov build-san-cov build-bench build-fuzz build-aarch64
