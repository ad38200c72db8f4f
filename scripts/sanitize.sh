#!/bin/sh
# SPDX-License-Identifier: MIT
# sanitize.sh: the whole test suite under AddressSanitizer (with
# LeakSanitizer) and UndefinedBehaviorSanitizer, stopping at the first error.
# Configures a separate build dir (default build-sanitize; the normal ./build
# is left alone), builds with -fno-sanitize-recover=all so any UB report is
# fatal, and runs `meson test`. Exits non-zero on any failure.
#
# OpenBLAS, MPFR, GMP and toml++ come from Debian and are not instrumented:
# ASan still sees their malloc/free, but not their internal accesses.
# scripts/lsan.supp (if present) lists leak suppressions limited to those
# third-party libraries.
#
# Usage: scripts/sanitize.sh [BUILD_DIR]
#   extra arguments after BUILD_DIR go to `meson test` (e.g. a test name).
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
build=${1:-build-sanitize}
[ $# -gt 0 ] && shift

opts="-Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false
-Dc_args=-fno-sanitize-recover=all -Dcpp_args=-fno-sanitize-recover=all
-Db_ndebug=false"
if [ -f "$build/build.ninja" ]; then
    # shellcheck disable=SC2086
    meson configure "$build" $opts
else
    # shellcheck disable=SC2086
    meson setup "$build" $opts
fi
ninja -C "$build"

# An ASAN_OPTIONS / UBSAN_OPTIONS already in the environment is appended,
# so it can override these (later options win), e.g.
# ASAN_OPTIONS=fast_unwind_on_malloc=0 for full leak stacks through the
# uninstrumented libraries.
ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}
if [ -f "$root/scripts/lsan.supp" ]; then
    LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp:print_suppressions=0"
    export LSAN_OPTIONS
fi
export ASAN_OPTIONS UBSAN_OPTIONS

start=$(date +%s)
status=0
meson test -C "$build" --print-errorlogs \
    --timeout-multiplier "${CIC_SANITIZE_TIMEOUT_MULT:-4}" "$@" || status=$?
echo "sanitize: meson test took $(( $(date +%s) - start )) s, exit $status" >&2
exit $status
