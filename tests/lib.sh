# SPDX-License-Identifier: MIT
# lib.sh: what the shell tests share (sourced, not run). A test sources it,
# calls cic_test_init NAME, reports checks with ok / bad / expect_rc / has /
# expect_err, and ends with cic_test_done, which prints the counts and exits
# 1 when a check failed. A tool is never assumed: a test that cannot run
# without one calls cic_need TOOL first, which exits 77 (meson reports the
# test as skipped); a single check that needs one asks cic_have TOOL and,
# without it, reports skip WHAT WHY instead of passing.
#
#   tmp        a private temporary folder, removed on exit
#   py         Debian's /usr/bin/python3 (CIC_TEST_PYTHON: another one, or
#              a missing one to see the skips)
#   CIC_TEST_TIMEOUT  seconds a command under expect_rc may take (default
#              600; 0: no limit), so a hang fails instead of stalling CI

# shellcheck disable=SC2034 # used by the tests that source this file
py=${CIC_TEST_PYTHON:-/usr/bin/python3}

# cic_test_init NAME
cic_test_init() {
    cic_test_name=$1
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/cicheck-$1.XXXXXX") || exit 1
    trap 'rm -rf "$tmp"' EXIT
    pass=0
    fail=0
    skipped=0
}

# cic_tiny_rmsnorm NAME: a tiny rmsnorm case (d_model 8, 4 tokens, 2
# samples, one layer; f32-fixed-order) with fold-rmsnorm-gamma, on stdout;
# a caller appends its own transforms.
cic_tiny_rmsnorm() {
    printf 'name = "%s"\n[model]\nblock = "rmsnorm"\nd_model = 8\nheads = 2\n' "$1"
    printf 'tokens = 4\nsamples = 2\nlayers = 1\nseed = 5\n[engines]\nf32 = ["fixed-order"]\n'
    printf '[[transforms]]\nname = "fold"\nkind = "fold-rmsnorm-gamma"\n'
}

# cic_tiny_case NAME [SEEDS]: a tiny pre-LN case (d_model 8, 4 tokens, one
# layer; f32-openblas) with fuse-layernorm and a random rotation after it,
# on stdout; with SEEDS ("1, 2, 3"), a sweep over d_model 8 and 16 and those
# seeds instead of d_model 8.
cic_tiny_case() {
    printf 'name = "%s"\n[model]\nblock = "preln"\n' "$1"
    [ $# -ge 2 ] || echo 'd_model = 8'
    printf 'heads = 2\ntokens = 4\nsamples = 1\nlayers = 1\nd_out = 4\n'
    printf '[engines]\nf32 = ["openblas"]\n'
    [ $# -lt 2 ] || printf '[sweep]\nd_model = [8, 16]\nseed = [%s]\n' "$2"
    printf '[[transforms]]\nname = "fuse"\nkind = "fuse-layernorm"\n'
    printf '[[transforms]]\nname = "rotate"\nkind = "rotate"\nafter = "fuse"\n'
    printf 'q = "random"\nseed = 3\n'
}

# cic_have TOOL: TOOL (a name on PATH or a path) can be run.
cic_have() { command -v "$1" >/dev/null 2>&1; }

# cic_need_numpy WHY: skip the whole test (exit 77) without Debian's python3
# ($py) and its numpy.
cic_need_numpy() {
    cic_need "$py" "$1"
    if ! "$py" -c 'import numpy' 2>/dev/null; then
        echo "SKIP: $py has no numpy (Debian's python3-numpy)"
        exit 77
    fi
}

# cic_need TOOL [WHY]: skip the whole test (exit 77) when TOOL is missing.
cic_need() {
    cic_have "$1" && return 0
    echo "SKIP: $1 not found${2:+ ($2)}"
    exit 77
}

ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL - $1"; }
# skip WHAT WHY: the check WHAT did not run (WHY: the missing tool).
skip() { skipped=$((skipped + 1)); echo "SKIP - $1 ($2)"; }

# expect_rc WANT DESCRIPTION CMD...: CMD's stdout and stderr go to $tmp/out
# and $tmp/err; the check passes when it exits with WANT.
expect_rc() {
    want=$1; what=$2; shift 2
    if [ "${CIC_TEST_TIMEOUT:-600}" -gt 0 ] && command -v timeout >/dev/null 2>&1; then
        timeout "${CIC_TEST_TIMEOUT:-600}" "$@" >"$tmp/out" 2>"$tmp/err"
    else
        "$@" >"$tmp/out" 2>"$tmp/err"
    fi
    rc=$?
    if [ "$rc" -eq "$want" ]; then ok "$what (exit $rc)"; else
        bad "$what: exit $rc, expected $want"; sed 's/^/    /' "$tmp/err" | head -5; fi
}

# has FILE TEXT DESCRIPTION: FILE contains TEXT (a fixed string).
has() {
    if grep -qF -- "$2" "$1"; then ok "$3"; else
        bad "$3: no '$2' in $1"; sed 's/^/    /' "$1" | head -5; fi
}

# expect_err TEXT DESCRIPTION: the stderr of the last expect_rc holds TEXT.
expect_err() {
    if grep -qF -- "$1" "$tmp/err"; then ok "$2"; else
        bad "$2: stderr lacks '$1'"; sed 's/^/    /' "$tmp/err" | head -5; fi
}

cic_test_done() {
    echo "$cic_test_name: $pass passed, $fail failed, $skipped skipped"
    [ "$fail" -eq 0 ]
    exit $?
}
