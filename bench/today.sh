#!/bin/sh
# SPDX-License-Identifier: MIT
# today.sh: build "today's code" for the benchmark's comparison (part (6) of
# bench/run.sh): the cicheck of commit TODAY_COMMIT, the main on which the
# performance issue (whole models, a proven truth at a third of the cost)
# was filed: its truth was a plain MPFR run at mpfr_prec plus a certificate
# of sample 0 at mpfr_prec + 64 bits, through the MPFR kernel of that day.
# The sources come from this clone's own history (git archive), the build
# goes to build-today/ with meson's default build type, as build/ has, and
# is kept until the commit changes. Prints the binary's path on stdout;
# exits 77 with the reason on stderr when it cannot be built here (a
# shallow clone without that commit, no git).
# Usage: bench/today.sh
set -eu
cd "$(dirname "$0")/.."
TODAY_COMMIT=62a0f44
dir=build-today
stamp="$dir/commit"

if ! command -v git >/dev/null 2>&1 || ! git rev-parse --git-dir >/dev/null 2>&1; then
    echo "today.sh: not a git clone, so today's code ($TODAY_COMMIT) cannot be built" >&2
    exit 77
fi
full=$(git rev-parse --verify --quiet "$TODAY_COMMIT^{commit}") || {
    echo "today.sh: commit $TODAY_COMMIT is not in this clone (a shallow clone? 'git fetch --unshallow')" >&2
    exit 77
}
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$full" ] && [ -x "$dir/build/cicheck" ]; then
    echo "$dir/build/cicheck"
    exit 0
fi
rm -rf "$dir"
mkdir -p "$dir/src"
git archive --format=tar "$full" | tar -x -C "$dir/src"
meson setup "$dir/build" "$dir/src" >"$dir/setup.log" 2>&1 || {
    echo "today.sh: meson setup of $TODAY_COMMIT failed, see $dir/setup.log" >&2
    exit 1
}
ninja -C "$dir/build" cicheck >"$dir/build.log" 2>&1 || {
    echo "today.sh: the build of $TODAY_COMMIT failed, see $dir/build.log" >&2
    exit 1
}
echo "$full" >"$stamp"
echo "$dir/build/cicheck"
