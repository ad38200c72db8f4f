#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/guide/repo.sh: a page whose commands run in the repository (its
# cases/, reference/ baselines and scripts/) gets them linked into its
# temporary folder; what the commands write (reports/, shards, plots) stays
# there. Env: SRC (the source tree).
set -eu
for d in cases reference scripts; do
    ln -s "$SRC/$d" "$d"
done
