#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""layers.py: the structure of src/ measured against docs/design.md.

  layers.py [--root DIR] [--build DIR] [--design FILE] [--json]
            [--max-file N] [--max-func N] [--transitive]

Reads the source tree ROOT/src and a build of it (default ROOT/build, after
`ninja -C build`) and checks what issue 27 asks of the structure:

  graph       file include graph (every `#include "..."` of src/**/*.c, *.h,
              *.cpp, resolved against the including file's folder, then
              against src/; system includes and files outside src/ are
              left out) plus the file call graph (nm on the objects meson
              built from src/: A.c -> B.c when A's object leaves a symbol
              undefined that B's object defines), plus the calls in headers'
              code (an indented line of a .h: a static inline function or a
              macro body, comments left out) to a symbol an object defines.
              A .c and its .h are separate nodes.
  circles     every strongly connected component of more than one file, and
              the includes or symbols that tie each edge inside it.
  modules     the folders under src/. The allowed dependencies are read from
              the module map of docs/design.md (the table after "### Module
              map", columns module | files | what it does | includes): its
              "includes" cell lists modules, `engine (engine_id.h)` allows
              only those headers of engine (and the symbols they declare),
              "nothing" none; a sentence "all include src/base" before the
              table allows base to every module. Every include or call edge
              between two modules that the row of the first does not declare
              is printed: "back-edge" when the target module depends on the
              first through the declared includes (the edge goes up), else
              "undeclared". --transitive also accepts a module reached
              through the declared (unrestricted) includes.
  lengths     files over --max-file lines (900; counted as wc -l does) and
              functions over --max-func lines (120; column 5 of pmccabe, when
              pmccabe is installed).

Exit status: 0 clean, 1 when anything above is found (a circle, an
undeclared edge, a long file or function), 2 on a usage error (no src/, no
objects in the build, no module map). Standard library only.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

SOURCE_EXT = ('.c', '.h', '.cpp')
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
PMCCABE_RE = re.compile(r'^(\d+)\t(\d+)\t(\d+)\t(\d+)\t(\d+)\t(.*)\((\d+)\): (.*)$')


class UsageError(Exception):
    pass


def source_files(root):
    """Every .c, .h and .cpp under ROOT/src, as paths relative to ROOT."""
    out = []
    for d, dirs, files in os.walk(os.path.join(root, 'src')):
        dirs.sort()
        for f in sorted(files):
            if f.endswith(SOURCE_EXT):
                out.append(os.path.relpath(os.path.join(d, f), root))
    return out


def line_count(path):
    """Newlines in PATH, as wc -l counts them."""
    with open(path, 'rb') as fh:
        return fh.read().count(b'\n')


def include_edges(root, files):
    """{(a, b): [spelling]} for a's `#include "..."` lines that name b under src/."""
    known = set(files)
    edges = {}
    for f in files:
        with open(os.path.join(root, f), encoding='utf-8', errors='replace') as fh:
            for line in fh:
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                name = m.group(1)
                for base in (os.path.dirname(f), 'src'):
                    target = os.path.normpath(os.path.join(base, name))
                    if target in known:
                        if target != f:
                            edges.setdefault((f, target), []).append(name)
                        break
    return edges


def objects(root, build, files):
    """{source: [object]}: meson names an object after its source path with
    '/' as '_' (build/libcicheck-internal.a.p/src_case_load.c.o); objects of
    sources outside src/ (the tests, the benches) map to nothing."""
    by_name = {f.replace('/', '_') + '.o': f for f in files if not f.endswith('.h')}
    out = {}
    for d, dirs, names in os.walk(build):
        dirs.sort()
        for n in sorted(names):
            if n in by_name:
                out.setdefault(by_name[n], []).append(os.path.join(d, n))
    return out


def symbols(nm, objs):
    """{source: (defined, used)}: the global symbols each source's objects
    define and leave undefined (objs: {source: [object]}), read by one nm
    run over every object (-A names the object on each line)."""
    owner = {o: f for f, os_ in objs.items() for o in os_}
    out = {f: (set(), set()) for f in objs}
    if not owner:
        return out
    r = subprocess.run([nm, '-P', '-A'] + sorted(owner), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    if r.returncode != 0:
        raise UsageError('%s failed: %s' % (nm, r.stderr.strip()))
    for line in r.stdout.splitlines():
        obj, sep, rest = line.partition(': ')
        parts = rest.split()
        if not sep or obj not in owner or len(parts) < 2:
            continue
        defined, used = out[owner[obj]]
        name, kind = parts[0], parts[1]
        if kind in ('U', 'w'):
            used.add(name)
        elif kind.isupper() or kind == 'u':
            defined.add(name)
    return {f: (d, u - d) for f, (d, u) in out.items()}


def call_edges(nm, objs, defs):
    """{(a, b): [symbol]}: a uses a symbol b defines (defs filled: symbol
    -> the sources whose objects define it)."""
    uses = {}
    for f, (d, u) in sorted(symbols(nm, objs).items()):
        uses[f] = u
        for s in d:
            defs.setdefault(s, []).append(f)
    edges = {}
    for f, u in uses.items():
        for s in sorted(u):
            for g in defs.get(s, ()):
                if g != f:
                    edges.setdefault((f, g), []).append(s)
    return edges


COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)
CALL = re.compile(r'\b([A-Za-z_][A-Za-z0-9_]*)\s*\(')


def header_calls(root, files, defs):
    """{(h, b): [symbol]}: code in header h (an indented line: the body of a
    static inline function or a macro) calls a symbol b's object defines.
    nm cannot see these: they are compiled into whoever includes h."""
    edges = {}
    for h in files:
        if not h.endswith('.h'):
            continue
        with open(os.path.join(root, h), errors='replace') as f:
            text = COMMENT.sub(lambda m: '\n' * m.group(0).count('\n'), f.read())
        for line in text.splitlines():
            if not line[:1].isspace():
                continue
            for name in CALL.findall(line):
                for g in defs.get(name, ()):
                    if os.path.splitext(g)[0] != os.path.splitext(h)[0]:
                        syms = edges.setdefault((h, g), [])
                        if name not in syms:
                            syms.append(name)
    return edges


def circles(nodes, succ):
    """Strongly connected components of more than one node (Tarjan's
    algorithm, iterative: the graph may be deeper than Python's stack)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(succ.get(start, ())))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            pushed = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(succ.get(w, ()))))
                    pushed = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if pushed:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def split_top(text):
    """TEXT split at the commas outside parentheses."""
    parts, depth, cur = [], 0, ''
    for ch in text:
        if ch == '(':
            depth += 1
        elif ch == ')':
            depth = max(0, depth - 1)
        if ch == ',' and depth == 0:
            parts.append(cur)
            cur = ''
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def cells(line):
    return [c.strip() for c in line.strip().strip('|').split('|')]


def module_name(cell):
    return cell.replace('`', '').strip().strip('/').replace('src/', '', 1).strip()


def module_map(design):
    """{module: {module: None (all of it) or set(headers)}}, implicit modules,
    module order: the table after "### Module map" in DESIGN."""
    try:
        with open(design, encoding='utf-8') as fh:
            lines = fh.read().split('\n')
    except OSError as e:
        raise UsageError('cannot read %s: %s' % (design, e.strerror))
    try:
        at = next(i for i, l in enumerate(lines) if l.strip().lower() == '### module map')
    except StopIteration:
        raise UsageError('%s: no "### Module map" heading' % design)
    i = at + 1
    prose = []
    while i < len(lines) and not lines[i].lstrip().startswith('|'):
        if lines[i].startswith('#'):
            raise UsageError('%s: no table under "### Module map"' % design)
        prose.append(lines[i])
        i += 1
    if i + 2 >= len(lines):
        raise UsageError('%s: no table under "### Module map"' % design)
    head = [c.lower() for c in cells(lines[i])]
    if 'module' not in head or 'includes' not in head:
        raise UsageError('%s: the module map has no "module" and "includes" columns' % design)
    cm, ci = head.index('module'), head.index('includes')
    rows = []
    for line in lines[i + 2:]:
        if not line.lstrip().startswith('|'):
            break
        c = cells(line)
        if len(c) > max(cm, ci):
            rows.append((module_name(c[cm]), c[ci]))
    names = [m for m, _ in rows]
    allowed = {}
    for mod, inc in rows:
        decl = {}
        for item in split_top(inc.replace('`', '')):
            m = re.match(r'(?:src/)?([A-Za-z_][\w-]*)\s*(?:\((.*)\))?', item)
            if not m or m.group(1) == 'nothing':
                continue
            name, hdrs = m.group(1), m.group(2)
            if hdrs is None:
                decl[name] = None
            elif decl.get(name, set()) is not None:
                found = set(re.findall(r'[\w./-]+\.h(?:pp)?\b', hdrs))
                decl[name] = decl.get(name, set()) | {os.path.basename(h) for h in found}
        allowed[mod] = decl
    implicit = set()
    m = re.search(r'all include ([^.;]*)', ' '.join(prose))
    if m:
        implicit = {w for w in re.findall(r'(?:src/)?(\w+)', m.group(1)) if w in allowed}
    return allowed, implicit, names


def depends_closure(allowed, implicit):
    """{module: modules it depends on through declared includes, transitively}.
    A declaration restricted to some headers (`engine (engine_id.h)`) is not
    followed: it lends those headers, not the module's own dependencies."""
    out = {}
    for mod in allowed:
        seen, todo = set(), [mod]
        while todo:
            cur = todo.pop()
            whole = [n for n, h in allowed.get(cur, {}).items() if h is None]
            for n in whole + sorted(implicit - {cur}):
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        seen.discard(mod)
        out[mod] = seen
    return out


def module_of(path):
    parts = path.split('/')
    return parts[1] if len(parts) > 2 else ''


def header_text(root, files, mod, headers):
    text = ''
    for f in files:
        if module_of(f) == mod and os.path.basename(f) in headers:
            with open(os.path.join(root, f), encoding='utf-8', errors='replace') as fh:
                text += fh.read()
    return text


def check_modules(root, files, edges, allowed, implicit, transitive):
    """The edges between modules that the module map does not declare."""
    closure = depends_closure(allowed, implicit)
    found, used = [], set()
    texts = {}
    for (a, b), e in sorted(edges.items()):
        ma, mb = module_of(a), module_of(b)
        if ma == mb:
            continue
        used.add((ma, mb))
        decl = allowed.get(ma, {})
        bad_inc, bad_sym = [], []
        if mb in implicit or (mb in decl and decl[mb] is None) or \
                (transitive and mb in closure.get(ma, ())):
            continue
        hdrs = decl.get(mb)
        if e.get('include'):
            if not hdrs or os.path.basename(b) not in hdrs:
                bad_inc = e['include']
        if e.get('call'):
            if not hdrs:
                bad_sym = e['call']
            else:
                key = (mb, tuple(sorted(hdrs)))
                if key not in texts:
                    texts[key] = header_text(root, files, mb, hdrs)
                # the header list lends what those headers declare, not
                # everything of the .c files behind them
                bad_sym = [s for s in e['call']
                           if not re.search(r'\b%s\b' % re.escape(s), texts[key])]
        if bad_inc or bad_sym:
            found.append({'from_module': ma, 'to_module': mb, 'from': a, 'to': b,
                          'include': bad_inc, 'call': bad_sym,
                          'back_edge': ma in closure.get(mb, ()),
                          'known_modules': ma in allowed and mb in allowed})
    unused = sorted('%s declares %s' % (m, n) for m, d in allowed.items()
                    for n in d if (m, n) not in used)
    return found, unused


def functions(root, files, limit):
    """(checked, [long function]) through pmccabe."""
    pm = shutil.which('pmccabe')
    if pm is None:
        return False, []
    r = subprocess.run([pm] + files, cwd=root, stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, universal_newlines=True)
    out = []
    for line in r.stdout.splitlines():
        m = PMCCABE_RE.match(line)
        if m and int(m.group(5)) > limit:
            out.append({'file': m.group(6), 'line': int(m.group(7)),
                        'name': m.group(8), 'lines': int(m.group(5))})
    return True, out


def edge_names(e, most=None):
    out = []
    if e.get('include'):
        out.append('include ' + ', '.join(sorted(set(e['include']))))
    if e.get('call'):
        syms = e['call'] if most is None or len(e['call']) <= most else \
            e['call'][:most] + ['+%d more' % (len(e['call']) - most)]
        out.append('call ' + ', '.join(syms))
    return '; '.join(out)


def measure(args):
    root = os.path.abspath(args.root)
    if not os.path.isdir(os.path.join(root, 'src')):
        raise UsageError('%s has no src/ folder' % root)
    build = os.path.abspath(args.build or os.path.join(root, 'build'))
    design = args.design or os.path.join(root, 'docs', 'design.md')
    nm = shutil.which(args.nm)
    if nm is None:
        raise UsageError('%s not found (binutils)' % args.nm)
    files = source_files(root)
    objs = objects(root, build, files)
    if not objs:
        raise UsageError('no objects of src/ under %s: build it first (ninja -C %s)' % (build, build))
    allowed, implicit, order = module_map(design)
    # an object older than its source describes code that is gone
    stale = sorted(f for f, os_ in objs.items()
                   if any(os.path.getmtime(o) < os.path.getmtime(os.path.join(root, f))
                          for o in os_))

    edges = {}
    incs = include_edges(root, files)
    defs = {}
    calls = call_edges(nm, objs, defs)
    for k, v in header_calls(root, files, defs).items():
        calls.setdefault(k, []).extend(x for x in v if x not in calls.get(k, []))
    for k, v in incs.items():
        edges.setdefault(k, {})['include'] = v
    for k, v in calls.items():
        edges.setdefault(k, {})['call'] = v
    succ = {}
    for a, b in sorted(edges):
        succ.setdefault(a, []).append(b)
    circ = []
    for comp in circles(files, succ):
        inside = set(comp)
        circ.append({'files': comp,
                     'edges': [{'from': a, 'to': b, 'include': e.get('include', []),
                                'call': e.get('call', [])}
                               for (a, b), e in sorted(edges.items())
                               if a in inside and b in inside]})
    undeclared, unused = check_modules(root, files, edges, allowed, implicit, args.transitive)
    lines = {f: line_count(os.path.join(root, f)) for f in files}
    long_files = [{'file': f, 'lines': n} for f, n in lines.items() if n > args.max_file]
    checked, long_funcs = functions(root, files, args.max_func)
    unknown = sorted({module_of(f) for f in files} - set(allowed))
    return {
        'root': root, 'build': build, 'design': design,
        'modules': order, 'implicit_modules': sorted(implicit),
        'modules_not_in_map': unknown,
        'files': len(files), 'lines': sum(lines.values()),
        'objects': sum(len(v) for v in objs.values()), 'stale_objects': stale,
        'include_edges': len(incs), 'call_edges': len(calls),
        'circles': circ, 'undeclared': undeclared,
        'back_edges': sum(1 for u in undeclared if u['back_edge']),
        'unused_declarations': unused,
        'long_files': long_files, 'functions_checked': checked,
        'long_functions': long_funcs,
        'max_file': args.max_file, 'max_func': args.max_func,
        'transitive': args.transitive,
    }


def print_text(r):
    p = print
    p('layers: %s (build %s, module map %s)' % (r['root'], r['build'], r['design']))
    p('modules, bottom first: %s; every module may use: %s'
      % (' '.join(r['modules']), ', '.join(r['implicit_modules']) or 'none'))
    for m in r['modules_not_in_map']:
        p('module %s: not in the module map (all its edges are undeclared)' % m)
    for f in r['stale_objects']:
        p('note: the object of %s is older than it: rebuild for a true call graph' % f)
    for i, c in enumerate(r['circles'], 1):
        p('circle %d (%d files): %s' % (i, len(c['files']), ' '.join(c['files'])))
        for e in c['edges']:
            p('  %s -> %s: %s' % (e['from'], e['to'], edge_names(e, 8)))
    for u in r['undeclared']:
        p('%s %s -> %s: %s -> %s: %s' % ('back-edge' if u['back_edge'] else 'undeclared',
                                         u['from_module'], u['to_module'], u['from'], u['to'],
                                         edge_names(u, 8)))
    for n in r['unused_declarations']:
        p('note: the module map says %s; no file does' % n)
    for f in r['long_files']:
        p('long file %s: %d lines (> %d)' % (f['file'], f['lines'], r['max_file']))
    if not r['functions_checked']:
        p('pmccabe not installed: function lengths not checked')
    for f in r['long_functions']:
        p('long function %s:%d %s: %d lines (> %d)'
          % (f['file'], f['line'], f['name'], f['lines'], r['max_func']))
    p('summary: files %d, lines %d, include edges %d, call edges %d, circles %d, '
      'undeclared edges %d (back-edges %d), files > %d: %d, functions > %d: %s'
      % (r['files'], r['lines'], r['include_edges'], r['call_edges'], len(r['circles']),
         len(r['undeclared']), r['back_edges'], r['max_file'], len(r['long_files']),
         r['max_func'], len(r['long_functions']) if r['functions_checked'] else 'not checked'))


def main(argv):
    ap = argparse.ArgumentParser(
        description='Circles, undeclared module edges and long files/functions of src/.')
    ap.add_argument('--root', default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help='source tree (default: the one holding this script)')
    ap.add_argument('--build', help='build folder with the objects (default ROOT/build)')
    ap.add_argument('--design', help='the design notes with the module map (default ROOT/docs/design.md)')
    ap.add_argument('--json', action='store_true', help='print the measure as JSON')
    ap.add_argument('--max-file', type=int, default=900, help='longest file allowed, lines (900)')
    ap.add_argument('--max-func', type=int, default=120, help='longest function allowed, lines (120)')
    ap.add_argument('--transitive', action='store_true',
                    help='accept a module reached through the declared includes')
    ap.add_argument('--nm', default=os.environ.get('NM', 'nm'), help='nm to run (default $NM or nm)')
    args = ap.parse_args(argv)
    try:
        r = measure(args)
    except UsageError as e:
        print('layers.py: %s' % e, file=sys.stderr)
        return 2
    r['ok'] = not (r['circles'] or r['undeclared'] or r['long_files'] or r['long_functions'])
    if args.json:
        json.dump(r, sys.stdout, indent=1, sort_keys=True)
        print()
    else:
        print_text(r)
    return 0 if r['ok'] else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
