#!/bin/sh
# SPDX-License-Identifier: MIT
# bootstrap.sh: make a fresh Debian 12 machine ready and build cicheck.
# Installs only the packages that are missing (apt-get update first; uses
# sudo when not root), then configures and builds into ./build.
# Usage: scripts/bootstrap.sh [BUILD_DIR]
#   CIC_BOOTSTRAP_FUZZ=1  also what scripts/fuzz.sh needs (clang and its
#                         libFuzzer and sanitizer runtimes)
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}

pkgs="meson ninja-build pkg-config gcc g++ libopenblas-dev libmpfr-dev libgmp-dev
libcmocka-dev gnuplot-nox libjansson-dev libtomlplusplus-dev python3-numpy
libxml2-utils libflint-arb-dev"
[ "${CIC_BOOTSTRAP_FUZZ:-0}" = 1 ] && pkgs="$pkgs clang libclang-rt-14-dev"

missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "bootstrap: installing$missing" >&2
    if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q $missing
fi

if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build"
fi
ninja -C "$build"
