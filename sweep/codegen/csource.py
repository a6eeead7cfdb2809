"""The C text of a scalar program (:class:`sweep.codegen.emit.Program`).

Layout (batch-minor): every scalar is a ``vd``, a GCC vector of W doubles,
one lane per variant. ``in`` / ``out`` hold the inputs and outputs
element by element ([element][lane]); ``ws`` the values that cross a
function boundary (slots); ``ar`` the arena (stored arrays: scan outputs,
large element-wise results). Statements are split into functions of
``chunk`` statements (keeps the C compiler's time linear); a value used
only inside its function is a C local the compiler keeps in registers.
Integers and booleans are float64 lanes too (exact below 2^53; booleans
0/1).
"""
from __future__ import annotations

import math

import numpy as np

from sweep.codegen.ir import BUF, Loop, int_refs

PRELUDE = r"""
#include <math.h>
#include <string.h>
#define W %(W)d
typedef double vd __attribute__((vector_size(W * 8), aligned(8)));
#define S(c) (((vd){0}) + (double)(c))
#define L1(name, expr) static inline vd name(vd a) { vd r; for (int l = 0; l < W; l++) { double x = a[l]; r[l] = (expr); } return r; }
#define L2(name, expr) static inline vd name(vd a, vd b) { vd r; for (int l = 0; l < W; l++) { double x = a[l], y = b[l]; r[l] = (expr); } return r; }
#if defined(AXLE_MVEC) && W == 4 && defined(__AVX2__)
/* glibc's vector math library (libmvec, AVX2: 4 doubles per call, <= 4 ulp)
   instead of one libm call per lane: the transcendental functions were a
   quarter of the double wishbone's step (BENCHMARKS.md, "Generated backend") */
#include <immintrin.h>
#define M1(name, f) __m256d _ZGVdN4v_##f(__m256d); \
  static inline vd name(vd a) { return (vd)_ZGVdN4v_##f((__m256d)a); }
#define M2(name, f) __m256d _ZGVdN4vv_##f(__m256d, __m256d); \
  static inline vd name(vd a, vd b) { return (vd)_ZGVdN4vv_##f((__m256d)a, (__m256d)b); }
M1(v_sin, sin) M1(v_cos, cos) M1(v_tan, tan) M1(v_tanh, tanh) M1(v_asin, asin) M1(v_acos, acos)
M1(v_atan, atan) M1(v_sinh, sinh) M1(v_cosh, cosh) M1(v_exp, exp) M1(v_log, log) M1(v_log1p, log1p)
M1(v_expm1, expm1) M1(v_cbrt, cbrt) M1(v_erf, erf) M1(v_exp2, exp2)
M2(v_atan2, atan2) M2(v_pow, pow)
#else
L1(v_sin, sin(x)) L1(v_cos, cos(x)) L1(v_tan, tan(x)) L1(v_tanh, tanh(x)) L1(v_asin, asin(x))
L1(v_acos, acos(x)) L1(v_atan, atan(x)) L1(v_sinh, sinh(x)) L1(v_cosh, cosh(x))
L1(v_exp, exp(x)) L1(v_log, log(x)) L1(v_log1p, log1p(x)) L1(v_expm1, expm1(x))
L1(v_cbrt, cbrt(x)) L1(v_erf, erf(x)) L1(v_exp2, exp2(x))
L2(v_atan2, atan2(x, y)) L2(v_pow, pow(x, y))
#endif
L1(v_sqrt, sqrt(x)) L1(v_fabs, fabs(x))
L1(v_sign, x > 0 ? 1.0 : (x < 0 ? -1.0 : x)) L1(v_floor, floor(x)) L1(v_ceil, ceil(x))
L1(v_isfin, isfinite(x) ? 1.0 : 0.0) L1(v_lnot, x != 0 ? 0.0 : 1.0) L1(v_logistic, 1.0 / (1.0 + exp(-x)))
L1(v_square, x * x) L1(v_rsqrt, 1.0 / sqrt(x))
L1(v_round_, round(x)) L1(v_trunc, trunc(x)) L1(v_nz, x != 0 ? 1.0 : 0.0)
L2(v_max, (x > y || isnan(x)) ? x : y) L2(v_min, (x < y || isnan(x)) ? x : y)
L2(v_rem, fmod(x, y)) L2(v_idiv, trunc(x / y)) L2(v_nextafter, nextafter(x, y))
L2(v_lt, x < y ? 1.0 : 0.0) L2(v_le, x <= y ? 1.0 : 0.0) L2(v_gt, x > y ? 1.0 : 0.0)
L2(v_ge, x >= y ? 1.0 : 0.0) L2(v_eq, x == y ? 1.0 : 0.0) L2(v_ne, x != y ? 1.0 : 0.0)
L2(v_land, (x != 0 && y != 0) ? 1.0 : 0.0) L2(v_lor, (x != 0 || y != 0) ? 1.0 : 0.0)
static inline vd v_sel(vd p, vd f, vd t) { vd r; for (int l = 0; l < W; l++) r[l] = p[l] != 0 ? t[l] : f[l]; return r; }
static inline int v_any(vd a) { for (int l = 0; l < W; l++) if (a[l] != 0) return 1; return 0; }
#define FN __attribute__((noinline, visibility("hidden"))) void
#define ARGS vd *restrict ws, vd *restrict ar, const vd *restrict in, vd *restrict out, long *restrict it, const double *restrict sh
#define PASS ws, ar, in, out, it, sh
"""


def _const(c):
    if math.isnan(c):
        return "S(NAN)"
    if math.isinf(c):
        return "S(INFINITY)" if c > 0 else "S(-INFINITY)"
    return f"S({c!r})"


class _Emitter:
    def __init__(self, prog, W, chunk):
        self.p, self.W, self.chunk = prog, W, chunk
        self.fn_of = {}          # id -> function index where defined
        self.slot = {}           # id -> ws slot
        self.uses = {}           # id -> set of functions using it
        self.functions = []      # (index, list of statements)
        self.n_statements = 0
        self.time = 0
        self.t_def, self.t_last, self.loops_of, self.pending = {}, {}, {}, {}
        self.used_itabs = set()  # index tables some loop still reads

    # pass 1: functions, uses and live ranges ------------------------------
    def plan(self, scope, loops=()):
        """Split a scope into functions; returns their indices. Every
        statement gets a time (its place in the program's layout), every use
        of a value the time it is needed until: inside a loop that does not
        define the value, the end of that loop (it is read again in the next
        iteration)."""
        fns = []
        cur = None
        count = 0
        for st in scope:
            if cur is None or count >= self.chunk:
                cur = len(self.functions)
                self.functions.append([])
                fns.append(cur)
                count = 0
            self.functions[cur].append(st)
            count += 1
            i, op, args = st
            self.n_statements += 1
            self.time += 1
            if op == "loop":
                loop: Loop = args
                loop.t_start = self.time
                inner = loops + (loop,)
                for ph in loop.phis + ([loop.active] if loop.active is not None else []):
                    self.slot.setdefault(ph, None)
                    self.define(ph, None, inner)
                for r in list(loop.init) + ([loop.cond_pre] if loop.kind in ("while", "if") else []):
                    self.use(r, cur, loops)
                loop.fns = self.plan(loop.body, inner)
                self.time += 1
                for r in list(loop.nxt) + ([loop.cond_ref] if loop.kind == "while" else []):
                    self.use(r, cur, inner)
                for ph in loop.phis + ([loop.active] if loop.active is not None else []):
                    self.use(ph, cur, inner)
                loop.t_end = self.time
                self.time += 1
                self.close(loop)
                continue
            if i is not None:
                self.define(i, cur, loops)
            if op == "aloop":
                for kind, v in args[3]:
                    if kind == "s":
                        self.use(v, cur, loops)
            elif op == "ystore":
                self.use(args[3], cur, loops)
            elif op == "store":
                self.use(args[1], cur, loops)
            elif op in ("in", "shared_in", "itaff", "xtab", "xarena", "areduce"):
                pass
            else:
                for a in args:
                    self.use(a, cur, loops)
        return fns

    def define(self, r, fn, loops):
        if fn is not None:
            self.fn_of.setdefault(r, fn)
        self.t_def[r] = self.time
        self.loops_of[r] = loops

    def use(self, r, fn, loops):
        if isinstance(r, float) or r is None or r >= BUF or r < 0:
            return
        self.uses.setdefault(r, set()).add(fn)
        dl = self.loops_of.get(r, ())
        # a use inside loops the value is not defined in: live to the end of the outermost of them
        outer = [lp for lp in loops if lp not in dl]
        if outer:
            self.pending.setdefault(id(outer[0]), []).append(r)
        else:
            self.t_last[r] = max(self.t_last.get(r, 0), self.time)

    def close(self, loop):
        for r in self.pending.pop(id(loop), []):
            self.t_last[r] = max(self.t_last.get(r, 0), loop.t_end)

    def assign_slots(self, out_fn):
        """Workspace slots for the values that cross a function boundary,
        reused once a value is dead (linear scan over the live ranges)."""
        for r, fns in self.uses.items():
            if r in self.slot or any(f != self.fn_of.get(r) for f in fns):
                self.slot[r] = None
        import heapq
        order = sorted(self.slot, key=lambda r: self.t_def.get(r, 0))
        free, busy, n = [], [], 0
        for r in order:
            t0 = self.t_def.get(r, 0)
            while busy and busy[0][0] < t0:
                heapq.heappush(free, heapq.heappop(busy)[1])
            if free:
                k = heapq.heappop(free)
            else:
                k, n = n, n + 1
            self.slot[r] = k
            heapq.heappush(busy, (max(self.t_last.get(r, t0), t0), k))
        return n

    # pass 2: text -----------------------------------------------------------
    def ref(self, r, fn):
        if isinstance(r, float):
            return _const(r)
        if r >= BUF:
            return f"ar[{r - BUF}]"
        if self.fn_of.get(r) == fn:
            return f"v{r}"
        return f"ws[{self.slot[r]}]"

    def expr(self, op, args, fn, kind):
        a = [self.ref(x, fn) for x in args] if op not in ("in", "shared_in", "itaff", "xtab", "xarena", "areduce") else args
        if op == "in":
            return f"in[{int(args[0])}]"
        if op == "shared_in":
            return f"S(sh[{int(args[0])}])"
        if op == "itaff":
            return f"S({args[0]!r} + {args[1]!r} * (double)it[{self.cur_depth}])"
        if op == "xtab":
            t, n, k = map(int, args)
            return f"S(tab{t}[it[{self.cur_depth}] * {n} + {k}])"
        if op == "xarena":
            s, n, k = map(int, args)
            return f"ar[{s} + it[{self.cur_depth}] * {n} + {k}]"
        if op == "add":
            return f"{a[0]} + {a[1]}"
        if op == "sub":
            return f"{a[0]} - {a[1]}"
        if op == "mul":
            return f"{a[0]} * {a[1]}"
        if op == "div":
            return f"v_idiv({a[0]}, {a[1]})" if kind == "i" else f"{a[0]} / {a[1]}"
        if op == "mov":
            return a[0]
        if op == "sel":
            return f"v_sel({a[0]}, {a[1]}, {a[2]})"
        return f"v_{op}({', '.join(a)})"

    def body(self, fn, statements, depth):
        lines = []
        self.cur_depth = depth
        for i, op, args in statements:
            if op == "loop":
                lines.extend(self.loop(fn, args))
                self.cur_depth = depth
                continue
            if op == "ystore":
                base, n, k, a, reverse, L = args
                lines.append(f"  ar[{base} + it[{depth}] * {n} + {k}] = {self.ref(a, fn)};")
                continue
            if op == "store":
                lines.append(f"  ar[{args[0] - BUF}] = {self.ref(args[1], fn)};")
                continue
            if op == "aloop":
                name, base, n, operands, kind = args
                segments = self.segments(operands, n)
                if segments is None:
                    rhs = self.arena_rhs(name, kind, [self.arena_ex(o, fn) for o in operands])
                    lines.append(f"  for (long e = 0; e < {n}; e++) ar[{base - BUF} + e] = {rhs};")
                    continue
                # index tables made of a few runs (e.g. two arrays side by side, a
                # transposed block): one loop per run, no table; equal runs whose
                # starts advance evenly (an outer product, a block row by row) as
                # one nested loop - gcc's time grows with the number of loops
                for group in _even_rows(segments):
                    s0, ln, subs = group[0]
                    if len(group) == 1:
                        ex = [self.arena_ex(o, fn, s0, sub) for o, sub in zip(operands, subs)]
                        rhs = self.arena_rhs(name, kind, ex)
                        lines.append(f"  for (long e = 0; e < {ln}; e++) ar[{base - BUF + s0} + e] = {rhs};")
                        continue
                    ex = []
                    for o, sub, nxt in zip(operands, subs, group[1][2]):
                        if o[0] == "a":
                            ex.append(f"ar[{o[1] - BUF + s0} + {ln} * r + e]")
                        elif sub is not None:
                            ex.append(f"ar[{sub[0]} + {nxt[0] - sub[0]} * r + {sub[1]} * e]")
                        else:
                            ex.append(self.arena_ex(o, fn))
                    rhs = self.arena_rhs(name, kind, ex)
                    lines.append(f"  for (long r = 0; r < {len(group)}; r++) for (long e = 0; e < {ln}; e++) "
                                 f"ar[{base - BUF + s0} + {ln} * r + e] = {rhs};")
                continue
            kind = self.p.dtype_of.get(i, "f")
            if op == "areduce":
                name, opnd, n = args
                comb = {"add": "acc + x", "mul": "acc * x",
                        "allfin": "v_land(acc, v_isfin(x))"}.get(name, f"v_{name}(acc, x)")
                first = "v_isfin(x)" if name == "allfin" else "x"      # all(is_finite(x)), fused
                if opnd[0] == "r":          # all(is_finite) over contiguous runs (fuse_output_passes)
                    runs = " ".join(f"for (long e = 0; e < {ln}; e++) acc = v_land(acc, v_isfin(ar[{o} + e]));"
                                    for o, ln in opnd[1])
                    lines.append(f"  vd v{i}; {{ vd acc = S(1.0); {runs} v{i} = acc; }}")
                    if i in self.slot:
                        lines.append(f"  ws[{self.slot[i]}] = v{i};")
                    continue
                lines.append(f"  vd v{i}; {{ long e = 0; vd x = {self.arena_ex(opnd, fn)}; vd acc = {first}; "
                             f"for (e = 1; e < {n}; e++) {{ x = {self.arena_ex(opnd, fn)}; acc = {comb}; }} "
                             f"v{i} = acc; }}")
            else:
                lines.append(f"  vd v{i} = {self.expr(op, args, fn, kind)};")
            if i in self.slot:
                lines.append(f"  ws[{self.slot[i]}] = v{i};")
        return lines

    def arena_ex(self, o, fn, s0=0, run=None):
        """C of an arena-loop operand at loop index e; ``s0`` / ``run``: the
        loop covers elements s0.. of the operand, an index table's run as
        (first index, step)."""
        kd, v = o
        if kd == "c":
            return _const(v)
        if kd == "s":
            return self.ref(v, fn)
        if kd == "a":
            return f"ar[{v - BUF + s0} + e]"
        if run is not None:
            first, step = run
            return f"ar[{first}]" if step == 0 else f"ar[{first} + {step} * e]" if step != 1 else f"ar[{first} + e]"
        self.used_itabs.add(v)
        return f"ar[itab{v}[e]]"

    @staticmethod
    def arena_rhs(name, kind, ex):
        if name in ("add", "sub", "mul"):
            return f" {dict(add='+', sub='-', mul='*')[name]} ".join(ex)
        if name == "div" and kind != "i":
            return f"{ex[0]} / {ex[1]}"
        if name == "div":
            return f"v_idiv({ex[0]}, {ex[1]})"
        if name == "neg":
            return f"-{ex[0]}"
        return f"v_{name}({', '.join(ex)})"

    def segments(self, operands, n, max_runs=256):
        """The arena loop over ``n`` elements split where any index-table
        operand's (first, step) run ends: [(start, length, per operand
        (first, step) or None)], or None when no operand is a table or the
        tables have more than ``max_runs`` runs (then the loop reads them)."""
        tabs = {k: np.asarray(self.p.index_tables[v], np.int64) for k, (kd, v) in enumerate(operands) if kd == "t"}
        if not tabs:
            return None
        cuts = {0, n}
        for tab in tabs.values():
            d = np.diff(tab)
            change = np.nonzero(d[1:] != d[:-1])[0] + 1      # d[p] != d[p - 1]
            r = 0                                            # a run starts at element r with step d[r]
            while r < n - 1:
                k = np.searchsorted(change, r, side="right")
                p = int(change[k]) if k < len(change) else n - 1     # elements r..p keep the step
                cuts.add(p + 1)
                r = p + 1
                if len(cuts) > max_runs + 1:
                    return None
        cuts = sorted(cuts)
        out = []
        for a, b in zip(cuts[:-1], cuts[1:]):
            subs = []
            for k in range(len(operands)):
                if k in tabs:
                    tab = tabs[k]
                    step = int(tab[a + 1] - tab[a]) if b - a > 1 else 0
                    subs.append((int(tab[a]), step))
                else:
                    subs.append(None)
            out.append((a, b - a, subs))
        return out

    def loop(self, fn, loop: Loop):
        d = loop.depth
        if loop.kind == "if":
            calls = " ".join(f"f{g}(PASS);" for g in loop.fns)
            return [f"  if (v_any({self.ref(loop.cond_pre, fn)})) {{ it[{d}] = it[{d - 1}]; {calls} }}"]
        out = ["  {"]
        for ph, r in zip(loop.phis, loop.init):
            out.append(f"    ws[{self.slot[ph]}] = {self.ref(r, fn)};")
        calls = " ".join(f"f{g}(PASS);" for g in loop.fns)
        tmp_decl = f"    vd tmp[{max(1, len(loop.phis))}];"
        upd = [f"      tmp[{k}] = {self.ref(r, fn)};" for k, r in enumerate(loop.nxt)]
        upd += [f"      ws[{self.slot[ph]}] = tmp[{k}];" for k, ph in enumerate(loop.phis)]
        out.append(tmp_decl)
        if loop.kind == "scan":
            L = loop.length
            idx = f"{L - 1} - i" if getattr(loop, "reverse", False) else "i"
            out.append(f"    for (long i = 0; i < {L}; i++) {{")
            out.append(f"      it[{d}] = {idx};")
            out.append(f"      {calls}")
            out.extend(upd)
            out.append("    }")
        else:
            act = self.slot[loop.active]
            out.append(f"    ws[{act}] = {self.ref(loop.cond_pre, fn)};")
            out.append(f"    for (long i = 0; v_any(ws[{act}]); i++) {{")
            out.append(f"      it[{d}] = i;")
            out.append(f"      {calls}")
            out.append(f"      vd c = {self.ref(loop.cond_ref, fn)};")
            out.extend(upd)
            out.append(f"      ws[{act}] = c;")
            out.append("    }")
        out.append("  }")
        return out


def _even_rows(segments):
    """``segments`` (:meth:`_Emitter.segments`) in groups of consecutive runs
    of one length whose index-table operands keep their step and advance
    their first index by the same amount from run to run: each group is the
    rows of a two-level affine loop (one run: a plain loop)."""
    groups = []
    for seg in segments:
        g = groups[-1] if groups else None
        if g and seg[1] == g[0][1] and (len(g) == 1 or _advance(g[-1], seg) == _advance(g[0], g[1])) \
                and all(a is None or a[1] == b[1] for a, b in zip(g[-1][2], seg[2])):
            g.append(seg)
        else:
            groups.append([seg])
    return groups


def _advance(a, b):
    """Per operand, how far the first index moves from run ``a`` to run ``b``."""
    return tuple(None if x is None else y[0] - x[0] for x, y in zip(a[2], b[2]))


_PURE_SOURCES = ("in", "shared_in", "itaff", "xtab", "xarena")
SPLIT = "/*@@ translation unit @@*/"     # the source is compiled in parts (sweep.codegen.build)
PARTS = 8


def _uses(st):
    """The value ids a statement reads (a loop: also those read in its body)."""
    i, op, args = st
    if op == "loop":
        out = list(args.init) + list(args.nxt) + [args.cond_pre, args.cond_ref]
        for b in args.body:
            out.extend(_uses(b))
        return [a for a in out if isinstance(a, int) and 0 <= a < BUF]
    if op in _PURE_SOURCES or op == "areduce":
        return []
    if op == "aloop":
        return [v for k, v in args[3] if k == "s"]
    if op == "ystore":
        return [args[3]] if isinstance(args[3], int) and args[3] < BUF else []
    if op == "store":
        return [args[1]] if isinstance(args[1], int) and args[1] < BUF else []
    return [a for a in args if isinstance(a, int) and 0 <= a < BUF]


def schedule(scope, roots=()):
    """Reorder a scope's pure statements depth-first from where they are
    needed (each just before its first consumer), so that a value lives
    briefly and mostly inside one function (a register, not a workspace
    slot); statements with effects (loops, stores, reads after a loop)
    keep their order. Recurses into loop bodies."""
    pos = {}
    for k, (i, op, args) in enumerate(scope):
        if i is not None and op not in ("mov", "areduce"):
            pos[i] = k
    done = set()
    out = []

    def need(r):
        stack = [(r, False)]
        while stack:
            x, expanded = stack.pop()
            if x not in pos or x in done:
                continue
            st = scope[pos[x]]
            if expanded:
                done.add(x)
                out.append(st)
                continue
            stack.append((x, True))
            for a in reversed(_uses(st)):
                if a in pos and a not in done:
                    stack.append((a, False))

    for st in scope:
        i, op, args = st
        if i is not None and i in pos:
            continue
        for a in _uses(st):
            need(a)
        if op == "loop":
            schedule(args.body, list(args.nxt) + [args.cond_ref])
        out.append(st)
    for r in roots:
        if isinstance(r, int):
            need(r)
    for st in scope:                  # anything left (not needed: kept in its order)
        if st[0] is not None and st[0] in pos and st[0] not in done:
            out.append(st)
    scope[:] = out


def to_c(prog, out_refs, W, chunk, selects=None):
    """(C source, workspace slots, statements) of ``prog`` whose outputs
    are ``out_refs`` (one per output element). ``selects``: arena arrays
    computed in the copy to the outputs instead of an arena loop
    (:func:`sweep.codegen.emit.fuse_output_passes`)."""
    selects = selects or {}
    sel_ids = [v for sel in selects.values() for kd, v in sel[1] if kd == "s"]
    refs = int_refs(list(out_refs))
    scalar_refs = refs[(refs >= 0) & (refs < BUF)].tolist() + sel_ids     # the arena's need no scheduling
    schedule(prog.scopes[0], scalar_refs)
    em = _Emitter(prog, W, chunk)
    top = em.plan(prog.scopes[0])
    out_fn = -1                       # the entry function
    em.time += 1
    for r in scalar_refs:
        em.use(r, out_fn, ())
    n_slots = em.assign_slots(out_fn)
    depth_of_fn = {}

    def mark(fns, depth, scope_statements):
        for g in fns:
            depth_of_fn[g] = depth
        for st in scope_statements:
            if st[1] == "loop":
                mark(st[2].fns, st[2].depth, st[2].body)
    mark(top, 0, prog.scopes[0])
    # the functions in PARTS pieces of about equal size (compiled in parallel)
    bodies = [f"FN f{g}(ARGS) {{\n" + "\n".join(em.body(g, st, depth_of_fn[g])) + "\n}"
              for g, st in enumerate(em.functions)]
    parts = [PRELUDE % {"W": W}]
    # the tables: declared in the prelude every part sees, defined once in the
    # entry's part (each part parsed its own copy before: most of gcc's time
    # for a long manoeuvre)
    tables = []
    for t, tab in enumerate(prog.const_tables):
        flat = np.asarray(tab, np.float64).reshape(-1)
        vals = ", ".join(map(repr, flat.tolist())) if np.isfinite(flat).all() else ", ".join(
            repr(float(x)) if np.isfinite(x) else ("NAN" if np.isnan(x) else ("INFINITY" if x > 0 else "-INFINITY"))
            for x in flat)
        parts.append(f"extern const double tab{t}[];")
        tables.append(f"const double tab{t}[] = {{{vals}}};")
    for t in sorted(em.used_itabs):
        parts.append(f"extern const long itab{t}[];")
        tables.append(f"const long itab{t}[] = {{{', '.join(map(str, np.asarray(prog.index_tables[t], np.int64).tolist()))}}};")
    for g in range(len(em.functions)):
        parts.append(f"FN f{g}(ARGS);")
    total = sum(map(len, bodies))
    size = 0
    parts.append(SPLIT)
    for b in bodies:
        if size >= total / PARTS and size:
            parts.append(SPLIT)
            size = 0
        parts.append(b)
        size += len(b)
    parts.append(SPLIT)
    # run(): the inputs batch-minor (n_in vectors of W variants), the shared
    # inputs ``sh`` (one double each, the same for every variant), the outputs
    # variant-major: the W rows of the caller's (variants, n_out) result, each
    # n_out long (no transposition left to do after the call)
    n = len(out_refs)
    lines = tables + ["void run(const double *in_, double *out_, double *ws_, double *ar_, const double *sh) {",
             "  const vd *in = (const vd *)in_; vd *ws = (vd *)ws_; vd *ar = (vd *)ar_; vd *out = 0;",
             "  long it[32] = {0};",
             f"#define PUT(k, v) do {{ vd v_ = (v); for (int l = 0; l < W; l++) out_[(long)l * {n} + (k)] = v_[l]; }} while (0)"]
    lines.append("  " + " ".join(f"f{g}(PASS);" for g in top))
    # outputs: runs of consecutive arena elements are copied in loops
    k = 0
    while k < n:
        r = out_refs[k]
        if not isinstance(r, float) and r in selects:     # e.g. where(ok, x, nan): computed as copied
            name, operands, m, kind = selects[r]
            segments = em.segments(operands, m) or [(0, m, [None] * len(operands))]
            for s0, ln, subs in segments:
                rhs = em.arena_rhs(name, kind, [em.arena_ex(o, out_fn, s0, sub) for o, sub in zip(operands, subs)])
                lines.append(f"  for (long e = 0; e < {ln}; e++) PUT({k + s0} + e, {rhs});")
            k += m
            continue
        if not isinstance(r, float) and r >= BUF:
            j = k
            while j + 1 < n and not isinstance(out_refs[j + 1], float) and out_refs[j + 1] == out_refs[j] + 1:
                j += 1
            if j > k:
                lines.append(f"  for (long e = 0; e < {j - k + 1}; e++) PUT({k} + e, ar[{r - BUF} + e]);")
                k = j + 1
                continue
        lines.append(f"  PUT({k}, {em.ref(r, out_fn)});")
        k += 1
    lines.append("#undef PUT")
    lines.append("}")
    parts.append("\n".join(lines))
    return "\n".join(parts) + "\n", n_slots, em.n_statements
