"""The generated backend's choice of compiler: C (gcc, ctypes) against numba.

Both compile the same scalar program (``sweep.codegen.emit``: the jaxpr of
the time-response kind's integration stage, LSRT2, h = 1 ms, longitudinal
step from 4.9 s), so the comparison is of the compilers and code shapes,
not of two implementations:

* C: what ``integrator.backend=generated`` runs (``sweep.codegen.build``):
  every scalar a GCC vector of W = 4 variants, gcc -O2, groups of 4
  variants on one thread per core;
* numba: the same statements written as Python (one scalar per variant: numba
  has no vector type), each function of the program ``@njit``-compiled,
  variants over threads with ``prange``. numba is not a dependency of the
  project: ``pip install --target DIR numba`` and pass ``--numba-path DIR``.

Prints and writes (benchmarks/results/numba_backend_<axle>.json): build
times (C: gcc; numba: LLVM through numba), variant-steps/s of both over
``--n`` variants, and their largest relative difference.

Usage: python benchmarks/numba_backend.py [--axle toy_trailing_arm] [--n 256] [--steps 200] [--numba-path DIR]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import tempfile
import time

import jax

jax.config.update("jax_enable_x64", True)
import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from sweep.codegen import csource  # noqa: E402
from sweep.codegen.ir import BUF  # noqa: E402

_PRELUDE = '''
import math
import numpy as np
from numba import njit, prange

@njit(inline="always", cache=False)
def v_max(x, y): return x if (x > y or x != x) else y
@njit(inline="always")
def v_min(x, y): return x if (x < y or x != x) else y
@njit(inline="always")
def v_sign(x): return 1.0 if x > 0 else (-1.0 if x < 0 else x)
@njit(inline="always")
def v_isfin(x): return 1.0 if math.isfinite(x) else 0.0
@njit(inline="always")
def v_lnot(x): return 0.0 if x != 0 else 1.0
@njit(inline="always")
def v_nz(x): return 1.0 if x != 0 else 0.0
@njit(inline="always")
def v_lt(x, y): return 1.0 if x < y else 0.0
@njit(inline="always")
def v_le(x, y): return 1.0 if x <= y else 0.0
@njit(inline="always")
def v_gt(x, y): return 1.0 if x > y else 0.0
@njit(inline="always")
def v_ge(x, y): return 1.0 if x >= y else 0.0
@njit(inline="always")
def v_eq(x, y): return 1.0 if x == y else 0.0
@njit(inline="always")
def v_ne(x, y): return 1.0 if x != y else 0.0
@njit(inline="always")
def v_land(x, y): return 1.0 if (x != 0 and y != 0) else 0.0
@njit(inline="always")
def v_lor(x, y): return 1.0 if (x != 0 or y != 0) else 0.0
@njit(inline="always")
def v_idiv(x, y): return float(math.trunc(x / y))
@njit(inline="always")
def v_rem(x, y): return math.fmod(x, y)
@njit(inline="always")
def v_square(x): return x * x
@njit(inline="always")
def v_rsqrt(x): return 1.0 / math.sqrt(x)
@njit(inline="always")
def v_logistic(x): return 1.0 / (1.0 + math.exp(-x))
@njit(inline="always")
def v_trunc(x): return float(math.trunc(x))
@njit(inline="always")
def v_round_(x): return math.copysign(math.floor(abs(x) + 0.5), x)
'''
_MATH = {"sin", "cos", "tan", "tanh", "asin", "acos", "atan", "sinh", "cosh", "sqrt", "exp", "log", "log1p",
         "expm1", "fabs", "floor", "ceil", "atan2", "pow", "erf", "cbrt", "exp2"}


class _PyEmitter(csource._Emitter):
    """csource's planner (functions, workspace slots), writing Python for
    numba: one scalar per variant (W = 1)."""

    def ref(self, r, fn):
        if isinstance(r, float):
            return "np.nan" if math.isnan(r) else ("np.inf" if r == math.inf else ("-np.inf" if r == -math.inf
                                                                                  else repr(r)))
        if r >= BUF:
            return f"ar[{r - BUF}]"
        if self.fn_of.get(r) == fn:
            return f"v{r}"
        return f"ws[{self.slot[r]}]"

    def expr(self, op, args, fn, kind):
        a = [self.ref(x, fn) for x in args] if op not in ("in", "itaff", "xtab", "xarena", "areduce") else args
        d = self.cur_depth
        if op == "in":
            return f"inp[{int(args[0])}]"
        if op == "itaff":
            return f"({args[0]!r} + {args[1]!r} * it[{d}])"
        if op == "xtab":
            t, n, k = map(int, args)
            return f"tab{t}[it[{d}] * {n} + {k}]"
        if op == "xarena":
            s, n, k = map(int, args)
            return f"ar[{s} + it[{d}] * {n} + {k}]"
        if op in ("add", "sub", "mul"):
            return f"{a[0]} {dict(add='+', sub='-', mul='*')[op]} {a[1]}"
        if op == "div":
            return f"v_idiv({a[0]}, {a[1]})" if kind == "i" else f"{a[0]} / {a[1]}"
        if op == "mov":
            return a[0]
        if op == "sel":
            return f"({a[2]} if {a[0]} != 0 else {a[1]})"
        if op in _MATH:
            name = {"fabs": "fabs"}.get(op, op)
            if op == "exp2":
                return f"2.0 ** {a[0]}"
            if op == "cbrt":
                return f"math.copysign(abs({a[0]}) ** (1.0 / 3.0), {a[0]})"
            if op == "pow":
                return f"{a[0]} ** {a[1]}"
            return f"math.{name}({', '.join(a)})"
        return f"v_{op}({', '.join(a)})"

    def arena_ex(self, o, fn):
        kd, v = o
        if kd == "c":
            return self.ref(float(v), fn)
        if kd == "s":
            return self.ref(v, fn)
        if kd == "a":
            return f"ar[{v - BUF} + e]"
        return f"ar[itab{v}[e]]"

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
                lines.append(f"    ar[{base} + it[{depth}] * {n} + {k}] = {self.ref(a, fn)}")
                continue
            if op == "store":
                lines.append(f"    ar[{args[0] - BUF}] = {self.ref(args[1], fn)}")
                continue
            if op == "aloop":
                name, base, n, operands, kind = args
                ex = [self.arena_ex(o, fn) for o in operands]
                if name in ("add", "sub", "mul", "div") and kind != "i":
                    rhs = f" {dict(add='+', sub='-', mul='*', div='/')[name]} ".join(ex)
                elif name == "neg":
                    rhs = f"-{ex[0]}"
                elif name == "sel":
                    rhs = f"({ex[2]} if {ex[0]} != 0 else {ex[1]})"
                else:
                    rhs = f"v_{name}({', '.join(ex)})"
                lines.append(f"    for e in range({n}):")
                lines.append(f"        ar[{base - BUF} + e] = {rhs}")
                continue
            kind = self.p.dtype_of.get(i, "f")
            if op == "areduce":
                name, opnd, n = args
                comb = {"add": "acc + x", "mul": "acc * x"}.get(name, f"v_{name}(acc, x)")
                lines.append("    e = 0")
                lines.append(f"    acc = {self.arena_ex(opnd, fn)}")
                lines.append(f"    for e in range(1, {n}):")
                lines.append(f"        x = {self.arena_ex(opnd, fn)}")
                lines.append(f"        acc = {comb}")
                lines.append(f"    v{i} = acc")
            else:
                lines.append(f"    v{i} = {self.expr(op, args, fn, kind)}")
            if i in self.slot:
                lines.append(f"    ws[{self.slot[i]}] = v{i}")
        return lines or ["    pass"]

    def loop(self, fn, loop):
        d = loop.depth
        calls = [f"f{g}(ws, ar, inp, out, it, tmp)" for g in loop.fns]
        if loop.kind == "if":
            out = [f"    if {self.ref(loop.cond_pre, fn)} != 0:", f"        it[{d}] = it[{d - 1}]"]
            return out + [f"        {c}" for c in calls]
        out = [f"    ws[{self.slot[ph]}] = {self.ref(r, fn)}" for ph, r in zip(loop.phis, loop.init)]
        upd = [f"        tmp[{k}] = {self.ref(r, fn)}" for k, r in enumerate(loop.nxt)]
        upd += [f"        ws[{self.slot[ph]}] = tmp[{k}]" for k, ph in enumerate(loop.phis)]
        self.max_tmp = max(getattr(self, "max_tmp", 1), len(loop.phis))
        if loop.kind == "scan":
            L = loop.length
            idx = f"{L - 1} - i" if getattr(loop, "reverse", False) else "i"
            out.append(f"    for i in range({L}):")
            out.append(f"        it[{d}] = {idx}")
            out += [f"        {c}" for c in calls] + upd
        else:
            act = self.slot[loop.active]
            out.append(f"    ws[{act}] = {self.ref(loop.cond_pre, fn)}")
            out.append(f"    it[{d}] = 0")
            out.append(f"    while ws[{act}] != 0:")
            out += [f"        {c}" for c in calls]
            out.append(f"        it[{d}] += 1")
            out.append(f"        c = {self.ref(loop.cond_ref, fn)}")
            out += upd
            out.append(f"        ws[{act}] = c")
        return out


def to_numba(prog, out_refs, chunk):
    """Python source (for numba) of ``prog``: functions ``f<g>`` and
    ``run_batch(INP, OUT, n_ws, n_ar)`` over variants (prange)."""
    csource.schedule(prog.scopes[0], out_refs)
    em = _PyEmitter(prog, 1, chunk)
    top = em.plan(prog.scopes[0])
    em.time += 1
    for r in out_refs:
        em.use(r, -1, ())
    n_slots = em.assign_slots(-1)
    depth_of_fn = {}

    def mark(fns, depth, scope_statements):
        for g in fns:
            depth_of_fn[g] = depth
        for st in scope_statements:
            if st[1] == "loop":
                mark(st[2].fns, st[2].depth, st[2].body)
    mark(top, 0, prog.scopes[0])
    parts = [_PRELUDE]
    for t, tab in enumerate(prog.const_tables):
        parts.append(f"tab{t} = np.array({np.asarray(tab, np.float64).reshape(-1).tolist()!r})")
    for t, tab in enumerate(prog.index_tables):
        parts.append(f"itab{t} = np.array({[int(x) for x in tab]!r}, dtype=np.int64)")
    bodies = []
    for g, st in enumerate(em.functions):
        bodies.append(f"@njit(cache=False, nogil=True)\ndef f{g}(ws, ar, inp, out, it, tmp):\n"
                      + "\n".join(em.body(g, st, depth_of_fn[g])))
    # callees first: a function is defined before any function that calls it
    order = []
    seen = set()

    def visit(g):
        if g in seen:
            return
        seen.add(g)
        for line in bodies[g].split("\n"):
            s = line.strip()
            if s.startswith("f") and "(ws, ar, inp, out, it, tmp)" in s:
                visit(int(s[1:s.index("(")]))
        order.append(g)
    for g in range(len(bodies)):
        visit(g)
    parts += [bodies[g] for g in order]
    lines = ["@njit(cache=False, nogil=True)", "def run(inp, out, ws, ar):",
             "    it = np.zeros(32, np.int64)", f"    tmp = np.empty({max(getattr(em, 'max_tmp', 1), 1)})"]
    lines += [f"    f{g}(ws, ar, inp, out, it, tmp)" for g in top]
    for k, r in enumerate(out_refs):
        lines.append(f"    out[{k}] = {em.ref(r, -1)}")
    lines += ["", "@njit(parallel=True, cache=False)", "def run_batch(INP, OUT, n_ws, n_ar):",
              "    for v in prange(INP.shape[0]):",
              "        ws = np.empty(max(n_ws, 1))", "        ar = np.empty(max(n_ar, 1))",
              "        run(INP[v], OUT[v], ws, ar)"]
    parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n", n_slots


def program(fn, *example_args):
    """(Program, output refs, output shapes) of a per-variant function, as
    :func:`sweep.codegen.emit.generate` builds them."""
    from sweep.codegen import emit
    closed, out_tree, _ = emit.trace(fn, *example_args)
    prog = emit.Program()
    tr = emit.Translator(prog)
    args, k = [], 0
    for a in jax.tree_util.tree_leaves(example_args):
        a = np.asarray(a)
        ids = [prog.emit("in", (float(k + e),), emit._kind(a.dtype), depth=0) for e in range(a.size)]
        k += a.size
        args.append(emit.Val(np.array(ids, np.int64).reshape(a.shape), np.zeros(a.shape, a.dtype)))
    outs = tr.run(closed.jaxpr, [emit.const_val(np.asarray(c)) for c in closed.consts], args)
    out_refs = [r for o in outs for r in tr.elems(o)]
    prog.prune(out_refs)
    return prog, out_refs, [o.shape for o in outs], out_tree


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--axle", default="toy_trailing_arm")
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--numba-path", default=None, help="a directory numba was installed into (pip --target)")
    args = ap.parse_args()
    if args.numba_path:
        sys.path.insert(0, args.numba_path)
    import numba

    from generated_backend import integration_case
    from sweep.codegen import build, emit

    second, thetas, carries = integration_case(args.axle, args.n, args.steps)
    theta0 = thetas[0]
    carry0 = jax.tree_util.tree_map(lambda a: np.asarray(a)[0], carries)
    res = {"axle": args.axle, "n": args.n, "steps": args.steps, "numba": numba.__version__,
           "machine": os.uname().nodename}

    # C: the generated backend as jobs run it (a fresh build)
    key = emit.trace(second, theta0, carry0)[2]
    for ext in (".pkl", ".so"):
        p = os.path.join(build.cache_dir(), key + ext)
        if os.path.exists(p):
            os.remove(p)
    gen, fn_c, info = build.load_or_build(second, theta0, carry0)
    res["c_generate_s"], res["c_build_s"] = info["generate_s"], info["build_s"]
    kernel = build.Kernel(gen, fn_c)
    kernel(thetas[:8], jax.tree_util.tree_map(lambda a: a[:8], carries))
    t = time.perf_counter()
    got_c = kernel(thetas, carries)
    res["c_s"] = time.perf_counter() - t

    # numba: the same program
    t = time.perf_counter()
    prog, out_refs, out_shapes, out_tree = program(second, theta0, carry0)
    src, n_ws = to_numba(prog, out_refs, emit.CHUNK)
    res["numba_generate_s"] = time.perf_counter() - t
    path = os.path.join(tempfile.mkdtemp(prefix="axle-numba-"), "gen_numba.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location("gen_numba", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    flat_in = np.concatenate([np.asarray(a, np.float64).reshape(args.n, -1)
                              for a in jax.tree_util.tree_leaves((thetas, carries))], axis=1)
    out = np.zeros((args.n, len(out_refs)))
    t = time.perf_counter()
    mod.run_batch(flat_in[:2], out[:2], n_ws, prog.arena)       # compiles every function
    res["numba_build_s"] = time.perf_counter() - t
    t = time.perf_counter()
    mod.run_batch(flat_in, out, n_ws, prog.arena)
    res["numba_s"] = time.perf_counter() - t

    vs = args.n * args.steps
    res["c_variant_steps_per_s"] = vs / res["c_s"]
    res["numba_variant_steps_per_s"] = vs / res["numba_s"]
    flat_c = np.concatenate([np.asarray(a, np.float64).reshape(args.n, -1)
                             for a in jax.tree_util.tree_leaves(got_c)], axis=1)
    scale = np.maximum(np.max(np.abs(flat_c), axis=0), 1e-300)
    res["max_rel_difference"] = float(np.max(np.abs(out - flat_c) / scale))
    res["statements"] = gen.n_statements
    print(json.dumps(res, indent=1))
    os.makedirs(os.path.join(ROOT, "benchmarks", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "benchmarks", "results", f"numba_backend_{args.axle}.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
