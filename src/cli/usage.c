/* SPDX-License-Identifier: MIT */
/* usage.c: the help text of cicheck and of each command (main.c prints
 * it for --help and after a usage error). */
#include "usage.h"

const char CIC_MAIN_USAGE[] =
    "usage: cicheck [--help] [--version] <command> [<args>]\n"
    "\n"
    "Verifies computational-invariance rewrites (LayerNorm fusion, residual\n"
    "rotation) of transformer blocks in float32 against an MPFR truth.\n"
    "\n"
    "commands:\n"
    "  run CASE|DIR...    run case files (or every case in a folder); see\n"
    "                     'cicheck run --help'\n"
    "  merge --out DIR SHARD_DIR...  combine the shards of a sweep or a case\n"
    "  plot REPORT_DIR... draw the plots of a sweep or a run (gnuplot)\n"
    "  bless CASE|DIR...  run cases and accept them as baselines in reference/\n"
    "  flops CASE.toml    analytical extra-FLOP table of the adaLN strategies for a\n"
    "                     dit case, optionally at other sizes (see 'cicheck flops\n"
    "                     --help'), e.g. DiT-XL/2: --d-model 1152 --heads 16\n"
    "  hash CASE.toml...  print the SHA-256 of each case's original weights and\n"
    "                     inputs (the fingerprints kept in reference/)\n"
    "  verify ORIG TRANS  a rewritten Hugging Face checkpoint against its original,\n"
    "                     layer by layer (see 'cicheck verify --help')\n"
    "\n"
    "exit codes: 0 all gates pass, 1 a gate or expectation failed,\n"
    "            2 bad input or usage, 3 out of memory or I/O failure\n";

const char CIC_RUN_USAGE[] =
    "usage: cicheck run [options] CASE.toml|FOLDER...\n"
    "\n"
    "Builds each case's model from its seed, computes the MPFR truth, runs every\n"
    "transform in MPFR (verdict) and in each float32 engine (errors), checks the\n"
    "expectations, the gates and the baseline, prints a table per case and a\n"
    "summary, and writes report.json per case. A FOLDER runs every *.toml below\n"
    "it (sorted, subfolders included).\n"
    "\n"
    "options:\n"
    "  --out DIR        where report.json goes (default reports/<case name>);\n"
    "                   with several cases, DIR/<case name>\n"
    "  --dump DIR       also write weights, inputs and outputs as safetensors\n"
    "                   (with several cases, DIR/<case name>)\n"
    "  --baseline DIR   compare with DIR/<case name>.json (default reference/,\n"
    "                   compared when the file exists)\n"
    "  --no-baseline    do not compare with a baseline\n"
    "  --recheck        also recompute the truth of sample 0 at mpfr_prec + 64 bits\n"
    "                   and compare (the check the proof replaced)\n"
    "  --tolerance S[,U] scale the allowed growth of the f32 metrics over the\n"
    "                   baseline by S and allow U more ULPs (default 1,4: x2 for\n"
    "                   stable, x3 for spread, x20 for tail figures; 0,0: exact)\n"
    "  --junit FILE     JUnit XML of every gate, expectation and baseline check\n"
    "  --markdown FILE  Markdown summary (also appended to $GITHUB_STEP_SUMMARY\n"
    "                   when that is set)\n"
    "  --shard K/N      run only the K-th of N slices: of a sweep's points (every\n"
    "                   N-th), or of a single case's samples (contiguous; N at\n"
    "                   most the samples); merge the N folders with 'cicheck merge'\n"
    "  --no-plots       do not draw the plots after a sweep\n"
    "  --threads N      threads of the MPFR engine (default: one per core);\n"
    "                   results are the same bits for any N\n"
    "  --max-memory B   refuse a case whose estimated memory exceeds B bytes\n"
    "                   (suffixes K, M, G; default half of the machine's RAM)\n"
    "  --quiet          no progress lines on stderr\n"
    "  --color          force colours;  --no-color  never colour\n"
    "  -h, --help       this text\n";

const char CIC_MERGE_USAGE[] =
    "usage: cicheck merge --out DIR [options] SHARD_DIR...\n"
    "\n"
    "Combines the N shards of one sweep or of one case (run with --shard K/N).\n"
    "A sweep's sweep.json files become DIR/sweep.json and its plots. A case's\n"
    "shards (case-shard.json and .bin: its samples' truth, outputs and FLOPs)\n"
    "are scored as the whole case: DIR/report.json, the table and the exit code\n"
    "are those of an unsharded run (timing aside), with the baseline compared as\n"
    "'cicheck run' does. Refuses shards of different case files or cicheck\n"
    "versions, a shard given twice, missing points or shards, edited or\n"
    "truncated shards, and shards that read different bytes of a q, input or\n"
    "checkpoint file (their files_read) (exit 2, naming the file).\n"
    "\n"
    "options:\n"
    "  --out DIR        the merged folder (not one of the shards)\n"
    "  --no-plots       a sweep: do not draw the plots\n"
    "  --baseline DIR, --no-baseline, --tolerance S[,U], --junit FILE,\n"
    "  --markdown FILE, --color, --no-color\n"
    "                   a case: as for 'cicheck run'\n";

const char CIC_PLOT_USAGE[] =
    "usage: cicheck plot REPORT_DIR...\n"
    "\n"
    "Draws the plots of a sweep (REPORT_DIR/sweep.json) or of a single run\n"
    "(REPORT_DIR/report.json) under REPORT_DIR/plots: per plot a .dat, a\n"
    "standalone gnuplot script .gp and PNG, SVG and PDF renderings.\n";

const char CIC_BLESS_USAGE[] =
    "usage: cicheck bless [--force] [--baseline DIR] CASE.toml|FOLDER...\n"
    "\n"
    "Runs each case and writes its report as the accepted baseline\n"
    "DIR/<case name>.json (default reference/). Refused when CI=true (a CI job\n"
    "must not accept its own numbers) and for a run whose gates fail, unless\n"
    "--force.\n";

const char CIC_FLOPS_USAGE[] =
    "usage: cicheck flops [options] CASE.toml\n"
    "\n"
    "Prints the closed-form extra FLOPs (in % of the dit block) of every adaLN\n"
    "strategy against tokens per sample (16 .. 65536) and the crossover N* where\n"
    "folding per sample beats online unrotation. Nothing is run, so any size works.\n"
    "\n"
    "For the other blocks (preln, rmsnorm, parallel) it prints, per transform of\n"
    "the case, the closed-form FLOPs against the untransformed block and against\n"
    "the transform it is applied after (the cost of the online ops R3 and R4),\n"
    "in total and per token and layer, e.g. LLaMA-2-7B's sizes on\n"
    "cases/quarot-llama.toml: --d-model 4096 --heads 32 --kv-heads 32 --d-mlp 11008.\n"
    "\n"
    "options (override the case's [model] sizes):\n"
    "  --d-model N  --heads N  --mlp-ratio N  --d-cond N  --layers N  --d-out N\n"
    "  --d-mlp N (the MLP width itself)  --kv-heads N  --tokens N\n";

const char CIC_HASH_USAGE[] =
    "usage: cicheck hash CASE.toml...\n"
    "\n"
    "Prints the SHA-256 of each case's original weights and inputs, the\n"
    "fingerprints kept in reference/weights.sha256.\n";
