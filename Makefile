# ptn: the two set-up commands are `make demo` and `make test` (see README.md).
# Every target installs what it needs first (`make deps`, quiet when all is present).

BUILD      ?= build
JOBS       ?= $(shell nproc)
SANITIZE   ?= 0
CMAKE_ARGS ?=
FUZZ_SECONDS ?= 60

DEBIAN_PACKAGES = build-essential cmake pkg-config ccache git \
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcpp-httplib-dev \
  libpcre2-dev libcli11-dev nodejs npm clang libclang-rt-14-dev gnuplot-nox python3-numpy \
  chromium libhiredis-dev redis-server haproxy

ifeq ($(SANITIZE),1)
  BUILD := build-san
  CMAKE_ARGS += -DPTN_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
endif

.PHONY: all deps build test test-aarch64 bench demo clean fuzz

all: build

deps:
	@scripts/install-deps.sh $(DEBIAN_PACKAGES)

$(BUILD)/CMakeCache.txt:
	@cmake -S . -B $(BUILD) $(CMAKE_ARGS) >/dev/null

build: deps $(BUILD)/CMakeCache.txt
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@scripts/test-setup.sh
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

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
	rm -rf build build-san build-bench build-fuzz build-aarch64
