#!/bin/sh
# SPDX-License-Identifier: MIT
# test_layers.sh: scripts/layers.py, the measure of the structure.
#   - planted: a tiny tree with a module map, built with cc, holding each
#     problem the script looks for (a call circle, an include that goes up,
#     a call up from a header's inline code, an include and a call past a
#     header-restricted declaration, a 901-line
#     file, a long function); each must be reported and the exit must be 1.
#     The same tree without them (a file of exactly 900 lines) exits 0, and
#     usage errors exit 2, so the checker cannot pass by finding nothing;
#   - real: the source tree against its own build (CIC_SOURCE_ROOT,
#     CIC_BUILD_ROOT). With CIC_LAYERS_ENFORCE=0 the report is printed but
#     only a usage error fails; with 1 (the default) it must be clean.
# Usage: test_layers.sh   (CIC_SOURCE_ROOT, CIC_BUILD_ROOT: as meson sets them)
set -u
root=${CIC_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
build=${CIC_BUILD_ROOT:-$root/build}
. "$(dirname "$0")/lib.sh"
cic_need "$py" "Debian's python3 runs scripts/layers.py"
cic_need nm "binutils: the call graph"
cic_need cc "builds the planted tree"
cic_test_init layers
layers="$root/scripts/layers.py"

# plant DIR BAD: the fake tree under DIR and its objects, named as meson
# names them, in DIR/build; BAD=1 adds the problems.
plant() {
    d=$1
    mkdir -p "$d/src/base" "$d/src/lo" "$d/src/mid" "$d/src/hi" "$d/docs" "$d/build/fake.p"
    cat >"$d/docs/design.md" <<'EOF'
# fake design
## 1. Map
### Module map

Each module after the ones it includes; all include src/base.

| module | files | what it does | includes |
|---|---|---|---|
| src/base | b.h | types | nothing |
| src/lo | lo.c, lo.h, lo_priv.h | the bottom | nothing |
| src/mid | m1.c, m2.c | the middle | lo |
| `src/hi` | hi.c, hi.h | the top | mid, lo (lo.h: lo_f only), base |

## 2. Next
EOF
    echo 'typedef int cic_b;' >"$d/src/base/b.h"
    printf '#include "../base/b.h"\ncic_b lo_f(void);\n' >"$d/src/lo/lo.h"
    printf 'int lo_secret(void);\n' >"$d/src/lo/lo_priv.h"
    printf '#include "lo.h"\n#include "lo_priv.h"\ncic_b lo_f(void) { return 1; }\nint lo_secret(void) { return 2; }\n' \
        >"$d/src/lo/lo.c"
    printf '#include "../lo/lo.h"\nint m1_f(void);\nint m2_g(void);\n' >"$d/src/mid/mid.h"
    printf '#include "mid.h"\nint m1_f(void) { return lo_f(); }\n' >"$d/src/mid/m1.c"
    printf '#include "mid.h"\nint m2_g(void) { return 3; }\n' >"$d/src/mid/m2.c"
    printf '#include "../mid/mid.h"\nint hi_h(void);\n' >"$d/src/hi/hi.h"
    printf '#include "hi.h"\n#include "../lo/lo.h"\nint hi_h(void) { return m1_f() + lo_f(); }\n' >"$d/src/hi/hi.c"
    # 900 lines: at the limit, not over it
    { echo 'int big_n = 1;'; i=1; while [ $i -lt 900 ]; do echo '/* filler */'; i=$((i + 1)); done; } \
        >"$d/src/lo/big.c"
    # a function of 60 lines: under the limit
    { echo 'int fn_long(int x)'; echo '{'; i=0; while [ $i -lt 57 ]; do echo '    x = x * 3 + 1;'; i=$((i + 1)); done
      echo '    return x;'; echo '}'; } >"$d/src/lo/longfn.c"
    if [ "$2" = 1 ]; then
        # mid/m2.c calls back into m1.c, which calls m2.c: a circle
        printf '#include "mid.h"\nint m1_f(void) { return lo_f() + m2_g(); }\n' >"$d/src/mid/m1.c"
        printf '#include "mid.h"\nint m2_g(void) { return m1_f(); }\n' >"$d/src/mid/m2.c"
        # mid includes hi, which declares mid: up the layers
        printf '#include "../hi/hi.h"\nint m3_x(void) { return 0; }\n' >"$d/src/mid/m3.c"
        # hi may see lo.h alone: lo_priv.h and lo_secret are undeclared
        printf '#include "hi.h"\n#include "../lo/lo.h"\n#include "../lo/lo_priv.h"\nint hi_h(void) { return m1_f() + lo_f() + lo_secret(); }\n' \
            >"$d/src/hi/hi.c"
        # code in a header (a static inline) calls up into mid; a comment
        # naming another call does not count
        printf '/*\n *   m1_f() is only named here\n */\nint m2_g(void);\nstatic inline int lo_up(void)\n{\n    return m2_g();\n}\n' \
            >"$d/src/lo/lo_inl.h"
        echo '/* one line too many */' >>"$d/src/lo/big.c"
        { echo 'int fn_long(int x)'; echo '{'; i=0; while [ $i -lt 160 ]; do echo '    x = x * 3 + 1;'; i=$((i + 1)); done
          echo '    return x;'; echo '}'; } >"$d/src/lo/longfn.c"
    fi
    for c in "$d"/src/*/*.c; do
        rel=${c#"$d"/}
        cc -c -I "$d/src" -o "$d/build/fake.p/$(echo "$rel" | tr / _).o" "$c" || return 1
    done
}

plant "$tmp/bad" 1 || { bad "the planted tree builds"; cic_test_done; }
expect_rc 1 "planted problems: exit 1" "$py" "$layers" --root "$tmp/bad"
cp "$tmp/out" "$tmp/bad.txt"
has "$tmp/bad.txt" "circle 1 (2 files): src/mid/m1.c src/mid/m2.c" "the call circle"
has "$tmp/bad.txt" "  src/mid/m1.c -> src/mid/m2.c: call m2_g" "the circle names the symbol m1.c uses"
has "$tmp/bad.txt" "  src/mid/m2.c -> src/mid/m1.c: call m1_f" "and the one m2.c uses"
has "$tmp/bad.txt" "back-edge mid -> hi: src/mid/m3.c -> src/hi/hi.h: include ../hi/hi.h" \
    "an include into a module above is a back-edge"
has "$tmp/bad.txt" "undeclared hi -> lo: src/hi/hi.c -> src/lo/lo_priv.h: include ../lo/lo_priv.h" \
    "a header outside the declared list is undeclared"
has "$tmp/bad.txt" "undeclared hi -> lo: src/hi/hi.c -> src/lo/lo.c: call lo_secret" \
    "a call to a symbol the declared header does not declare is undeclared (and lo_f is not named)"
has "$tmp/bad.txt" "back-edge lo -> mid: src/lo/lo_inl.h -> src/mid/m2.c: call m2_g" \
    "a call in a header's inline code is an edge (nm cannot see it)"
if grep -q "lo_inl.h -> src/mid/m1.c" "$tmp/bad.txt"; then bad "a call named in a header's comment is an edge"
else ok "a call named in a header's comment is no edge"; fi
has "$tmp/bad.txt" "long file src/lo/big.c: 901 lines (> 900)" "the 901-line file"
has "$tmp/bad.txt" "circles 1, undeclared edges 4 (back-edges 2), files > 900: 1" "the summary counts them"
if cic_have pmccabe; then
    has "$tmp/bad.txt" "long function src/lo/longfn.c:1 fn_long: 164 lines (> 120)" "the long function"
else
    has "$tmp/bad.txt" "pmccabe not installed: function lengths not checked" "no pmccabe: said so"
fi
expect_rc 1 "--json: exit 1" "$py" "$layers" --root "$tmp/bad" --json
"$py" -c 'import json, sys; r = json.load(open(sys.argv[1]))
print(r["ok"], len(r["circles"]), len(r["undeclared"]), r["back_edges"], r["long_files"][0]["lines"], r["implicit_modules"])' \
    "$tmp/out" >"$tmp/json" 2>&1
has "$tmp/json" "False 1 4 2 901 ['base']" "--json carries the same findings"
expect_rc 1 "--max-file 2000 still finds the rest" "$py" "$layers" --root "$tmp/bad" --max-file 2000
has "$tmp/out" "files > 2000: 0" "--max-file is the limit"

plant "$tmp/good" 0 || { bad "the clean tree builds"; cic_test_done; }
expect_rc 0 "the clean tree: exit 0" "$py" "$layers" --root "$tmp/good"
has "$tmp/out" "include edges 9, call edges 3, circles 0, undeclared edges 0 (back-edges 0), files > 900: 0" \
    "the clean tree: its edges counted, nothing found"
has "$tmp/out" "note: the module map says hi declares base; no file does" "a declaration no file uses is a note"

# usage errors: exit 2, never a clean pass
expect_rc 2 "no src/: exit 2" "$py" "$layers" --root "$tmp/none"
rm -rf "$tmp/good/build"
expect_rc 2 "no objects: exit 2" "$py" "$layers" --root "$tmp/good"
expect_err "build it first" "no objects: said so"
expect_rc 2 "no module map: exit 2" "$py" "$layers" --root "$tmp/bad" --design "$root/LICENSE"
expect_err "no \"### Module map\" heading" "no module map: said so"
expect_rc 2 "an unknown option: exit 2" "$py" "$layers" --bogus

# the real tree
"$py" "$layers" --root "$root" --build "$build" >"$tmp/real" 2>&1
rc=$?
sed 's/^/    /' "$tmp/real"
if [ "${CIC_LAYERS_ENFORCE:-1}" = 0 ]; then
    if [ "$rc" -le 1 ]; then ok "the source tree measured (exit $rc, not enforced)"
    else bad "the source tree: exit $rc (a usage error)"; fi
elif [ "$rc" -eq 0 ]; then ok "the source tree: no circle, undeclared edge, long file or function"
else bad "the source tree: exit $rc (CIC_LAYERS_ENFORCE=1)"; fi
cic_test_done
