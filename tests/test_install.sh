#!/bin/sh
# SPDX-License-Identifier: MIT
# test_install.sh: libcicheck as a C user gets it from `meson install`.
#   - the build tree installs into a --destdir temporary folder: the binary,
#     libcicheck.so (with its soname links) and libcicheck.a, the public
#     header alone under include/cicheck/, cicheck.pc and cicheck(1)
#   - the shared library exports exactly the functions the header declares
#   - a tiny C program, built through `pkg-config --cflags --libs cicheck`
#     (PKG_CONFIG_PATH and PKG_CONFIG_SYSROOT_DIR pointing into the destdir)
#     once against the shared and once (--static) against the static
#     library, loads a malformed case (exit 2, "file:line:column: message")
#     and a tiny one (d_model 8, 1 layer: a fusion, a rotation and a rotation
#     with a known mistake), runs it and reads the rows back: the verdicts
#     equivalent, equivalent and broken, every row and the run passing, the
#     report.json it was asked for, nothing printed on stdout by the library;
#     that report as a baseline passes, edited to other weights it fails
#   - the man page renders (man -l, groff, mandoc: whichever are installed)
# Skips (exit 77) without pkg-config or a C compiler; a check that needs
# another tool (nm, readelf, man, groff, mandoc) is reported as SKIP without
# it. Reuses the build tree
# (meson install --no-rebuild: meson test has just built it).
# Usage: test_install.sh MESON [SANITIZE]   (CIC_BUILD_ROOT: the build tree;
#   SANITIZE: the build's b_sanitize, so a sanitized library gets a program
#   built with the same runtime)
set -u
meson=${1:-meson}
sanitize=${2:-none}
san=""
[ "$sanitize" != none ] && san="-fsanitize=$sanitize"
build=${CIC_BUILD_ROOT:?CIC_BUILD_ROOT must name the build tree}
cc=${CC:-cc}
. "$(dirname "$0")/lib.sh"
now() { date +%s.%N; }

cic_need pkg-config
cic_need "$cc" "a C compiler"
cic_need "$meson"

t0=$(now)
cic_test_init install
dest=$tmp/root

# ---- install ----
if "$meson" install -C "$build" --destdir "$dest" --no-rebuild --quiet >"$tmp/install.log" 2>&1
then ok "meson install --destdir"; else
    bad "meson install --destdir"; sed 's/^/    /' "$tmp/install.log"; exit 1; fi

pc=$(find "$dest" -path '*/pkgconfig/cicheck.pc' | head -n 1)
if [ -z "$pc" ]; then
    bad "cicheck.pc installed (no */pkgconfig/cicheck.pc under the destdir)"
    find "$dest" | sed 's/^/    /'
    exit 1
fi
ok "cicheck.pc installed"
export PKG_CONFIG_PATH="${pc%/*}"
prefix=$(pkg-config --variable=prefix cicheck)
libdir=$dest$(pkg-config --variable=libdir cicheck)
incdir=$dest$(pkg-config --variable=includedir cicheck)
version=$(pkg-config --modversion cicheck)
major=${version%%.*}
# the installed tree as the compiler sees it: every path of cicheck.pc inside
# the destdir (the system packages it requires keep working through the
# default search paths)
export PKG_CONFIG_SYSROOT_DIR="$dest"

# ---- the installed files ----
[ -x "$dest$prefix/bin/cicheck" ] && ok "bin/cicheck" || bad "bin/cicheck installed"
[ -f "$libdir/libcicheck.so.$version" ] && [ ! -L "$libdir/libcicheck.so.$version" ] &&
    ok "libcicheck.so.$version" || bad "libcicheck.so.$version installed"
[ "$(readlink "$libdir/libcicheck.so.$major")" = "libcicheck.so.$version" ] &&
    ok "libcicheck.so.$major -> libcicheck.so.$version" || bad "libcicheck.so.$major link"
[ -L "$libdir/libcicheck.so" ] && ok "libcicheck.so link" || bad "libcicheck.so link"
[ -f "$libdir/libcicheck.a" ] && ok "libcicheck.a" || bad "libcicheck.a installed"
[ -f "$incdir/cicheck/cicheck.h" ] && ok "include/cicheck/cicheck.h" ||
    bad "include/cicheck/cicheck.h installed"
man=$dest$prefix/share/man/man1/cicheck.1
[ -f "$man" ] && ok "share/man/man1/cicheck.1" || bad "share/man/man1/cicheck.1 installed"
# nothing internal: only the public header, only the library and its .pc
extra=$(cd "$dest$prefix" && find include "${libdir#"$dest$prefix"/}" \( -type f -o -type l \) |
        grep -v -x -e include/cicheck/cicheck.h -e '.*/libcicheck\.\(a\|so\|so\..*\)' \
                   -e '.*/pkgconfig/cicheck\.pc')
[ -z "$extra" ] && ok "no internal headers or libraries installed" ||
    bad "internal files installed: $(echo $extra)"
[ "$(grep -o '^#define CIC_VERSION_STRING "[^"]*"' "$incdir/cicheck/cicheck.h")" = \
  "#define CIC_VERSION_STRING \"$version\"" ] && ok "header version = cicheck.pc version ($version)" ||
    bad "CIC_VERSION_STRING of the header differs from cicheck.pc's $version"
pkg-config --static --libs cicheck | grep -q -- '-lstdc++' &&
    ok "cicheck.pc: --static carries the C++ runtime" || bad "cicheck.pc: no -lstdc++ for --static"

# ---- exported symbols: exactly the header's functions ----
if cic_have nm; then
    sed -n 's/^CIC_API [^(]*[ *]\(cic_[a-z0-9_]*\)(.*/\1/p' "$incdir/cicheck/cicheck.h" |
        sort >"$tmp/declared"
    nm -D --defined-only "$libdir/libcicheck.so.$version" | awk '$2 ~ /^[TDBRVW]$/ { print $3 }' |
        sed 's/@.*//' | sort >"$tmp/exported"
    if [ -s "$tmp/declared" ] && cmp -s "$tmp/declared" "$tmp/exported"; then
        ok "libcicheck.so exports the $(wc -l <"$tmp/declared") API functions and nothing else"
    else
        bad "exported symbols differ from the header's (< declared, > exported)"
        diff "$tmp/declared" "$tmp/exported" | grep '^[<>]' | head -20 | sed 's/^/    /'
    fi
else
    skip "libcicheck.so exports the API functions and nothing else" "nm not found"
fi

# ---- a C program against the installed tree ----
cat >"$tmp/tiny.toml" <<'EOF'
name = "tiny"

[model]
block = "preln"
d_model = 8
heads = 2
tokens = 4
samples = 1
layers = 1
seed = 11

[[transforms]]
name = "fuse"
kind = "fuse-layernorm"

[[transforms]]
name = "rotate"
kind = "rotate"
after = "fuse"
q = "random"
seed = 3

[[transforms]]
name = "no-attn-out"
kind = "rotate"
after = "fuse"
q = "random"
seed = 3
mistake = "skip-attn-out"
expect = "broken"

[[gates]]
transform = "rotate"
engine = "f32-openblas"
metric = "rel_norm2"
max = 1e-3
EOF
printf '[model]\nblock = "preln"\nd_model = "eight"\nheads = 2\ntokens = 2\nsamples = 1\nlayers = 1\n' >"$tmp/bad.toml"

cat >"$tmp/prog.c" <<'EOF'
#include <cicheck/cicheck.h>

#include <math.h>
#include <stdio.h>

/* prog CASE BAD_CASE OUT_DIR: one line per fact the test checks.
 * prog CASE BASELINE_DIR: run CASE against BASELINE_DIR/<name>.json. */
int main(int argc, char **argv)
{
    cic_session *s = cic_session_create();
    int rc, i;
    if (argc == 3 && s) {
        if (cic_session_load(s, argv[1]) != 0 || cic_session_set_baseline(s, argv[2]) != 0)
            return 97;
        rc = cic_session_run(s);
        printf("baserun %d pass %d\n", rc, cic_session_pass(s));
        cic_session_destroy(s);
        return 0;
    }
    if (argc != 4 || !s)
        return 99;
    printf("version %s %s\n", cic_version(), CIC_VERSION_STRING);
    rc = cic_session_load(s, argv[2]);
    printf("badload %d %s\n", rc, cic_session_error(s));
    printf("badrun %d\n", cic_session_run(s));
    rc = cic_session_load_string(s, "[model]\nblock = \"nope\"\nd_model = 8\nheads = 2\n"
                                    "tokens = 2\nsamples = 1\nlayers = 1\n", "inline.toml");
    printf("badstring %d %s\n", rc, cic_session_error(s));
    printf("nullsafe %d %d %d %d %d %d\n", cic_session_run(NULL) == CIC_EXIT_INPUT,
           cic_session_error(NULL) != NULL, cic_session_result(NULL, 0) == NULL,
           cic_row_transform(NULL) == NULL, isnan(cic_row_ce_residual(NULL)),
           cic_session_set_out_dir(s, "") == CIC_EXIT_INPUT);
    rc = cic_session_load(s, argv[1]);
    printf("load %d %s\n", rc, cic_session_case_name(s));
    if (cic_session_set_threads(s, 1) != CIC_EXIT_PASS || cic_session_set_out_dir(s, argv[3]) != 0 ||
        cic_session_set_threads(s, -1) != CIC_EXIT_INPUT)
        return 98;
    rc = cic_session_run(s);
    printf("run %d pass %d exit %d rows %d\n", rc, cic_session_pass(s), cic_session_exit_code(s),
           cic_session_result_count(s));
    for (i = 0; i < cic_session_result_count(s); i++) {
        const cic_row *r = cic_session_result(s, i);
        const char *e = cic_row_expect(r), *v = cic_row_verdict(r);
        double rel = NAN, p99 = NAN;
        int has = cic_row_metric(r, "rel_norm2", &rel) == CIC_EXIT_PASS;
        cic_row_metric(r, "ulp_row.p99", &p99);
        printf("row %s %s %s %s ce %.3g rel_norm2 %s%.3g p99 %.3g pass %d\n",
               cic_row_transform(r), cic_row_engine(r), e ? e : "-", v ? v : "-",
               cic_row_ce_residual(r), has ? "" : "none:", rel, p99, cic_row_pass(r));
    }
    printf("outside %d %d\n", cic_session_result(s, -1) == NULL,
           cic_session_result(s, cic_session_result_count(s)) == NULL);
    cic_session_destroy(s);
    cic_session_destroy(NULL);
    return 0;
}
EOF

# check_run NAME: the output of one build of prog
check_run() {
    o=$tmp/$1.out
    grep -q -x "version $version $version" "$o" && ok "$1: cic_version() = header = .pc" ||
        bad "$1: version line: $(grep '^version' "$o")"
    grep -q "^badload 2 .*/bad\.toml:3:[0-9][0-9]*: .*d_model" "$o" &&
        ok "$1: malformed case: exit 2, file:line:column: message" ||
        bad "$1: malformed case: $(grep '^badload' "$o")"
    grep -q -x "badrun 2" "$o" && ok "$1: no run after a failed load" || bad "$1: run after a failed load"
    grep -q "^badstring 2 inline\.toml:2:[0-9][0-9]*: .*block" "$o" &&
        ok "$1: malformed case text: exit 2, file:line:column: message" ||
        bad "$1: malformed case text: $(grep '^badstring' "$o")"
    grep -q -x "nullsafe 1 1 1 1 1 1" "$o" && ok "$1: NULL handles and an empty folder are refused" ||
        bad "$1: $(grep '^nullsafe' "$o")"
    grep -q -x "load 0 tiny" "$o" && ok "$1: loaded the tiny case" || bad "$1: load: $(grep '^load' "$o")"
    grep -q -x "run 0 pass 1 exit 0 rows 11" "$o" && ok "$1: run passes, 11 rows" ||
        bad "$1: run: $(grep '^run' "$o")"
    for want in "fuse mpfr equivalent equivalent" "rotate mpfr equivalent equivalent" \
                "no-attn-out mpfr broken broken"; do
        grep -q "^row $want ce [0-9.e+-]* rel_norm2 none:nan .* pass 1\$" "$o" &&
            ok "$1: row $want" || bad "$1: no row '$want' (with its ce_residual, passing)"
    done
    n=$(grep -c '^row [a-z-]* f32-[a-z-]* .* rel_norm2 [0-9][0-9.e+-]* p99 [0-9][0-9.e+-]* pass 1$' "$o")
    [ "$n" -eq 8 ] && ok "$1: 8 float32 rows with rel_norm2 and ulp_row.p99" ||
        bad "$1: $n float32 rows with figures, expected 8"
    grep -q "^row no-attn-out f32-openblas broken broken ce .* rel_norm2 0\.0[0-9]" "$o" &&
        ok "$1: the mistake's float32 error is large" || bad "$1: the mistake's float32 error"
    grep -q -x "outside 1 1" "$o" && ok "$1: rows out of range are NULL" || bad "$1: rows out of range"
    other=$(grep -v -e '^version ' -e '^badload ' -e '^badrun ' -e '^badstring ' -e '^nullsafe ' \
                 -e '^load ' -e '^run ' -e '^row ' -e '^outside ' "$o" | head -3)
    [ -z "$other" ] && ok "$1: the library printed nothing on stdout" ||
        bad "$1: the library printed on stdout: $other"
    grep -q '"name": "tiny"' "$tmp/$1.rep/report.json" 2>/dev/null && ok "$1: report.json written" ||
        bad "$1: no report.json in the output folder"
}

cflags=$(pkg-config --cflags cicheck)
libs=$(pkg-config --libs cicheck)
# shellcheck disable=SC2086
if "$cc" -std=c11 -Wall -Wextra -Werror $san -o "$tmp/prog-shared" "$tmp/prog.c" $cflags $libs \
    2>"$tmp/cc.err"; then
    ok "built against libcicheck.so with pkg-config --cflags --libs cicheck"
    if cic_have readelf; then
        readelf -d "$tmp/prog-shared" | grep -q "NEEDED.*\[libcicheck\.so\.$major\]" &&
            ok "shared: needs libcicheck.so.$major" || bad "shared: not linked to libcicheck.so.$major"
    else
        skip "shared: needs libcicheck.so.$major" "readelf not found"
    fi
    LD_LIBRARY_PATH="$libdir" "$tmp/prog-shared" "$tmp/tiny.toml" "$tmp/bad.toml" "$tmp/shared.rep" \
        >"$tmp/shared.out" 2>"$tmp/shared.err"
    rc=$?
    [ $rc -eq 0 ] && ok "shared: program exits 0" || bad "shared: program exit $rc"
    check_run shared
    # the baseline option: the run's own report passes; one whose weights
    # hash differs fails the run
    mkdir -p "$tmp/base"
    cp "$tmp/shared.rep/report.json" "$tmp/base/tiny.json" 2>/dev/null
    LD_LIBRARY_PATH="$libdir" "$tmp/prog-shared" "$tmp/tiny.toml" "$tmp/base" >"$tmp/base.out" 2>&1
    grep -q -x "baserun 0 pass 1" "$tmp/base.out" && ok "shared: passes against its own baseline" ||
        bad "shared: against its own baseline: $(head -3 "$tmp/base.out")"
    sed 's/"weights_sha256": "[0-9a-f]*"/"weights_sha256": "'"$(printf '%064d' 0)"'"/' \
        "$tmp/shared.rep/report.json" >"$tmp/base/tiny.json"
    LD_LIBRARY_PATH="$libdir" "$tmp/prog-shared" "$tmp/tiny.toml" "$tmp/base" >"$tmp/base.out" 2>&1
    grep -q -x "baserun 1 pass 0" "$tmp/base.out" && ok "shared: fails against a baseline of other weights" ||
        bad "shared: against a baseline of other weights: $(head -3 "$tmp/base.out")"
else
    bad "build against libcicheck.so"; sed 's/^/    /' "$tmp/cc.err" | head -20
fi

# --static: the same flags, the archive chosen over the .so of the same
# folder (-l:libcicheck.a), so what pkg-config adds for --static must be enough
slibs=""
for f in $(pkg-config --libs --static cicheck); do
    [ "$f" = -lcicheck ] && f=-l:libcicheck.a
    slibs="$slibs $f"
done
# shellcheck disable=SC2086
if "$cc" -std=c11 -Wall -Wextra -Werror $san -o "$tmp/prog-static" "$tmp/prog.c" $cflags $slibs \
    2>"$tmp/cc.err"; then
    ok "built against libcicheck.a with pkg-config --cflags --libs --static cicheck"
    if cic_have readelf; then
        readelf -d "$tmp/prog-static" >"$tmp/static.dyn" &&
            ! grep -q 'NEEDED.*libcicheck' "$tmp/static.dyn" &&
            ok "static: no libcicheck.so needed" || bad "static: still needs libcicheck.so"
    else
        skip "static: no libcicheck.so needed" "readelf not found"
    fi
    "$tmp/prog-static" "$tmp/tiny.toml" "$tmp/bad.toml" "$tmp/static.rep" \
        >"$tmp/static.out" 2>"$tmp/static.err"
    rc=$?
    [ $rc -eq 0 ] && ok "static: program exits 0" || bad "static: program exit $rc"
    check_run static
else
    bad "build against libcicheck.a"; sed 's/^/    /' "$tmp/cc.err" | head -20
fi

# ---- the man page ----
if cic_have man; then
    if MANWIDTH=80 MANPAGER=cat PAGER=cat man -l "$man" >"$tmp/man.txt" 2>"$tmp/man.err" &&
       [ ! -s "$tmp/man.err" ] && grep -q 'cicheck run' "$tmp/man.txt" &&
       grep -q 'EXIT STATUS' "$tmp/man.txt"; then
        ok "man -l renders cicheck(1) without warnings"
    else
        bad "man -l cicheck.1"; sed 's/^/    /' "$tmp/man.err" | head -10
    fi
else
    skip "man -l renders cicheck(1) without warnings" "man not found"
fi
if cic_have groff; then
    groff -man -ww -z "$man" 2>"$tmp/groff.err"
    [ ! -s "$tmp/groff.err" ] && ok "groff -man -ww: no warnings" ||
        { bad "groff -man -ww warns"; sed 's/^/    /' "$tmp/groff.err" | head -10; }
else
    skip "groff -man -ww: no warnings" "groff not found"
fi
if cic_have mandoc; then
    mandoc -Tlint -Wwarning "$man" >"$tmp/mandoc.err" 2>&1
    [ ! -s "$tmp/mandoc.err" ] && ok "mandoc -Tlint: clean" ||
        { bad "mandoc -Tlint warns"; sed 's/^/    /' "$tmp/mandoc.err" | head -10; }
else
    skip "mandoc -Tlint: clean" "mandoc not found"
fi

echo "# install test: $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s"
cic_test_done
