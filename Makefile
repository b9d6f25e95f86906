# A thin front over CMake. The two commands of the README:
#   make test                                  set up, build, and run the tests
#   make gpt2 PROMPT="..." TOKENS=20 [BACKEND=cpu|cuda|opencl] [MODEL=dir] [TEMPERATURE=t]
# (MODEL defaults to models/brown-mini, a small GPT-2 trained on the Brown corpus; sampling
# defaults to temperature 0.8, top-k 40, seed 42: TEMPERATURE=0 is greedy.)
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
PROMPT ?= The capital of France is
TOKENS ?= 20
BACKEND ?= cpu
MODEL ?= models/brown-mini
PRECISION ?=
TEMPERATURE ?=

.PHONY: all setup configure build quiet-build test test-slow test-all test-arm64 gpt2 llama llama-model clean asan install fuzz

all: build

setup:
	@bash scripts/setup

# The generated Makefile, not CMakeCache.txt, marks a finished configure step: a configure that
# failed (a package missing) leaves a cache behind and is run again next time.
$(BUILD)/Makefile:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

configure: $(BUILD)/Makefile

build: setup configure
	cmake --build $(BUILD) -j $(JOBS)

# PoCL (the OpenCL tests' device) compiles each kernel variant in seconds; its cache lives in
# the build folder, shared by every test and by the sanitizer build (the same OpenCL source).
export POCL_CACHE_DIR ?= $(abspath $(BUILD))/pocl-cache

# make test: every handler, every operation, the fixtures. make test-slow runs the slow
# suite (label `slow`: the GPU core's kernel-variant matrices on PoCL, the op suites' whole
# matrices on OpenCL, the whole fixture on the interpreter, every kernel variant through
# NVRTC and the Metal check); make test-all is both, and CI runs both (tests/README.md).
test: build
	@bash scripts/setup-test-python $(BUILD)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE slow

test-slow: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L slow

test-all: test test-slow

# The cpu handler's kernel tables cross-built for arm64 and run under qemu-user (installs
# gcc-aarch64-linux-gnu and qemu-user when missing; scripts/test-arm64 says what it checks).
test-arm64:
	@bash scripts/test-arm64 build-arm64

# The build as a step of running a model: its output goes to $(BUILD)/build.log, not to the
# terminal, so the first line `make gpt2` prints is tern's own (the backend line). One line on
# stderr says when something was built; a failed build shows the end of its log.
quiet-build: setup
	@mkdir -p $(BUILD) && { [ -f $(BUILD)/Makefile ] || cmake -S . -B $(BUILD) $(CMAKE_FLAGS); } > $(BUILD)/build.log 2>&1 && \
	  cmake --build $(BUILD) -j $(JOBS) >> $(BUILD)/build.log 2>&1 || \
	  { tail -20 $(BUILD)/build.log >&2; echo "make: the build failed; the whole log is $(BUILD)/build.log" >&2; exit 1; }
	@! grep -q -e 'Building C object' -e 'Linking C' $(BUILD)/build.log || echo "make: built tern (log: $(BUILD)/build.log)" >&2

gpt2: quiet-build
	@$(BUILD)/tern generate --model "$(MODEL)" --prompt "$(PROMPT)" --tokens $(TOKENS) \
	    --backend $(BACKEND) $(if $(TEMPERATURE),--temperature $(TEMPERATURE)) \
	    $(if $(PRECISION),--precision $(PRECISION))

# make llama MODEL=DIR: the same for a Llama-family folder (Llama 3.x, Qwen2, SmolLM2:
# scripts/get-model fetches one; ../shared/fixtures/llama-tiny-a is the project's fixture).
# tern reads the family from the folder's config.json; there is no default model.
llama-model:
	@if [ "$(origin MODEL)" = file ]; then echo "make llama: give MODEL=DIR, a Llama-family folder (scripts/get-model NAME fetches one)" >&2; exit 1; fi
llama: llama-model gpt2

# make test's suite under AddressSanitizer and UndefinedBehaviorSanitizer.
asan: setup
	cmake -S . -B build-asan -DTERN_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)
	cmake --build build-asan -j $(JOBS)
	@bash scripts/setup-test-python build-asan
	cd build-asan && ctest --output-on-failure -j $(JOBS) -LE slow

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) build-asan

# The libFuzzer targets, each run for FUZZ_SECONDS (clang, with ASan and UBSan).
FUZZ_SECONDS ?= 30
fuzz: setup
	CC=clang cmake -S . -B build-fuzz -DTERN_FUZZ=ON -DTERN_FUZZ_SECONDS=$(FUZZ_SECONDS) -DTERN_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)
	cmake --build build-fuzz -j $(JOBS)
	cd build-fuzz && ctest --output-on-failure -L fuzz
