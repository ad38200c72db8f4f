#!/bin/sh
# SPDX-License-Identifier: MIT
# test_guide.sh: the guide (docs/guide/*.md) is executable documentation.
# Every fenced block whose info string is exactly `sh` is run, page by page
# in name order, each page in a fresh temporary folder that is the working
# directory of its blocks (in page order, one `bash -e` per block), with
# this build's cicheck first on PATH and python3 meaning Debian's
# /usr/bin/python3. A page whose first line is `<!-- fixture: NAME -->`
# gets `bash tests/guide/NAME.sh` run in its folder first (env SRC = the
# source tree, BUILD = the build folder, PY = Debian's python3): the tiny
# checkpoints its commands read. A page naming a fixture that does not
# exist fails. Blocks fenced `sh skip-test` (a cluster, an apt install, a
# 7B download) are listed as skipped. Each block is reported with its page
# and line; a failed one shows its output.
# Needs Debian's /usr/bin/python3 with numpy (the fixtures write with it).
# Usage: test_guide.sh PATH/TO/cicheck   (CIC_SOURCE_ROOT: the source tree;
#        CIC_GUIDE_PAGES: only these page names, e.g. "adaln.md plots.md")
set -u
bin=$1
root=${CIC_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/lib.sh"
cic_need_numpy "the guide's fixtures write checkpoints with NumPy"
cic_test_init guide
build=${CIC_BUILD_ROOT:-$(cd "$(dirname "$bin")" && pwd)}
case $bin in /*) ;; *) bin=$PWD/$bin ;; esac

# cicheck and python3 first on PATH, as the guide's reader has them
mkdir "$tmp/bin"
ln -s "$bin" "$tmp/bin/cicheck"
ln -s "$py" "$tmp/bin/python3"

# blocks PAGE OUT: split PAGE's `sh` and `sh skip-test` blocks into
# OUT/NNN-LINE.sh and OUT/NNN-LINE.skip (LINE: the line of the opening
# fence); a fence left open is reported as OUT/open (its line in it)
blocks() {
    awk -v out="$2" '
        function name(ext) { return sprintf("%s/%03d-%d.%s", out, n, start, ext) }
        !inb && /^```/ {
            info = substr($0, 4); sub(/[ \t]+$/, "", info)
            inb = 1; start = NR; n++; f = ""
            if (info == "sh") f = name("sh")
            else if (info == "sh skip-test") f = name("skip")
            if (f != "") printf "" > f
            next
        }
        inb && /^```[ \t]*$/ { if (f != "") close(f); inb = 0; next }
        inb && f != "" { print > f }
        END { if (inb) print start > (out "/open") }
    ' "$1"
}

pages=$(cd "$root/docs/guide" && LC_ALL=C ls -- *.md 2>/dev/null)
[ -n "$pages" ] && ok "docs/guide has $(echo "$pages" | wc -l) pages" || bad "docs/guide has no pages"
nrun=0
for page in $pages; do
    if [ -n "${CIC_GUIDE_PAGES:-}" ]; then
        case " $CIC_GUIDE_PAGES " in *" $page "*) ;; *) continue ;; esac
    fi
    src="$root/docs/guide/$page"
    work="$tmp/page-${page%.md}"
    mkdir "$work" "$work.blocks"
    blocks "$src" "$work.blocks"
    if [ -f "$work.blocks/open" ]; then
        bad "$page:$(cat "$work.blocks/open"): a fence is never closed"
        continue
    fi
    fixture=$(head -n 1 "$src" | sed -n 's/^<!-- fixture: \([A-Za-z0-9_.-]*\) -->$/\1/p')
    if [ -n "$fixture" ]; then
        if [ ! -f "$root/tests/guide/$fixture.sh" ]; then
            bad "$page:1: fixture '$fixture' does not exist (tests/guide/$fixture.sh)"
            continue
        fi
        if (cd "$work" && SRC=$root BUILD=$build PY=$py PATH="$tmp/bin:$PATH" \
                bash "$root/tests/guide/$fixture.sh") >"$work.fixture.log" 2>&1; then
            ok "$page:1: fixture $fixture"
        else
            bad "$page:1: fixture $fixture failed"
            sed 's/^/    /' "$work.fixture.log" | tail -15
            continue
        fi
    elif head -n 1 "$src" | grep -q '^<!-- fixture'; then
        bad "$page:1: malformed fixture line (want '<!-- fixture: NAME -->')"
        continue
    fi
    for b in $(cd "$work.blocks" && LC_ALL=C ls); do
        line=${b#*-}
        line=${line%.*}
        case $b in
        *.skip) skip "$page:$line" "fenced sh skip-test" ;;
        *.sh)
            nrun=$((nrun + 1))
            # a reader's shell, not a CI job's: CI=true would make bless
            # refuse (a CI job must not accept its own numbers), and the
            # guide shows a workstation's commands
            if (cd "$work" && PATH="$tmp/bin:$PATH" timeout 300 env -u CI \
                    bash -e "$work.blocks/$b") \
                    >"$work.out" 2>&1; then
                ok "$page:$line"
            else
                bad "$page:$line: the block failed (exit $?)"
                sed 's/^/    > /' "$work.blocks/$b"
                sed 's/^/    /' "$work.out" | tail -20
            fi ;;
        esac
    done
done
[ "$nrun" -gt 0 ] && ok "$nrun blocks ran" || bad "no block ran"

# the contract itself: a page naming a missing fixture, a failing block and
# a skipped one are caught (a copy of this script on a planted guide)
if [ -z "${CIC_GUIDE_PLANTED:-}" ] && [ -z "${CIC_GUIDE_PAGES:-}" ]; then
    p="$tmp/planted"
    mkdir -p "$p/docs/guide" "$p/tests/guide"
    cp "$0" "$(dirname "$0")/lib.sh" "$p/tests/"
    printf '<!-- fixture: nosuch -->\n```sh\ntrue\n```\n' >"$p/docs/guide/a.md"
    printf '<!-- fixture: mk -->\n```sh\ntest -f made\n```\n\n```sh\nfalse\n```\n' >"$p/docs/guide/b.md"
    printf '```sh skip-test\nsbatch x\n```\n```text\nnot run\n```\n```sh\ncicheck --version\n```\n' \
        >"$p/docs/guide/c.md"
    printf '# SPDX-License-Identifier: MIT\ntouch made\n' >"$p/tests/guide/mk.sh"
    CIC_GUIDE_PLANTED=1 CIC_SOURCE_ROOT=$p sh "$p/tests/test_guide.sh" "$bin" >"$tmp/planted.out" 2>&1
    rc=$?
    [ "$rc" -eq 1 ] && ok "a planted guide with faults fails" || bad "a planted guide: exit $rc, expected 1"
    has "$tmp/planted.out" "a.md:1: fixture 'nosuch' does not exist" "a missing fixture is named"
    has "$tmp/planted.out" "ok - b.md:2" "a block reads what its fixture made"
    has "$tmp/planted.out" "FAIL - b.md:6: the block failed" "a failing block is named with its line"
    has "$tmp/planted.out" "SKIP - c.md:1 (fenced sh skip-test)" "a skip-test block is listed as skipped"
    has "$tmp/planted.out" "ok - c.md:7" "cicheck is on PATH"
    has "$tmp/planted.out" "3 blocks ran" "text blocks are not run"
fi
cic_test_done
