#!/bin/sh
# SPDX-License-Identifier: MIT
# fuzz.sh: fuzz cicheck's readers of hostile input with libFuzzer under
# AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer after every
# input), for a bounded time per target:
#   case         the case loader (tests/fuzz/fuzz_case.c, cic_case_load_string)
#   baseline     the baseline reader (tests/fuzz/fuzz_baseline.c, a fuzzed
#                baseline compared with the runs recorded in reference/)
#   merge        `cicheck merge` of sweeps (tests/fuzz/fuzz_merge.c, one or
#                two shard sweep.json files built from the input, no plots)
#   safetensors  the safetensors reader (tests/fuzz/fuzz_safetensors.c)
#   checkpoint   a case's [model] checkpoint folder: config.json, the index,
#                the shards (tests/fuzz/fuzz_checkpoint.c), loaded and built
#   input        a case's [input] file, hidden states or token ids
#                (tests/fuzz/fuzz_input.c)
#   qfile        a rotation file, q = "file:PATH" (tests/fuzz/fuzz_qfile.c)
#   case_shard   `cicheck merge` of a case's sample shards, case-shard.json
#                and case-shard.bin (tests/fuzz/fuzz_case_shard.c)
#   verify       `cicheck verify`: its arguments and files, over two tiny
#                checkpoints (tests/fuzz/fuzz_verify.c)
# The targets that take several files read one input as a folder of them
# (tests/fuzz/fuzz_files.h); each asserts its reader's contract
# (tests/fuzz/<target>_run.h or the target's file).
#
# Builds build-fuzz/fuzz_<target> with clang through ninja (a build.ninja
# written here; no meson option), every target linking the whole library,
# instrumented; toml++ is compiled header-only so the TOML parser is
# instrumented and guided too (the Debian libtomlplusplus.so is not).
# Seeds (build-fuzz/corpus-<target>, kept between runs, not committed):
#   case         cases/**/*.toml, tests/malformed, tests/fixtures
#   baseline     reference/*.json, as shipped and without indentation
#   merge        the shards of a real sweep (tests/fuzz/seed-sweep.toml run
#                with --shard 1/2, 2/2 and 1/1 by build/cicheck)
#   safetensors  the files of a real --dump (tests/fuzz/seed-case.toml) and
#                a file of every other dtype
#   checkpoint   the folders tests/make_checkpoint.py writes from the dumps
#                of tests/fuzz/seed-{llama,opt,dit}.toml (llama in F32,
#                BF16, F16, F64, sharded, tied, one layer, folded and
#                rotated; OPT; timm; DiT with and without config.json)
#   input, qfile files written by tests/fuzz/make_seeds.py (NumPy)
#   case_shard   the shards of tests/fuzz/seed-shard.toml (--shard 1/2, 2/2,
#                1/1), as written and with their hashes left for the
#                harness to fill
#   verify       command lines over the harness's tiny checkpoints, and
#                real rewrites (make_checkpoint.py --fold --rotate) with
#                their Q
# plus that target's saved regressions. The seeds that need NumPy are left
# out, with a warning, when Debian's /usr/bin/python3 has none.
#
# Any crash-*, timeout-*, oom-* or leak-* input is copied into
# tests/fuzz-regressions/ (the case target's) or
# tests/fuzz-regressions/<target>/, which the test suite replays. The
# script ends with one line per target (seconds, executions, result) and
# exits 0 when every target ran clean, 1 when one did not (a failing input,
# a build or seed failure, a fuzzer error: each said), 2 on bad usage or a
# missing tool.
#
# Usage: scripts/fuzz.sh [TARGET...|all] [SECONDS]   (default: all, 60 s each)
#        scripts/fuzz.sh SECONDS                      (every target)
#   FUZZ_JOBS=N        N>1: libFuzzer fork mode with N processes (default 1)
#   FUZZ_BUILD_JOBS=N  parallel compiles (default 2)
#   CC/CXX             default clang/clang++ (needs libclang-rt-14-dev)
#   CICHECK            the binary that writes the seeds (default build/cicheck,
#                      built with meson/ninja when missing)
set -u
cd "$(dirname "$0")/.." || exit 2
all_targets="case baseline merge safetensors checkpoint input qfile case_shard verify"
targets=""
secs=60
for a in "$@"; do
    case $a in
    all) targets="$targets $all_targets" ;;
    '' | *[!0-9]*) targets="$targets $a" ;;
    *) secs=$a ;;
    esac
done
[ -n "$targets" ] || targets=$all_targets
for t in $targets; do
    case " $all_targets " in *" $t "*) ;; *)
        echo "fuzz: unknown target '$t' (targets: $all_targets, all)" >&2; exit 2 ;;
    esac
done
out=build-fuzz
cc=${CC:-clang}
cxx=${CXX:-clang++}
jobs=${FUZZ_JOBS:-1}
bjobs=${FUZZ_BUILD_JOBS:-2}
py=/usr/bin/python3
export OPENBLAS_NUM_THREADS=1

# what is needed, said when missing
for tool in "$cc" "$cxx" ninja pkg-config; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "fuzz: '$tool' not found (Debian 12: apt-get install clang libclang-rt-14-dev" \
             "ninja-build pkg-config, or CIC_BOOTSTRAP_FUZZ=1 scripts/bootstrap.sh)" >&2
        exit 2
    }
done
mkdir -p "$out/obj" "$out/artifacts" tests/fuzz-regressions || {
    echo "fuzz: cannot make $out" >&2; exit 2; }
if ! printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' |
        "$cc" -x c -fsanitize=fuzzer,address,undefined - -o "$out/probe" >"$out/probe.log" 2>&1; then
    cat "$out/probe.log" >&2
    echo "fuzz: $cc cannot link a libFuzzer target with ASan and UBSan (Debian 12: apt-get" \
         "install libclang-rt-14-dev)" >&2
    exit 2
fi
rm -f "$out/probe" "$out/probe.log"
if ! pcflags=$(pkg-config --cflags openblas jansson mpfr gmp) ||
   ! pclibs=$(pkg-config --libs openblas jansson mpfr gmp); then
    echo "fuzz: pkg-config does not know openblas, jansson, mpfr and gmp (scripts/bootstrap.sh" \
         "installs them)" >&2
    exit 2
fi
# the library's C sources, as meson.build lists them
libsrc=$(sed -n '/^lib_src = files(/,/^)/p' meson.build | grep -o "'src/[^']*\.c'" | tr -d "'")
[ -n "$libsrc" ] || { echo "fuzz: no lib_src list in meson.build" >&2; exit 2; }

# ---- build: build-fuzz/build.ninja ---------------------------------------
# toml++'s headers, a private copy with one known upstream bug patched
# (toml++ 3.3.0, marzer/tomlplusplus#190/#295, fixed by #305):
# is_non_ascii_horizontal_whitespace reaches TOML_UNREACHABLE (UB) for many
# non-ASCII code points; upstream returns false there. Unpatched, every run
# stops on it within seconds; the inputs that hit it are kept in
# tests/fuzz-regressions. Only this fuzz build uses the copy.
uni=$out/include/toml++/impl/unicode_autogenerated.h
if [ ! -f "$uni" ] || [ -n "$(find /usr/include/toml++ -newer "$uni" 2>/dev/null)" ]; then
    rm -rf "$out/include"
    if ! mkdir -p "$out/include" || ! cp -r /usr/include/toml++ "$out/include/"; then
        echo "fuzz: cannot copy /usr/include/toml++ (apt-get install libtomlplusplus-dev)" >&2
        exit 2
    fi
    sed -i '/is_non_ascii_horizontal_whitespace/,/TOML_UNREACHABLE;$/ s/default: TOML_UNREACHABLE;/default: return false;/' "$uni"
    grep -q 'default: return false;' "$uni" ||
        echo "fuzz: warning: toml++ whitespace patch did not apply" >&2
fi
# Its internal TOML_ASSERTs are off, as in Debian's libtomlplusplus.so that
# cicheck links (3.3.0 trips one on a control character in a [table] key,
# then reports a proper syntax error when asserts are off);
# FUZZ_TOML_ASSERTS=1 keeps them.
if [ "${FUZZ_TOML_ASSERTS:-0}" = 1 ]; then
    noassert=-DCIC_FUZZ_TOML_ASSERTS=1
else
    noassert="'-DTOML_ASSERT(expr)=static_assert(true)'"
fi
root=$PWD
san="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all"
flags="-g -O1 -fno-omit-frame-pointer -ffp-contract=off -D_GNU_SOURCE -I$root/src -I$root/tests/fuzz"
obj_of() { echo "obj/$(echo "$1" | tr / _).o"; }
{
    echo "# written by scripts/fuzz.sh"
    echo "rule cc"
    echo "  command = $cc -std=c11 $flags $pcflags $san -MD -MF \$out.d -c \$in -o \$out"
    echo "  depfile = \$out.d"
    echo "  deps = gcc"
    echo "  description = CC \$in"
    echo "rule cxx"
    echo "  command = $cxx -std=c++17 $flags -I$root/$out/include $san -DTOML_HEADER_ONLY=1 $noassert -MD -MF \$out.d -c \$in -o \$out"
    echo "  depfile = \$out.d"
    echo "  deps = gcc"
    echo "  description = CXX \$in (toml++ header-only)"
    echo "rule link"
    echo "  command = $cxx $san \$in -o \$out $pclibs -lflint-arb -lflint -lm -lpthread"
    echo "  description = LINK \$out"
    objs=""
    for f in $libsrc; do
        echo "build $(obj_of "$f"): cc $root/$f"
        objs="$objs $(obj_of "$f")"
    done
    echo "build obj/toml_capi.o: cxx $root/src/case/toml_capi.cpp"
    for t in $all_targets; do
        echo "build $(obj_of "tests/fuzz/fuzz_$t.c"): cc $root/tests/fuzz/fuzz_$t.c"
        echo "build fuzz_$t: link$objs obj/toml_capi.o $(obj_of "tests/fuzz/fuzz_$t.c")"
    done
} >"$out/build.ninja.new"
if ! mv "$out/build.ninja.new" "$out/build.ninja"; then
    echo "fuzz: cannot write $out/build.ninja" >&2
    exit 2
fi

built=""
echo "fuzz: building$(for t in $targets; do printf ' fuzz_%s' "$t"; done) in $out (ninja -j$bjobs)" >&2
# shellcheck disable=SC2046 # one word per target
ninja -C "$out" -j"$bjobs" -k 0 $(for t in $targets; do printf 'fuzz_%s ' "$t"; done) >&2
# which targets are built (after a failure, ninja says what is left)
for t in $targets; do
    if [ -x "$out/fuzz_$t" ] && ninja -C "$out" -n "fuzz_$t" 2>/dev/null | grep -q 'no work to do'; then
        built="$built $t"
    else
        echo "fuzz: $t: build failed (the compiler's message is above)" >&2
    fi
done

# ---- seeds ----------------------------------------------------------------
cicheck_bin() {
    b=${CICHECK:-build/cicheck}
    if [ ! -x "$b" ]; then
        echo "fuzz: building $b for the seeds" >&2
        { [ -d build ] || meson setup build >&2; } && ninja -C build >&2 || return 1
    fi
    echo "$b"
}
# run_seed WHAT COMMAND...: a command that makes seeds, said when it fails
run_seed() {
    rs_what=$1
    shift
    "$@" >"$out/seed.log" 2>&1
    rs_rc=$?
    [ "$rs_rc" -eq 0 ] && return 0
    cat "$out/seed.log" >&2
    echo "fuzz: seeds: $rs_what failed (exit $rs_rc): $*" >&2
    return 1
}
have_numpy() {
    [ -x "$py" ] && "$py" -c 'import numpy' 2>/dev/null && return 0
    echo "fuzz: warning: no NumPy in $py: the seeds of $1 that NumPy writes are left out" >&2
    return 1
}
# a JSON file without its indentation (smaller inputs mutate faster); the
# file itself when Debian's python3 is not there
compact() {
    if [ -x "$py" ]; then
        "$py" -c 'import json,sys; sys.stdout.write(json.dumps(json.load(open(sys.argv[1])), separators=(",", ":")))' "$1"
    else
        cat "$1"
    fi
}
# dump NAME: the original.safetensors of a --dump of tests/fuzz/seed-NAME.toml
dump() {
    b=$(cicheck_bin) || return 1
    [ -f "$w/d-$1/original.safetensors" ] ||
        run_seed "the dump of tests/fuzz/seed-$1.toml" "$b" run --quiet --no-color \
            --no-baseline --out "$w/r-$1" --dump "$w/d-$1" "tests/fuzz/seed-$1.toml" || return 1
    echo "$w/d-$1/original.safetensors"
}
mkck() { run_seed "make_checkpoint.py $*" "$py" tests/make_checkpoint.py "$@"; }
pack() { run_seed "make_seeds.py pack $1" "$py" tests/fuzz/make_seeds.py pack "$@"; }
seed_checkpoint() {
    have_numpy checkpoint || return 0
    l=$(dump llama) && o=$(dump opt) && dd=$(dump dit) || return 1
    for v in f32: shards:--shards=2 tied:--tied bf16:--dtype=bf16 f16:--dtype=f16 \
             f64:--dtype=f64 layer1:--layers=1-1 rot:--fold:--rotate=1; do
        n=${v%%:*}
        # shellcheck disable=SC2046 # the options are words
        mkck "$l" "$w/ck-$n" $(echo "${v#*:}" | tr ':=' '  ') || return 1
        pack "$c/seed-llama-$n" "=$w/ck-$n/" || return 1
    done
    pack "$c/seed-llama-layers" --pre 'layers = "1-1"' "=$w/ck-f32/" &&
        pack "$c/seed-llama-tokens" --pre '[input]\nkind = "tokens"' "=$w/ck-f32/" &&
        mkck "$o" "$w/ck-opt" && pack "$c/seed-opt" "=$w/ck-opt/" &&
        mkck "$o" "$w/ck-timm" --timm && pack "$c/seed-timm" "=$w/ck-timm/" &&
        mkck "$dd" "$w/ck-dit" && pack "$c/seed-dit" "=$w/ck-dit/" &&
        mkck "$dd" "$w/ck-dit0" --no-config && pack "$c/seed-dit-no-config" "=$w/ck-dit0/" &&
        run_seed "make_seeds.py input" "$py" tests/fuzz/make_seeds.py input "$w/in" &&
        pack "$c/seed-llama-ids" --pre 'samples = 2\n[input]\nfile = "in.safetensors"' \
            "=$w/ck-f32/" \
            "in.safetensors=$w/in/ids-i64.safetensors"
}
seed_verify() {
    # the harness's own checkpoints (orig, trans, q.safetensors)
    printf 'orig\ntrans\n--q\nq.safetensors\n' >"$c/seed-q"
    printf 'orig\ntrans\n' >"$c/seed-no-q"
    printf 'orig\ntrans\n--q\nq.safetensors\n--q-tensor\nq\n--layers\n1-1\n--input-kind\ntokens\n--out\nout\n' \
        >"$c/seed-options"
    printf 'orig\ntrans\n--q\nq.safetensors\n--online\ndown_proj:hadamard\n--online\nqk:hadamard\n--layers\n1\n' \
        >"$c/seed-online"
    printf 'orig\norig\n--case\ncase.toml\n==> case.toml <==\nname = "e"\n[model]\nblock = "rmsnorm"\nd_model = 8\nheads = 2\ntokens = 2\nsamples = 1\nlayers = 1\n[engines]\nf32 = ["openblas", "fixed-order"]\n[[engines.lowp]]\nname = "w8a8"\nweights = "int8:channel"\nactivations = "int8:token"\n' \
        >"$c/seed-case"
    have_numpy verify || return 0
    l=$(dump llama) && o=$(dump opt) || return 1
    mkck "$l" "$w/v-orig" && mkck "$l" "$w/v-rot" --fold --rotate 1 &&
        pack "$c/seed-llama-rotated" --pre 'orig\nrot\n--q\nR1.safetensors' "orig=$w/v-orig/" \
            "rot=$w/v-rot/" "R1.safetensors=$w/v-rot/R1.safetensors" &&
        mkck "$o" "$w/v-opt" && mkck "$o" "$w/v-optf" --fold --rotate 2 &&
        pack "$c/seed-opt-fused" --pre 'orig\nrot\n--q\nR1.safetensors\n--layernorm\nfused' \
            "orig=$w/v-opt/" "rot=$w/v-optf/" "R1.safetensors=$w/v-optf/R1.safetensors" &&
        run_seed "make_seeds.py input" "$py" tests/fuzz/make_seeds.py input "$w/in" &&
        pack "$c/seed-input" --pre 'orig\ntrans\n--q\nq.safetensors\n--input\nin.safetensors' \
            "in.safetensors=$w/in/verify-in.safetensors"
}
seed_case_shard() {
    b=$(cicheck_bin) || return 1
    for s in 1/2 2/2 1/1; do
        run_seed "cicheck run --shard $s of tests/fuzz/seed-shard.toml" "$b" run --quiet \
            --no-color --shard "$s" --out "$w/$(echo "$s" | tr / -)" tests/fuzz/seed-shard.toml ||
            return 1
    done
    pack "$c/seed-2-shards" "s1=$w/1-2/" "s2=$w/2-2/" &&
        pack "$c/seed-2-shards-blank" --blank-hashes "s1=$w/1-2/" "s2=$w/2-2/" &&
        pack "$c/seed-1-shard" "s1=$w/1-1/" &&
        pack "$c/seed-1-shard-blank" --blank-hashes "s1=$w/1-1/" &&
        pack "$c/seed-half" --blank-hashes "s2=$w/2-2/"
}
seed_merge() {
    b=$(cicheck_bin) || return 1
    for s in 1/2 2/2 1/1; do
        run_seed "cicheck run --shard $s of tests/fuzz/seed-sweep.toml" "$b" run --quiet \
            --no-color --no-plots --shard "$s" --out "$w/$(echo "$s" | tr / -)" \
            tests/fuzz/seed-sweep.toml || return 1
    done
    { compact "$w/1-2/sweep.json" && printf '\0' && compact "$w/2-2/sweep.json"; } \
        >"$c/seed-2-shards" &&
        compact "$w/1-1/sweep.json" >"$c/seed-1-shard" &&
        compact "$w/2-2/sweep.json" >"$c/seed-half"
}
seed_safetensors() {
    b=$(cicheck_bin) || return 1
    run_seed "the dump of tests/fuzz/seed-case.toml" "$b" run --quiet --no-color --no-baseline \
        --out "$w/rep" --dump "$w/dump" tests/fuzz/seed-case.toml || return 1
    for f in "$w"/dump/*.safetensors; do
        cp "$f" "$c/seed-$(basename "$f")" || return 1
    done
    # every dtype the reader knows, data not aligned
    h='{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"BF16","shape":[1,1],"data_offsets":[4,6]},"c":{"dtype":"I8","shape":[2],"data_offsets":[6,8]},"d":{"dtype":"I32","shape":[],"data_offsets":[8,12]},"e":{"dtype":"I64","shape":[1],"data_offsets":[12,20]},"f":{"dtype":"U8","shape":[1],"data_offsets":[20,21]},"g":{"dtype":"BOOL","shape":[1],"data_offsets":[21,22]},"h":{"dtype":"U16","shape":[1],"data_offsets":[22,24]},"i":{"dtype":"I16","shape":[1],"data_offsets":[24,26]},"j":{"dtype":"U32","shape":[1],"data_offsets":[26,30]},"k":{"dtype":"U64","shape":[1],"data_offsets":[30,38]},"l":{"dtype":"F64","shape":[0,3],"data_offsets":[38,38]},"__metadata__":{"format":"pt"}}'
    n=$(printf '%s' "$h" | wc -c)
    # shellcheck disable=SC2059 # the length's bytes as octal escapes
    { printf "$(printf '\\%03o' $((n % 256)) $((n / 256 % 256)) 0 0 0 0 0 0)"
      printf '%s' "$h"
      printf '\000\074\000\300\200\077\200\177\376\377\377\377\001\000\000\000\000\000\000\200\377\001\001\002\377\377\001\000\000\200\000\000\000\000\000\000\000\200'
    } >"$c/seed-dtypes.safetensors"
}
# seed TARGET: its corpus (made once; build-fuzz/seeded-TARGET marks it)
# and its saved regressions; 1 (said) when a seed command fails
seed() {
    t=$1
    c=$out/corpus-$t
    w=$out/seed-work
    mkdir -p "$c" || return 1
    if [ ! -f "$out/seeded-$t" ]; then
        rm -rf "$w" && mkdir -p "$w" || return 1
        case $t in
        case)
            for f in cases/*.toml cases/*/*.toml tests/malformed/*.toml tests/fixtures/*.toml; do
                [ -f "$f" ] && cp "$f" "$c/seed-$(echo "$f" | tr / _)"
            done ;;
        baseline)
            # as shipped (an input that is one of them must pass), and compact
            for f in reference/*.json; do
                cp "$f" "$c/seed-$(basename "$f")" &&
                    compact "$f" >"$c/seed-compact-$(basename "$f")" || return 1
            done ;;
        merge) seed_merge || return 1 ;;
        safetensors) seed_safetensors || return 1 ;;
        checkpoint) seed_checkpoint || return 1 ;;
        input)
            if have_numpy input; then
                run_seed "make_seeds.py input" "$py" tests/fuzz/make_seeds.py input "$c" || return 1
                rm -f "$c/verify-in.safetensors"
            fi ;;
        qfile)
            if have_numpy qfile; then
                run_seed "make_seeds.py qfile" "$py" tests/fuzz/make_seeds.py qfile "$c" &&
                    l=$(dump llama) && mkck "$l" "$w/rot" --fold --rotate 3 &&
                    cp "$w/rot/R1.safetensors" "$c/seed-R1.safetensors" || return 1
            fi ;;
        case_shard) seed_case_shard || return 1 ;;
        verify) seed_verify || return 1 ;;
        esac
        rm -rf "$w"
        touch "$out/seeded-$t"
    fi
    # the target's saved regressions (the case target's are the files of
    # tests/fuzz-regressions itself)
    k=tests/fuzz-regressions/$t
    [ "$t" = case ] && k=tests/fuzz-regressions
    for f in "$k"/*; do
        [ -f "$f" ] || continue
        case "$f" in *README*) continue ;; esac
        cp "$f" "$c/regression-$(basename "$f")" || return 1
    done
    return 0
}

# ---- dictionaries: the literals each reader compares against -------------
# dq WORD...: each word as a dictionary entry, quoted ("\n" stays an escape)
dq() {
    for dq_w in "$@"; do
        printf '"%s"\n' "$(printf '%s' "$dq_w" | sed 's/\\/\\\\/g; s/"/\\"/g; s/\\\\x0A/\\x0A/g')"
    done
}
# the quoted JSON strings of C files, as entries
json_keys() {
    grep -oh '"[A-Za-z_][A-Za-z0-9_.-]*"' "$@" | sort -u | sed 's/"/\\"/g; s/.*/"&"/'
}
# a header line of fuzz_files.h for each name
headers() {
    for h_n in "$@"; do
        printf '"\\x0A==> %s <==\\x0A"\n' "$h_n"
    done
}
st_words() {
    for st_w in dtype shape data_offsets __metadata__ BOOL U8 I8 U16 I16 F16 BF16 \
               U32 I32 F32 U64 I64 F64 F8_E4M3; do
        printf '"\\"%s\\""\n' "$st_w"
    done
    dq '[' ']' '{' '}' ':' ',' '0' '18446744073709551615' '9223372036854775807' '-1' 'null' \
       '[0,0]'
}
dict() {
    t=$1
    d=$out/$t.dict
    {
        case $t in
        case)
            dq '[' ']' '[[' ']]' '=' '"' "'" '"""' ',' '.' '{' '}' '#' \
               'true' 'false' 'inf' '-inf' 'nan' '+0.0' '-0' '1e-5' \
               '9223372036854775807' '-9223372036854775808' '0x7fffffff' \
               '\u0000' '\U0010FFFF' '1979-05-27T07:32:00Z' \
               '[model]' '[model.weights]' '[engines]' '[readout]' \
               '[[transforms]]' '[[gates]]'
            grep -oh '"[A-Za-z_][A-Za-z0-9_.-]*"' src/case/*.c | sort -u ;;
        baseline | merge)
            dq 'null' 'true' 'false' '-1' '1e308' '0.0' '[]' '{}' '9223372036854775807'
            # the report's keys and values, quoted as JSON has them
            json_keys src/report/baseline.c src/report/json.c src/pipeline/sweep.c \
                src/pipeline/sweep_run.c src/pipeline/merge.c ;;
        safetensors) st_words ;;
        checkpoint)
            st_words
            json_keys src/model/checkpoint.c src/model/checkpoint_family.c
            dq 'model.layers.0.' 'model.layers.1.' 'model.decoder.layers.0.' 'blocks.0.' \
               'true' 'false' '1e-05' '10000.0' '65536' '4194304' '1e39' '1e-50' '1e-300' \
               '2147483647' '4294967297' '-2147483648' \
               'layers = "1-1"' '[input]' 'kind = "tokens"' 'file = "in.safetensors"'
            headers config.json model.safetensors model.safetensors.index.json \
                model-00001-of-00002.safetensors model-00002-of-00002.safetensors \
                in.safetensors ;;
        input)
            st_words
            dq '"input"' '"input_ids"' '[4,8]' '[2,2]' '15' '16' ;;
        qfile)
            st_words
            dq '"q"' '"R1"' '[8,8]' '[4,4]' '0.5' '0.3535533905932738' ;;
        case_shard)
            dq 'null' 'true' 'false' '-1' '""' '"inf"' '1e308' '0.0' '[]' '{}' \
               '9223372036854775807' '18446744073709551615'
            json_keys src/pipeline/shard.c src/pipeline/shard_merge.c src/report/env.c
            headers s1/case-shard.json s1/case-shard.bin s2/case-shard.json \
                s2/case-shard.bin s3/case-shard.json ;;
        verify)
            grep -oh '"--[a-z-]*"' src/cli/verify.c | sort -u |
                sed 's/^"/"\\x0A/; s/"$/\\x0A"/'
            dq "''" 'orig' 'trans' 'q.safetensors' 'case.toml' 'in.safetensors' 'out' \
               'down_proj:hadamard' 'qk:hadamard' 'fused' 'kept' 'tokens' 'random' \
               '0-1' '1-1' '-1' '0' '64' '4096' '9223372036854775807' '\x0A'
            headers q.safetensors case.toml in.safetensors orig/config.json \
                orig/model.safetensors trans/config.json trans/model.safetensors ;;
        esac
    } >"$d"
    echo "$d"
}

# ---- run ------------------------------------------------------------------
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
par=""
[ "$jobs" -gt 1 ] && par="-fork=$jobs"
summary=""
failed=0
ntargets=0
for tgt in $targets; do
    ntargets=$((ntargets + 1))
    start=$(date +%s)
    result=ok
    execs=0
    log=$out/log-$tgt.txt
    keep=tests/fuzz-regressions/$tgt
    [ "$tgt" = case ] && keep=tests/fuzz-regressions
    case " $built " in
    *" $tgt "*) ;;
    *) result="build failed" ;;
    esac
    if [ "$result" = ok ] && ! seed "$tgt"; then
        echo "fuzz: $tgt: making its seeds failed (said above)" >&2
        result="seeds failed"
    fi
    if [ "$result" = ok ]; then
        d=$(dict "$tgt")
        case $tgt in
        case) maxlen=65536 ;;
        merge) maxlen=262144 ;;
        input | qfile) maxlen=16384 ;;
        *) maxlen=131072 ;;
        esac
        # the targets whose code under test prints on every input (merge
        # and verify tables, refusals) run with those outputs discarded;
        # libFuzzer and the sanitizers keep theirs, and the harness reports
        # a broken contract on its own copy of stderr (fuzz_tmp.h)
        mask=""
        case $tgt in case_shard | verify) mask=-close_fd_mask=3 ;; esac
        mkdir -p "$keep"
        rm -f "$out"/artifacts/*
        echo "fuzz: $tgt for $secs s (log: $log)" >&2
        status=0
        # shellcheck disable=SC2086
        # (absolute paths: the verify target runs in a folder of its own)
        "$out/fuzz_$tgt" "$root/$out/corpus-$tgt" -dict="$d" -max_total_time="$secs" \
            -max_len="$maxlen" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
            $mask $par -artifact_prefix="$root/$out/artifacts/" >"$log" 2>&1 || status=$?
        grep '^stat::' "$log" >&2
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
        [ -n "$execs" ] || execs=$(grep -o '^#[0-9]*' "$log" | tail -n 1 | tr -d '#')
        [ -n "$execs" ] || execs=0
        found=""
        for f in "$out"/artifacts/crash-* "$out"/artifacts/timeout-* \
                 "$out"/artifacts/oom-* "$out"/artifacts/leak-*; do
            [ -f "$f" ] || continue
            cp "$f" "$keep/"
            echo "fuzz: $tgt: saved $keep/$(basename "$f"); reproduce with $out/fuzz_$tgt FILE" >&2
            kind=$(basename "$f" | cut -d- -f1)
            case " $found " in *" $kind "*) ;; *) found="$found $kind" ;; esac
        done
        if [ -n "$found" ]; then
            result=$(echo "$found" | sed 's/^ //; s/ /+/g')
        elif [ "$status" -ne 0 ]; then
            result="fuzzer error (exit $status)"
        fi
        if [ "$result" != ok ]; then
            echo "fuzz: $tgt: $result; the end of $log:" >&2
            tail -n 80 "$log" >&2
        fi
    fi
    [ "$result" = ok ] || failed=$((failed + 1))
    summary="$summary$(printf '%-12s %7s %12s  %s' "$tgt" "$(($(date +%s) - start))" "$execs" "$result")
"
done
printf 'fuzz: %-12s %7s %12s  %s\n' target seconds executions result >&2
printf '%s' "$summary" | sed 's/^/fuzz: /' >&2
if [ "$failed" -gt 0 ]; then
    echo "fuzz: FAILED: $failed of $ntargets target(s) (see above)" >&2
    exit 1
fi
echo "fuzz: no crash, leak or timeout in $secs s per target" >&2
