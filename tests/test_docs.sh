#!/bin/sh
# SPDX-License-Identifier: MIT
# test_docs.sh: the README is a door (at most 250 lines) and no link of the
# documentation leads nowhere: every relative Markdown link target
# ([text](path) or [text](path#anchor)) in README.md and docs/**/*.md must
# be a file or folder, resolved from the linking file's folder, its #anchor
# a heading of the target page; every `docs/...` path the README names in
# backticks must exist. The README keeps its two commands (install, build
# and run cases/adaln.toml; the test suite). The guide's commands are run
# by test_guide.sh.
# Usage: test_docs.sh   (CIC_SOURCE_ROOT: the source tree)
set -u
root=${CIC_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/lib.sh"
cic_test_init docs
cd "$root" || exit 1

n=$(wc -l <README.md)
[ "$n" -le 250 ] && ok "README.md has $n lines (at most 250)" || bad "README.md has $n lines, more than 250"

# the README's two commands, kept as they are (.ci/run runs the second as
# "the README's test command")
for c in 'scripts/bootstrap.sh && build/cicheck run cases/adaln.toml' \
         'meson test -C build --print-errorlogs'; do
    if awk '/^```sh$/ { code = 1; next } /^```/ { code = 0 } code' README.md | grep -qxF -- "$c"
    then ok "the README's command '$c', in a sh block"
    else bad "the README lost its command '$c' (a line of its own in a sh block)"; fi
done

# anchors FILE: the GitHub anchors of FILE's headings, one a line
anchors() {
    awk '/^```/ { code = !code; next } !code && /^#+ / { sub(/^#+ +/, ""); print }' "$1" |
        tr 'A-Z' 'a-z' | sed 's/[^a-z0-9 _-]//g; s/ /-/g'
}
nl=0
for f in README.md $(find docs -name '*.md' | LC_ALL=C sort); do
    dir=$(dirname "$f")
    # the targets of [text](target) outside code blocks, with their lines
    awk '/^```/ { code = !code; next }
         !code { s = $0
                 while (match(s, /\]\([^) ]+\)/)) {
                     print NR " " substr(s, RSTART + 2, RLENGTH - 3)
                     s = substr(s, RSTART + RLENGTH) } }' "$f" >"$tmp/links"
    while read -r line target; do
        case $target in http://* | https://* | mailto:*) continue ;; esac
        nl=$((nl + 1))
        path=${target%%#*}
        anchor=
        case $target in *#*) anchor=${target#*#} ;; esac
        if [ -z "$path" ]; then file=$f; else file=$dir/$path; fi
        if [ ! -e "$file" ]; then
            bad "$f:$line: link '$target': no $file"
        elif [ -n "$anchor" ] && ! anchors "$file" | grep -qxF -- "$anchor"; then
            bad "$f:$line: link '$target': no heading with anchor #$anchor in $file"
        fi
    done <"$tmp/links"
done
[ "$nl" -gt 20 ] && ok "$nl relative links checked" || bad "only $nl relative links found"

# docs/... paths the README names in backticks
for p in $(grep -o '`docs/[^` ]*`' README.md | tr -d '`' | sort -u); do
    [ -e "${p%%#*}" ] || bad "README.md names \`$p\`, which does not exist"
done
ok "the README's docs/ paths exist"

# the checks themselves, on a planted tree: a README of 251 lines, a link
# to a missing page, a missing anchor, a missing backticked docs/ path
if [ -z "${CIC_DOCS_PLANTED:-}" ]; then
    p="$tmp/planted"
    mkdir -p "$p/docs/guide" "$p/tests"
    cp "$0" "$(dirname "$0")/lib.sh" "$p/tests/"
    { printf 'see [a](docs/guide/a.md#no-such) and `docs/nowhere.md`\n'
      i=0; while [ $i -lt 250 ]; do echo x; i=$((i + 1)); done; } >"$p/README.md"
    printf '# A page\n[b](b.md) [top](#a-page) [r](../../README.md)\n' >"$p/docs/guide/a.md"
    CIC_DOCS_PLANTED=1 CIC_SOURCE_ROOT=$p sh "$p/tests/test_docs.sh" >"$tmp/planted.out" 2>&1
    rc=$?
    [ "$rc" -eq 1 ] && ok "a planted tree with faults fails" || bad "a planted tree: exit $rc, expected 1"
    has "$tmp/planted.out" "README.md has 251 lines, more than 250" "a long README is caught"
    has "$tmp/planted.out" "no heading with anchor #no-such" "a missing anchor is caught"
    has "$tmp/planted.out" "docs/guide/a.md:2: link 'b.md': no docs/guide/b.md" "a missing page is caught"
    has "$tmp/planted.out" "names \`docs/nowhere.md\`" "a missing backticked path is caught"
    if grep -qF -e "'#a-page'" -e "'../../README.md'" "$tmp/planted.out"; then bad "a good anchor or link was refused"
    else ok "a page's own anchor and a link up the tree resolve"; fi
fi
cic_test_done
