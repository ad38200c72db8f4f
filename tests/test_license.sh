#!/bin/sh
# SPDX-License-Identifier: MIT
# test_license.sh: the project is MIT licensed (LICENSE) and every source
# file says so in its first two lines (an SPDX-License-Identifier), so a
# file copied out of the tree keeps its licence.
# Usage: test_license.sh   (CIC_SOURCE_ROOT: the source tree)
set -u
root=${CIC_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/lib.sh"
cic_test_init license
cd "$root" || exit 1

grep -q "^MIT License" LICENSE && ok "LICENSE is the MIT licence" || bad "LICENSE is the MIT licence"
n=0
for f in $(find src include tests bench scripts .ci docs \
               \( -name '*.c' -o -name '*.h' -o -name '*.cpp' -o -name '*.sh' -o -name '*.py' \
                  -o -name '*.map' -o -name '*.1' -o -name meson.build -o -name run \) \
               -type f ! -path 'tests/fuzz-regressions/*' | sort) meson.build meson_options.txt; do
    n=$((n + 1))
    head -n 2 "$f" | grep -q "SPDX-License-Identifier: MIT" || bad "$f has no SPDX-License-Identifier: MIT"
done
[ "$n" -gt 100 ] && ok "$n source files carry the SPDX header" || bad "only $n source files found"
cic_test_done
