# Hark: `make run` runs the daemon, `make test` runs every test.
#
#   make deps    install the Debian packages Hark needs (no-op when present)
#   make build   debug build (.build/debug/harkd, .build/debug/hark)
#   make run     harkd on the desktop session, or in a private sandbox when there is none
#   make test    build, then every test inside scripts/sandbox (private bus, PulseAudio,
#                Speech Dispatcher); TEST_FLAGS="--filter X" narrows it, TEST_TIMEOUT
#                (default 1200 s) stops a hung run
#   make test-pipewire   build, then the sound tests (PIPEWIRE_TESTS) in
#                scripts/sandbox --pipewire (PipeWire instead of PulseAudio). Not yet
#                part of `make test`: DuckingTests fail there (a new stream's volume
#                reads 0 at first on pipewire-pulse)
#   make bench   release build, then the benchmarks inside scripts/sandbox
#   make clean   remove build products (distclean: the whole .build, package copies too)

SWIFT ?= swift
TEST_FLAGS ?=
TEST_TIMEOUT ?= 1200
RUN_ARGS ?=
# The tests that play, duck or record sound: run again on PipeWire.
PIPEWIRE_TESTS ?= DuckingTests|SpeechTests

# Swift lives in /opt/swift here, which is not always on PATH.
ifeq ($(shell command -v $(SWIFT) 2>/dev/null),)
export PATH := /opt/swift/usr/bin:$(PATH)
endif

.PHONY: deps build run test test-pipewire test-pipewire-run build-tests bench clean distclean

deps:
	@scripts/deps

build: deps
	$(SWIFT) build

run: build
	@scripts/run $(RUN_ARGS)

# -q: only warnings and errors, not one line per compiled file. TEST_TIMEOUT (seconds)
# turns a hang into a failure, e.g. a process a test started that keeps swift test's
# output pipe open (swift test waits for it to close).
build-tests: deps
	@echo "==> swift build --build-tests"
	@$(SWIFT) build --build-tests -q

# Every test on PulseAudio, then the sound-related ones again on PipeWire (pipewire-pulse).
test: build-tests
	@echo "==> swift test, in scripts/sandbox"
	@timeout --foreground $(TEST_TIMEOUT) scripts/sandbox $(SWIFT) test --skip-build -q $(TEST_FLAGS); \
	status=$$?; \
	if [ $$status -eq 124 ]; then \
		echo "make test: stopped after $(TEST_TIMEOUT) s (TEST_TIMEOUT): a test hangs, or a process it started holds swift test's output open" >&2; \
	fi; \
	exit $$status
	@if [ -z "$(TEST_FLAGS)" ]; then $(MAKE) --no-print-directory test-pipewire-run; fi

test-pipewire: build-tests
	@$(MAKE) --no-print-directory test-pipewire-run

# Without the build (for a run right after `make test`, which has built already).
test-pipewire-run:
	@echo "==> swift test --filter \"$(PIPEWIRE_TESTS)\", in scripts/sandbox --pipewire"
	@timeout --foreground $(TEST_TIMEOUT) scripts/sandbox --pipewire $(SWIFT) test --skip-build -q --filter "$(PIPEWIRE_TESTS)"; \
	status=$$?; \
	if [ $$status -eq 124 ]; then \
		echo "make test-pipewire: stopped after $(TEST_TIMEOUT) s (TEST_TIMEOUT): a test hangs" >&2; \
	fi; \
	exit $$status

bench: deps
	$(SWIFT) build -c release
	@if [ -x .build/release/hark-bench ]; then \
		HARKD=.build/release/harkd scripts/sandbox .build/release/hark-bench --json .build/bench-results.json; \
	else \
		echo "make bench: there is no benchmark yet (.build/release/hark-bench was not built)" >&2; \
		exit 1; \
	fi

clean:
	$(SWIFT) package clean

distclean:
	rm -rf .build .build-*/ .build_*/
