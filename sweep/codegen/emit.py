"""Model-specific straight-line C from a JAX function's jaxpr, batch-minor.

What it does: :func:`generate` traces a per-variant function (e.g. the
time-response kind's integration stage: linearisation, block
factorisation, solves, stage update, output channels and status checks,
the whole time loop) to its jaxpr and translates every equation into C in
which each scalar is a vector of ``W`` variants (``vd``, a GCC vector of
W doubles). It is the same physics - the JAX functions - compiled another
way, the way SIMPACK's symbolic code is: one program per model, no generic
loops over element tables, no per-operation dispatch.

How (an abstract interpretation of the jaxpr):

* every array value is an array of *references*, one per element: a
  constant known at generation time, a scalar SSA value (a C local or a
  workspace slot) or an element of a stored array (the ``arena``: scan
  outputs and large element-wise results). Structural primitives
  (slice, reshape, transpose, broadcast, concatenate, gather and scatter
  with constant indices, ...) are applied to the reference arrays
  themselves and cost nothing at run time;
* everything that depends only on constants is evaluated at generation
  time (the model's topology, index arithmetic, the tableau);
* arithmetic becomes one statement per element, simplified (x*0, x*1,
  x+0) and hash-consed (common subexpressions once), placed in the
  outermost loop it can live in (loop-invariant code leaves the time loop:
  what depends only on a variant's parameters is computed once per chunk);
* ``scan`` becomes a C loop (carries in workspace slots, ``ys`` stored in
  the arena); ``while`` a loop that runs while any variant of the vector
  wants another iteration, each variant keeping its own state once done
  (the semantics of ``vmap``); ``cond`` both branches and a per-variant
  select (the semantics of ``vmap``);
* large element-wise operations on stored arrays (the output channels'
  status masks) become loops over the arena.

Semantics kept from XLA: IEEE float64 arithmetic in the same order per
element (sums of products in the order of the contraction), NaN
propagation in max/min/select. Simplifications that differ from XLA only
for non-finite operands: ``0 * x`` is 0 (XLA: NaN for x = inf/NaN) - a
variant that goes non-finite is still flagged through its state, which
carries the NaN. A primitive the generator does not know raises
:class:`Unsupported` naming it.

The C text is built by :func:`generate`; compiling, caching and calling it
is :mod:`sweep.codegen.build`.
"""
from __future__ import annotations

import hashlib
import itertools
import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import ClosedJaxpr, Jaxpr, Literal

from sweep.codegen import npops
from sweep.codegen.csource import to_c
from sweep.codegen.ir import BUF, CONST, Loop, int_refs

LOOP_MIN = 48          # element-wise operations at least this large on stored arrays become loops
CHUNK = 1500           # statements per C function


class Unsupported(NotImplementedError):
    """A jaxpr the generator cannot translate (names the primitive)."""


# ----------------------------------------------------------------------------- values
@dataclass
class Val:
    """An array value: ``ref`` (int64, the element references) and ``cv``
    (the constants where ref == CONST), both of the value's shape."""
    ref: np.ndarray
    cv: np.ndarray

    @property
    def shape(self):
        return self.ref.shape

    @property
    def is_const(self):
        return bool((self.ref == CONST).all())


def const_val(x):
    x = np.asarray(x)
    return Val(np.full(x.shape, CONST, np.int64), x)


# ----------------------------------------------------------------------------- statements
def cse_key(args):
    """A hashable key of statement arguments (ids and arena references as
    ints, constants as floats) that tells a reference from a constant of the
    same number (Python's ``7 == 7.0``, with equal hashes) and constants by
    their bits (``0.0`` from ``-0.0``)."""
    return tuple(("c", a.hex()) if isinstance(a, float) else a for a in args)


class Program:
    """The scalar program: SSA statements ``(id, op, args)`` in nested scopes."""

    def __init__(self):
        self.n_ids = 0
        self.depth_of = {}          # id -> loop depth (0: top level)
        self.dtype_of = {}
        self.scopes = [[]]          # statement lists, innermost last
        self.guards = []            # open branches: (depth of the enclosing loop, depth of the branch)
        self.loops = []             # open Loop objects
        self.cse = [{}]
        self.arena = 0              # arena elements allocated
        self.const_tables = []      # generation-time tables read in loops
        self.index_tables = []      # arena index tables of arena loops
        self.inputs = 0
        self.outputs = []           # (ref or const) per output element

    # ids ------------------------------------------------------------------
    def new_id(self, depth, dtype="f"):
        i = self.n_ids
        self.n_ids += 1
        self.depth_of[i] = depth
        self.dtype_of[i] = dtype
        return i

    def depth(self, r):
        if isinstance(r, float) or r == CONST:
            return 0
        if r >= BUF:
            return 0 if not self.loops else self._buf_depth(r)
        return self.depth_of[r]

    def _buf_depth(self, r):
        # arena elements written inside a loop are only valid after it: reads
        # of them are placed where they occur (the innermost open scope)
        return len(self.loops)

    def emit(self, op, args, dtype="f", depth=None):
        """A statement ``id = op(args)`` (args: ids, arena refs or floats),
        hash-consed and placed in the outermost scope its arguments allow."""
        args = tuple(float(a) if isinstance(a, (float, np.floating)) else int(a) for a in args)
        d = max([self.depth(a) for a in args if not isinstance(a, float)] + [0]) if depth is None else depth
        if depth is None and self.guards:
            # inside a branch: what varies in the enclosing loop stays in the branch
            # (computed only where some variant takes it); what does not leaves it
            loop_depth, branch_depth = self.guards[-1]
            if d >= loop_depth:
                d = max(d, branch_depth)
        key = (op, cse_key(args), dtype)
        for lvl in range(d, -1, -1):          # this scope or an enclosing one
            hit = self.cse[lvl].get(key)
            if hit is not None:
                return hit
        i = self.new_id(d, dtype)
        self.scopes[d].append((i, op, args))
        self.cse[d][key] = i
        return i

    def store(self, target, value):
        """arena[target] = value, in the innermost scope (a side effect)."""
        self.scopes[-1].append((None, "store", (int(target), value)))

    def open_loop(self, loop):
        self.loops.append(loop)
        self.scopes.append(loop.body)
        self.cse.append({})

    def close_loop(self):
        loop = self.loops.pop()
        self.scopes.pop()
        self.cse.pop()
        self.scopes[-1].append((None, "loop", loop))
        return loop

    def prune(self, out_refs):
        """Dead-code elimination: drop the statements and loop carries no
        output depends on (e.g. a carried linearisation that every step
        recomputes). Side effects (arena stores, loops) stay."""
        live = set(r for r in out_refs if isinstance(r, int) and 0 <= r < BUF)

        def mark(args):
            for a in args:
                if isinstance(a, int) and 0 <= a < BUF:
                    live.add(a)

        def sweep(scope):
            for i, op, args in reversed(scope):
                if op == "loop":
                    lp = args
                    if lp.kind == "while":
                        mark([lp.cond_ref, lp.cond_pre, lp.active])
                    elif lp.kind == "if":
                        mark([lp.cond_pre])
                    for ph, a, b in zip(lp.phis, lp.init, lp.nxt):
                        if ph in live:
                            mark([a, b])
                    sweep(lp.body)
                elif op in ("store",):
                    mark([args[1]])
                elif op == "ystore":
                    mark([args[3]])
                elif op == "aloop":
                    mark([v for k, v in args[3] if k == "s"])
                elif i is not None and i in live and op not in ("in", "shared_in", "itaff", "xtab", "xarena", "areduce"):
                    mark(args)
        n = -1
        while n != len(live):
            n = len(live)
            sweep(self.scopes[0])

        def drop(scope):
            kept = []
            for st in scope:
                i, op, args = st
                if op == "loop":
                    lp = args
                    keep = [k for k, ph in enumerate(lp.phis) if ph in live]
                    lp.phis = [lp.phis[k] for k in keep]
                    lp.init = [lp.init[k] for k in keep]
                    lp.nxt = [lp.nxt[k] for k in keep]
                    lp.body[:] = drop(lp.body)
                    kept.append(st)
                elif i is None or i in live:
                    kept.append(st)
            return kept
        self.scopes[0][:] = drop(self.scopes[0])

    def alloc(self, n):
        b = self.arena
        self.arena += int(n)
        return BUF + b


# ----------------------------------------------------------------------------- translation
_STRUCTURAL = {"slice", "squeeze", "broadcast_in_dim", "reshape", "transpose", "concatenate",
               "expand_dims", "rev", "pad", "split", "stack", "copy", "copy_p", "stop_gradient",
               "optimization_barrier"}

_UNARY = {"neg": "neg", "sin": "sin", "cos": "cos", "tan": "tan", "tanh": "tanh", "asin": "asin",
          "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh", "sqrt": "sqrt", "exp": "exp",
          "log": "log", "log1p": "log1p", "expm1": "expm1", "abs": "fabs", "sign": "sign",
          "floor": "floor", "ceil": "ceil", "is_finite": "isfin", "not": "lnot", "logistic": "logistic",
          "square": "square", "rsqrt": "rsqrt", "cbrt": "cbrt", "erf": "erf", "exp2": "exp2",
          "round": "round_"}
_BINARY = {"add": "add", "add_any": "add", "sub": "sub", "mul": "mul", "div": "div", "max": "max",
           "min": "min", "atan2": "atan2", "pow": "pow", "rem": "rem", "lt": "lt", "le": "le",
           "gt": "gt", "ge": "ge", "eq": "eq", "ne": "ne", "and": "land", "or": "lor",
           "nextafter": "nextafter"}


def _kind(dtype):
    dt = np.dtype(dtype)
    return "b" if dt == np.bool_ else ("i" if np.issubdtype(dt, np.integer) else "f")


def _np_unary(op, x):
    import scipy.special as sp
    f = {"neg": np.negative, "sin": np.sin, "cos": np.cos, "tan": np.tan, "tanh": np.tanh, "asin": np.arcsin,
         "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "sqrt": np.sqrt,
         "exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1, "fabs": np.abs,
         "sign": np.sign, "floor": np.floor, "ceil": np.ceil, "isfin": np.isfinite,
         "lnot": np.logical_not, "logistic": sp.expit, "square": np.square,
         "rsqrt": lambda a: 1 / np.sqrt(a), "cbrt": np.cbrt, "erf": sp.erf, "exp2": np.exp2,
         "round_": lambda a: np.sign(a) * np.floor(np.abs(a) + 0.5)}[op]
    with np.errstate(all="ignore"):
        return float(f(np.float64(x)))


def _np_binary(op, a, b, kind):
    with np.errstate(all="ignore"):
        a, b = np.float64(a), np.float64(b)
        if op == "div" and kind == "i":
            return float(np.trunc(a / b))
        if op == "rem":
            return float(np.fmod(a, b))
        f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
             "max": lambda x, y: x if (x > y or np.isnan(x)) else y,
             "min": lambda x, y: x if (x < y or np.isnan(x)) else y,
             "atan2": np.arctan2, "pow": np.power, "lt": np.less, "le": np.less_equal, "gt": np.greater,
             "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal,
             "land": lambda x, y: bool(x) and bool(y), "lor": lambda x, y: bool(x) or bool(y),
             "nextafter": np.nextafter}[op]
        return float(f(a, b))


class Translator:
    def __init__(self, prog: Program):
        self.p = prog

    # scalar helpers ---------------------------------------------------------
    def scalar(self, ref, cv):
        return float(cv) if ref == CONST else int(ref)

    def un(self, op, a, kind="f"):
        if isinstance(a, float):
            return _np_unary(op, a)
        if op == "neg":
            return self.p.emit("mul", (a, -1.0), kind)
        return self.p.emit(op, (a,), "b" if op in ("isfin", "lnot") else kind)

    def bin(self, op, a, b, kind="f"):
        ca, cb = isinstance(a, float), isinstance(b, float)
        if ca and cb:
            return _np_binary(op, a, b, kind)
        out_kind = "b" if op in ("lt", "le", "gt", "ge", "eq", "ne", "land", "lor") else kind
        if op == "add":
            if ca and a == 0.0:
                return b
            if cb and b == 0.0:
                return a
            if ca:
                a, b = b, a
        elif op == "sub":
            if cb and b == 0.0:
                return a
            if ca and a == 0.0:
                return self.p.emit("mul", (b, -1.0), kind)
        elif op == "mul":
            if ca:
                a, b = b, a
                ca, cb = cb, ca
            if cb and b == 0.0 and kind == "f":
                return 0.0
            if cb and b == 1.0:
                return a
        elif op == "div" and cb and b == 1.0:
            return a
        elif op == "land":
            if ca:
                return b if a else 0.0
            if cb:
                return a if b else 0.0
        elif op == "lor":
            if ca:
                return 1.0 if a else b
            if cb:
                return 1.0 if b else a
        if op in ("add", "mul") and not ca and not cb and a > b:
            a, b = b, a                       # commutative: one CSE key (same IEEE result)
        return self.p.emit(op, (a, b), out_kind)

    def select(self, pred, cases, kind="f"):
        """select_n(pred, *cases) for one element."""
        if isinstance(pred, float):
            return cases[int(pred)]
        if all(isinstance(c, float) for c in cases) and len(set(cases)) == 1 and not math.isnan(cases[0]):
            return cases[0]
        if len(set(map(repr, cases))) == 1:
            return cases[0]
        if len(cases) == 2:
            return self.p.emit("sel", (pred, cases[0], cases[1]), kind)
        out = cases[0]
        for k in range(1, len(cases)):
            out = self.p.emit("sel", (self.p.emit("ge", (pred, float(k)), "b"), out, cases[k]), kind)
        return out

    # arrays -----------------------------------------------------------------
    def elems(self, v: Val):
        """Flat list of scalars (ids or floats)."""
        r = v.ref.reshape(-1).tolist()
        if CONST not in r:
            return r
        c = v.cv.reshape(-1).tolist()
        return [float(c[k]) if x == CONST else x for k, x in enumerate(r)]

    def from_elems(self, items, shape, dtype):
        ref = np.empty(len(items), np.int64)
        cv = np.zeros(len(items), dtype=dtype)
        for k, x in enumerate(items):
            if isinstance(x, float):
                ref[k] = CONST
                cv[k] = x
            else:
                ref[k] = x
        return Val(ref.reshape(shape), cv.reshape(shape))

    # the jaxpr ------------------------------------------------------------
    def run(self, jaxpr: Jaxpr, consts, args):
        env = {}

        def read(a):
            if isinstance(a, Literal):
                return const_val(np.asarray(a.val, dtype=a.aval.dtype))
            return env[a]

        for v, c in zip(jaxpr.constvars, consts):
            env[v] = c if isinstance(c, Val) else const_val(np.asarray(c))
        for v, a in zip(jaxpr.invars, args):
            env[v] = a
        for eqn in jaxpr.eqns:
            ins = [read(a) for a in eqn.invars]
            outs = self.eqn(eqn, ins)
            for v, o in zip(eqn.outvars, outs):
                if type(v).__name__ != "DropVar":
                    env[v] = o
        return [read(a) for a in jaxpr.outvars]

    def eqn(self, eqn, ins):
        name = eqn.primitive.name
        avals = [v.aval for v in eqn.outvars]
        if name == "iota":
            a = avals[0]
            shape = tuple(int(d) for d in a.shape)
            ar = np.arange(shape[int(eqn.params["dimension"])], dtype=a.dtype)
            tmp = [1] * len(shape)
            tmp[int(eqn.params["dimension"])] = shape[int(eqn.params["dimension"])]
            return [const_val(np.broadcast_to(ar.reshape(tmp), shape).copy())]
        if all(v.is_const for v in ins) and name in ("sort", "argsort", "cumlogsumexp", "top_k",
                                                     "erf_inv", "lgamma", "digamma", "igamma"):
            outs = eqn.primitive.bind(*[jnp.asarray(v.cv) for v in ins], **eqn.params)
            outs = outs if eqn.primitive.multiple_results else [outs]
            return [const_val(np.asarray(o)) for o in outs]
        if name in ("jit", "pjit", "closed_call", "core_call", "remat", "checkpoint", "custom_jvp_call",
                    "custom_vjp_call", "custom_vjp_call_jaxpr"):
            sub = eqn.params.get("jaxpr") or eqn.params.get("call_jaxpr") or eqn.params.get("fun_jaxpr")
            if isinstance(sub, ClosedJaxpr):
                return self.run(sub.jaxpr, [const_val(np.asarray(c)) for c in sub.consts], ins)
            return self.run(sub, [], ins)
        if name in _STRUCTURAL:
            return self.structural(eqn, ins)
        if name == "convert_element_type":
            return [self.convert(ins[0], eqn.params["new_dtype"])]
        if name in _UNARY or name in _BINARY or name in ("select_n", "integer_pow", "clamp"):
            return [self.elementwise(name, eqn, ins, avals[0])]
        if name in ("reduce_sum", "reduce_max", "reduce_min", "reduce_and", "reduce_or", "reduce_prod",
                    "argmax", "argmin"):
            return [self.reduce(name, eqn, ins[0], avals[0])]
        if name == "dot_general":
            return [self.dot_general(eqn, ins, avals[0])]
        if name in ("gather", "dynamic_slice", "dynamic_update_slice", "scatter", "scatter-add",
                    "scatter_add", "scatter-mul", "scatter_mul", "scatter-min", "scatter-max"):
            return self.indexed(name, eqn, ins, avals)
        if name in ("cumsum", "cumprod", "cummax", "cummin"):
            return [self.cumulative(name, eqn, ins[0], avals[0])]
        if name == "scan":
            return self.scan(eqn, ins)
        if name == "while":
            return self.while_loop(eqn, ins)
        if name == "cond":
            return self.cond(eqn, ins)
        if name == "sort":
            return self.sort(eqn, ins)
        raise Unsupported(f"primitive {name!r} is not supported by the generated backend")

    # structural -----------------------------------------------------------
    def structural(self, eqn, ins):
        name, params = eqn.primitive.name, dict(eqn.params)
        if name in ("copy", "copy_p", "stop_gradient", "optimization_barrier"):
            return list(ins)
        if name == "pad":
            x, pv = ins
            if not pv.is_const:
                raise Unsupported("pad with a variable padding value")
            return [Val(npops.pad(x.ref, CONST, **params), npops.pad(x.cv, pv.cv, **params))]
        f = npops.STRUCTURAL[name]
        r = f(*[v.ref for v in ins], **params)
        c = f(*[v.cv for v in ins], **params)
        if eqn.primitive.multiple_results:
            return [Val(a, b) for a, b in zip(r, c)]
        return [Val(r, c)]

    def convert(self, x: Val, dtype):
        k_to, k_from = _kind(dtype), _kind(x.cv.dtype)
        cv = x.cv.astype(dtype)
        if k_to == k_from or (k_to == "f") or x.is_const:
            if x.is_const:
                with np.errstate(all="ignore"):
                    return Val(x.ref.copy(), np.asarray(x.cv).astype(dtype))
            return Val(x.ref.copy(), cv)
        op = "trunc" if k_to == "i" else "nz"
        items = [a if isinstance(a, float) else self.p.emit(op, (a,), k_to) for a in self.elems(x)]
        return self.from_elems([float(np.asarray(a).astype(dtype)) if isinstance(a, float) else a
                                for a in items], x.shape, np.dtype(dtype))

    # element-wise ---------------------------------------------------------
    def elementwise(self, name, eqn, ins, aval):
        shape, kind = aval.shape, _kind(aval.dtype)
        ins = [Val(np.broadcast_to(v.ref, shape), np.broadcast_to(v.cv, shape)) if v.shape != shape else v
               for v in ins]
        n = int(np.prod(shape, dtype=np.int64))
        big = n >= LOOP_MIN and any(((v.ref >= BUF).any()) for v in ins) and len(self.p.loops) == 0
        if big:
            looped = self.loop_elementwise(name, eqn, ins, aval)
            if looped is not None:
                return looped
        cols = [self.elems(v) for v in ins]
        in_kind = _kind(ins[-1].cv.dtype) if ins else kind
        out = []
        for k in range(n):
            xs = [c[k] for c in cols]
            out.append(self.scalar_op(name, eqn.params, xs, kind, in_kind))
        return self.from_elems(out, shape, aval.dtype)

    def scalar_op(self, name, params, xs, kind, in_kind):
        if name in _UNARY:
            return self.un(_UNARY[name], xs[0], kind)
        if name in _BINARY:
            op = _BINARY[name]
            if op in ("land", "lor") and in_kind == "i":
                raise Unsupported(f"bitwise {name!r} on integers")
            return self.bin(op, xs[0], xs[1], in_kind if op in ("div", "rem") else kind)
        if name == "select_n":
            return self.select(xs[0], xs[1:], kind)
        if name == "integer_pow":
            y = int(params["y"])
            x = xs[0]
            if y == 0:
                return 1.0
            acc = None
            base = x
            e = abs(y)
            while e:                    # XLA: binary exponentiation
                if e & 1:
                    acc = base if acc is None else self.bin("mul", acc, base)
                e >>= 1
                if e:
                    base = self.bin("mul", base, base)
            return self.bin("div", 1.0, acc) if y < 0 else acc
        if name == "clamp":
            lo, x, hi = xs
            return self.bin("min", self.bin("max", x, lo), hi)
        raise Unsupported(name)

    def arena_operand(self, v: Val):
        """An operand of an arena loop: ('c', constant), ('s', id) (the same
        scalar for every element), ('a', first arena index) (consecutive
        elements) or ('t', table) (a static table of arena indices); the
        elements that are not in the arena are stored there first."""
        r = v.ref.reshape(-1)
        c = v.cv.reshape(-1)
        if (r == CONST).all() and ((c == c[0]).all() or np.isnan(c.astype(np.float64)).all()):
            return ("c", float(c[0]))
        if (r == r[0]).all() and r[0] != CONST:
            return ("s", int(r[0]))
        if (r >= BUF).all() and (np.diff(r) == 1).all():
            return ("a", int(r[0]))
        pos = r.copy()
        loose = np.nonzero(r < BUF)[0]
        base = self.p.alloc(len(loose))
        for j, e in enumerate(loose):
            self.p.store(base + j, float(c[e]) if r[e] == CONST else int(r[e]))
            pos[e] = base + j
        if (np.diff(pos) == 1).all():
            return ("a", int(pos[0]))
        self.p.index_tables.append(pos - BUF)
        return ("t", len(self.p.index_tables) - 1)

    def loop_elementwise(self, name, eqn, ins, aval):
        """A large element-wise operation on stored arrays as one loop over
        the arena (None: not an operation the loop form knows)."""
        if name not in _UNARY and name not in _BINARY and not (name == "select_n" and len(ins) == 3):
            return None
        n = int(np.prod(aval.shape, dtype=np.int64))
        operands = tuple(self.arena_operand(v) for v in ins)
        base = self.p.alloc(n)
        kind = _kind(aval.dtype)
        in_kind = _kind(ins[-1].cv.dtype)
        op = _UNARY.get(name) or _BINARY.get(name) or "sel"
        self.p.scopes[-1].append((None, "aloop", (op, base, n, operands, in_kind if op in ("div", "rem") else kind)))
        return Val(np.arange(base, base + n, dtype=np.int64).reshape(aval.shape),
                   np.zeros(aval.shape, aval.dtype))

    def reduce(self, name, eqn, x: Val, aval):
        axes = tuple(eqn.params["axes"])
        keep = [d for d in range(x.ref.ndim) if d not in axes]
        ref = np.transpose(x.ref, keep + list(axes)).reshape(int(np.prod(aval.shape, dtype=np.int64)), -1)
        cv = np.transpose(x.cv, keep + list(axes)).reshape(ref.shape)
        kind = _kind(aval.dtype)
        if name in ("argmax", "argmin"):
            return self.arg_extreme(name, ref, cv, aval)
        op = {"reduce_sum": "add", "reduce_max": "max", "reduce_min": "min", "reduce_and": "land",
              "reduce_or": "lor", "reduce_prod": "mul"}.get(name)
        if op is None:
            raise Unsupported(f"primitive {name!r}")
        out = []
        for row_r, row_c in zip(ref, cv):
            if len(row_r) >= LOOP_MIN and (row_r >= BUF).any():
                opnd = self.arena_operand(Val(row_r, row_c))
                if opnd[0] in ("a", "t"):
                    out.append(self.arena_reduce(op, opnd, len(row_r), kind))
                    continue
            items = [float(c) if r == CONST else int(r) for r, c in zip(row_r, row_c)]
            acc = items[0] if items else {"add": 0.0, "mul": 1.0, "max": -np.inf, "min": np.inf,
                                         "land": 1.0, "lor": 0.0}[op]
            for it in items[1:]:
                acc = self.bin(op, acc, it, kind)
            out.append(acc)
        return self.from_elems(out, aval.shape, aval.dtype)

    def arg_extreme(self, name, ref, cv, aval):
        """argmax / argmin over the rows of ``ref`` as a chain of selects, with
        XLA's semantics: the first NaN's index if there is one, else the
        first index of the extreme value (ties keep the earlier index)."""
        cmp = "gt" if name == "argmax" else "lt"
        kx, ki = _kind(cv.dtype), _kind(aval.dtype)
        out = []
        for row_r, row_c in zip(ref, cv):
            items = [float(c) if r == CONST else int(r) for r, c in zip(row_r, row_c)]
            best, idx = items[0], 0.0
            for j, it in enumerate(items[1:], 1):
                nan_it = self.bin("ne", it, it, kx)
                nan_best = self.bin("ne", best, best, kx)
                better = self.bin("lor", self.bin(cmp, it, best, kx), nan_it, "b")
                take = self.bin("land", self.un("lnot", nan_best, "b"), better, "b")
                idx = self.select(take, [idx, float(j)], ki)
                best = self.select(take, [best, it], kx)
            out.append(idx)
        return self.from_elems(out, aval.shape, aval.dtype)

    def arena_reduce(self, op, opnd, n, kind):
        i = self.p.new_id(len(self.p.loops), kind)
        self.p.scopes[-1].append((i, "areduce", (op, opnd, n)))
        return i

    def dot_general(self, eqn, ins, aval):
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        x, y = ins
        lf = [d for d in range(x.ref.ndim) if d not in lc and d not in lb]
        rf = [d for d in range(y.ref.ndim) if d not in rc and d not in rb]
        perm_x = list(lb) + lf + list(lc)
        perm_y = list(rb) + rf + list(rc)
        B = int(np.prod([x.shape[d] for d in lb], dtype=np.int64))
        M = int(np.prod([x.shape[d] for d in lf], dtype=np.int64))
        N = int(np.prod([y.shape[d] for d in rf], dtype=np.int64))
        K = int(np.prod([x.shape[d] for d in lc], dtype=np.int64))
        xr = np.transpose(x.ref, perm_x).reshape(B, M, K)
        xc = np.transpose(x.cv, perm_x).reshape(B, M, K)
        yr = np.transpose(y.ref, perm_y).reshape(B, N, K)
        yc = np.transpose(y.cv, perm_y).reshape(B, N, K)
        out = []
        kind = _kind(aval.dtype)
        for b in range(B):
            for i in range(M):
                xi = [float(c) if r == CONST else int(r) for r, c in zip(xr[b, i], xc[b, i])]
                for j in range(N):
                    acc = 0.0
                    for k in range(K):
                        yk = float(yc[b, j, k]) if yr[b, j, k] == CONST else int(yr[b, j, k])
                        acc = self.bin("add", acc, self.bin("mul", xi[k], yk, kind), kind)
                    out.append(acc)
        return self.from_elems(out, aval.shape, aval.dtype)

    def cumulative(self, name, eqn, x, aval):
        axis, reverse = eqn.params["axis"], eqn.params["reverse"]
        op = {"cumsum": "add", "cumprod": "mul", "cummax": "max", "cummin": "min"}[name]
        ref = np.moveaxis(x.ref, axis, -1)
        cv = np.moveaxis(x.cv, axis, -1)
        out_r, out_c = ref.copy(), cv.copy()
        kind = _kind(aval.dtype)
        for idx in np.ndindex(ref.shape[:-1]):
            n = ref.shape[-1]
            order = range(n - 1, -1, -1) if reverse else range(n)
            acc = None
            for k in order:
                it = float(cv[idx + (k,)]) if ref[idx + (k,)] == CONST else int(ref[idx + (k,)])
                acc = it if acc is None else self.bin(op, acc, it, kind)
                if isinstance(acc, float):
                    out_r[idx + (k,)], out_c[idx + (k,)] = CONST, acc
                else:
                    out_r[idx + (k,)] = acc
        return Val(np.moveaxis(out_r, -1, axis), np.moveaxis(out_c, -1, axis))

    # indexing -------------------------------------------------------------
    def indexed(self, name, eqn, ins, avals):
        params = dict(eqn.params)
        if name == "gather":
            x, idx = ins
            if not idx.is_const:
                return [self.dynamic_gather(eqn, x, idx, avals[0])]
            pos = npops.gather_positions(x.shape, idx.cv, **params)
            if (pos < 0).any():
                raise Unsupported("gather out of bounds in FILL_OR_DROP mode")
            return [Val(x.ref.reshape(-1)[pos], x.cv.reshape(-1)[pos])]
        if name in ("dynamic_slice", "dynamic_update_slice"):
            x, *rest = ins
            u = rest.pop(0) if name == "dynamic_update_slice" else None
            size = u.shape if u is not None else tuple(int(d) for d in params["slice_sizes"])
            if not all(s.is_const for s in rest):
                return [self.variable_slice(x, u, rest, size, avals[0])]
            st = [min(max(int(s.cv), 0), n - k) for s, n, k in zip(rest, x.shape, size)]
            sl = tuple(slice(a, a + k) for a, k in zip(st, size))
            if u is None:
                return [Val(x.ref[sl].copy(), x.cv[sl].copy())]
            r, c = x.ref.copy(), x.cv.copy()
            r[sl], c[sl] = u.ref, u.cv
            return [Val(r, c)]
        # scatter / scatter-add with constant indices
        x, idx, upd = ins
        if not idx.is_const:
            raise Unsupported(f"{name} with variable indices")
        tgt = npops.scatter_targets(x.shape, idx.cv, upd.shape, **params).reshape(-1)
        kind = _kind(avals[0].dtype)
        if name == "scatter":
            r, c = x.ref.copy().reshape(-1), x.cv.copy().reshape(-1)
            ur, uc = upd.ref.reshape(-1), upd.cv.reshape(-1)
            for u, t in enumerate(tgt):
                if t >= 0:
                    r[t], c[t] = ur[u], uc[u]
            return [Val(r.reshape(x.shape), c.reshape(x.shape))]
        out = self.elems(x)
        us = self.elems(upd)
        op = {"scatter-add": "add", "scatter_add": "add", "scatter-mul": "mul", "scatter_mul": "mul",
              "scatter-min": "min", "scatter-max": "max"}[name]
        for u, t in enumerate(tgt):               # in the updates' order
            if t >= 0:
                out[t] = self.bin(op, out[t], us[u], kind)
        return [self.from_elems(out, x.shape, avals[0].dtype)]

    def variable_slice(self, x, u, starts, size, aval):
        """dynamic_slice / dynamic_update_slice with per-variant start
        indices: every element a select over the admissible starts (clamped
        into the array, as XLA)."""
        var = [d for d, s in enumerate(starts) if not s.is_const]
        D = [x.shape[d] - size[d] + 1 for d in var]
        if int(np.prod(D)) > 256:
            raise Unsupported(f"dynamic slice with variable starts over {int(np.prod(D))} positions")
        fixed = [min(max(int(s.cv), 0), n - k) if s.is_const else 0 for s, n, k in zip(starts, x.shape, size)]
        kind = _kind(aval.dtype)
        cases = {}
        for combo in itertools.product(*[range(d) for d in D]):
            st = list(fixed)
            for d, v in zip(var, combo):
                st[d] = v
            sl = tuple(slice(a, a + k) for a, k in zip(st, size))
            if u is None:
                cases[combo] = self.elems(Val(x.ref[sl], x.cv[sl]))
            else:
                r, c = x.ref.copy(), x.cv.copy()
                r[sl], c[sl] = u.ref, u.cv
                cases[combo] = self.elems(Val(r, c))
        keys = [self.elems(starts[d])[0] for d in var]

        def nested(e, prefix):
            if len(prefix) == len(var):
                return cases[tuple(prefix)][e]
            items = [nested(e, prefix + [v]) for v in range(D[len(prefix)])]
            return self.select(keys[len(prefix)], items, kind)
        n = len(next(iter(cases.values())))
        return self.from_elems([nested(e, []) for e in range(n)], aval.shape, aval.dtype)

    def dynamic_gather(self, eqn, x, idx, aval):
        """A gather whose indices vary per variant (e.g. a curve's segment
        lookup): every output element as a select over the values it can
        take (one per admissible index value, clamped as XLA's CLIP mode),
        keyed by the index elements it depends on (found by probing the
        gather with unique operand ids)."""
        prim, params = eqn.primitive, dict(eqn.params)
        dn = params["dimension_numbers"]
        mode = str(params["mode"])
        if "FILL" in mode:
            raise Unsupported("gather with variable indices in FILL_OR_DROP mode")
        axes = [int(a) for a in dn.start_index_map]
        k = len(axes)
        if idx.shape[-1] != k:
            raise Unsupported("gather with variable indices whose index vector is not the last axis")
        D = [x.shape[a] - int(params["slice_sizes"][a]) + 1 for a in axes]
        if int(np.prod(D)) > 256:
            raise Unsupported(f"gather with variable indices over {int(np.prod(D))} admissible positions")
        uid = np.arange(x.ref.size, dtype=np.int64).reshape(x.shape)

        def g(operand, ii):
            pos = npops.gather_positions(x.shape, np.asarray(ii).astype(np.int64), **params).reshape(-1)
            return np.asarray(operand).reshape(-1)[pos]
        base = g(uid, np.zeros(idx.shape))
        n_out = base.size
        deps = [[] for _ in range(n_out)]
        for p in range(idx.ref.size):
            probe = np.zeros(idx.ref.size)
            probe[p] = 1
            for e in np.nonzero(g(uid, probe.reshape(idx.shape)) != base)[0]:
                deps[e].append(p)
        combos = list(itertools.product(*[range(d) for d in D]))
        cases = {}
        for combo in combos:
            ii = np.broadcast_to(np.asarray(combo, np.float64), idx.shape)
            cases[combo] = (g(x.ref, ii), g(x.cv, ii))
        idx_items = self.elems(idx)
        kind = _kind(aval.dtype)

        def pick(e, combo):
            r, c = cases[combo]
            return float(c[e]) if r[e] == CONST else int(r[e])

        live = [i for i in range(k) if D[i] > 1]     # index components that can move the slice

        def nested(e, prefix, comp):
            if len(prefix) == k:
                return pick(e, tuple(prefix))
            lvl = len(prefix)
            if D[lvl] == 1:
                return nested(e, prefix + [0], comp)
            items = [nested(e, prefix + [v], comp) for v in range(D[lvl])]
            return self.select(idx_items[comp[lvl]], items, kind)
        out = []
        for e in range(n_out):
            dep = deps[e]
            if not dep:
                out.append(pick(e, combos[0]))
                continue
            comp = {p % k: p for p in dep}
            if sorted(comp) != live or len(dep) != len(live):
                raise Unsupported("gather whose output element depends on an incomplete index vector")
            out.append(nested(e, [], comp))
        return self.from_elems(out, aval.shape, aval.dtype)

    # control flow ---------------------------------------------------------
    def _carry_slots(self, vals, depth):
        """Fresh phi ids for loop-carried values (one per element)."""
        phis = []
        out = []
        for v in vals:
            kind = _kind(v.cv.dtype)
            ids = np.array([self.p.new_id(depth, kind) for _ in range(v.ref.size)], np.int64).reshape(v.shape)
            out.append(Val(ids, np.zeros(v.shape, v.cv.dtype)))
            phis.extend(ids.reshape(-1).tolist())
        return phis, out

    def scan(self, eqn, ins):
        pr = eqn.params
        body: ClosedJaxpr = pr["jaxpr"]
        L, nc, ncar = int(pr["length"]), int(pr["num_consts"]), int(pr["num_carry"])
        reverse = bool(pr["reverse"])
        consts, init, xs = ins[:nc], ins[nc:nc + ncar], ins[nc + ncar:]
        depth = len(self.p.loops) + 1
        phis, carry_vals = self._carry_slots(init, depth)
        init_refs = [a for v in init for a in self.elems(v)]
        loop = Loop("scan", L, depth, phis, init_refs)
        loop.reverse = reverse
        self.p.open_loop(loop)
        x_vals = [self.slice_xs(v, L, reverse) for v in xs]
        outs = self.run(body.jaxpr, [const_val(np.asarray(c)) for c in body.consts], consts + carry_vals + x_vals)
        new_carry, ys = outs[:ncar], outs[ncar:]
        loop.nxt = [a for v in new_carry for a in self.elems(v)]
        y_vals = []
        for y, av in zip(ys, eqn.outvars[ncar:]):
            n = y.ref.size
            base = self.p.alloc(n * L)
            for k, a in enumerate(self.elems(y)):
                self.p.scopes[-1].append((None, "ystore", (base - BUF, n, k, a, reverse, L)))
            y_vals.append(Val(np.arange(base, base + n * L, dtype=np.int64).reshape(av.aval.shape),
                              np.zeros(av.aval.shape, av.aval.dtype)))
        self.p.close_loop()
        return self._after_loop(carry_vals) + y_vals

    def slice_xs(self, v: Val, L, reverse):
        """The per-iteration slice of a scanned-over value."""
        shape = v.shape[1:]
        n = int(np.prod(shape, dtype=np.int64))
        if v.is_const:
            tab = np.asarray(v.cv, np.float64).reshape(L, n)
            # an affine table (an arange): per element start + step * it
            steps = np.diff(tab, axis=0) if L > 1 else np.zeros((0, n))
            t_id = len(self.p.const_tables)
            self.p.const_tables.append(tab)
            items = []
            for k in range(n):
                if L > 1 and np.all(steps[:, k] == steps[0, k]) and float(tab[0, k]).is_integer() \
                        and float(steps[0, k]).is_integer():
                    items.append(self.p.emit("itaff", (float(tab[0, k]), float(steps[0, k])),
                                             _kind(v.cv.dtype), depth=len(self.p.loops)))
                else:
                    items.append(self.p.emit("xtab", (float(t_id), float(n), float(k)), _kind(v.cv.dtype),
                                             depth=len(self.p.loops)))
            return self.from_elems(items, shape, v.cv.dtype)
        r = v.ref.reshape(L, n)
        if (r >= BUF).all() and (np.diff(r.reshape(-1)) == 1).all():
            items = [self.p.emit("xarena", (float(r[0, 0] - BUF), float(n), float(k)), _kind(v.cv.dtype),
                                 depth=len(self.p.loops)) for k in range(n)]
            return self.from_elems(items, shape, v.cv.dtype)
        if L == 1:
            return Val(v.ref[0].copy(), v.cv[0].copy())
        # materialise the array in the arena, before the loop (its elements are
        # defined outside), in the outermost scope its elements allow: an
        # element table read at run time is stored once per call, not in every
        # step of an enclosing time loop; the same array stored at the top
        # level is stored once for every scan over it
        items = self.elems(v)
        loop = self.p.loops.pop()
        scope = self.p.scopes.pop()
        d = max([self.p.depth(a) for a in items if not isinstance(a, float)] + [0])
        key = ("materialised", L, cse_key(items)) if d == 0 else None
        base = self.p.cse[0].get(key) if key else None
        if base is None:
            base = self.p.alloc(L * n)
            for e, a in enumerate(items):
                self.p.scopes[d].append((None, "store", (int(base + e), a)))
            if key:
                self.p.cse[0][key] = base
        self.p.loops.append(loop)
        self.p.scopes.append(scope)
        items = [self.p.emit("xarena", (float(base - BUF), float(n), float(k)), _kind(v.cv.dtype),
                             depth=len(self.p.loops)) for k in range(n)]
        return self.from_elems(items, shape, v.cv.dtype)

    def cond(self, eqn, ins):
        """Each branch in a guarded block that runs when some variant of the
        vector takes it, then a per-variant select of the results (vmap's
        semantics; the variants that do not take a branch ignore it)."""
        pred, *ops = ins
        branches = eqn.params["branches"]
        if pred.is_const:
            b = branches[int(np.clip(int(pred.cv), 0, len(branches) - 1))]
            return self.run(b.jaxpr, [const_val(np.asarray(c)) for c in b.consts], ops)
        p = self.elems(pred)[0]
        loop_depth = max([k + 1 for k, lp in enumerate(self.p.loops) if lp.kind != "if"] + [0])
        results = []
        for k, br in enumerate(branches):
            if len(branches) == 2:
                guard = self.bin("ne" if k else "eq", p, 0.0, "b")
            else:        # the index is clamped (lax.switch): the last branch takes the rest
                guard = self.bin("ge", p, float(k), "b") if k == len(branches) - 1 else \
                    (self.bin("le", p, 0.0, "b") if k == 0 else self.bin("eq", p, float(k), "b"))
            depth = len(self.p.loops) + 1
            lp = Loop("if", 1, depth, [], [])
            lp.cond_pre = guard
            self.p.open_loop(lp)
            self.p.guards.append((loop_depth, depth))
            res = self.run(br.jaxpr, [const_val(np.asarray(c)) for c in br.consts], ops)
            self.p.guards.pop()
            self.p.close_loop()
            outer = len(self.p.loops)
            vals = []
            for v in res:          # the branch's own values, read after its block
                kind = _kind(v.cv.dtype)
                items = [self.p.emit("mov", (a,), kind, depth=outer)
                         if isinstance(a, int) and a < BUF and self.p.depth_of.get(a, 0) >= depth else a
                         for a in self.elems(v)]
                vals.append(self.from_elems(items, v.shape, v.cv.dtype))
            results.append(vals)
        out = []
        for k, av in enumerate(eqn.outvars):
            cols = [self.elems(res[k]) for res in results]
            kind = _kind(av.aval.dtype)
            items = [self.select(p, [c[e] for c in cols], kind) for e in range(len(cols[0]))]
            out.append(self.from_elems(items, av.aval.shape, av.aval.dtype))
        return out

    def while_loop(self, eqn, ins):
        pr = eqn.params
        cj, bj = pr["cond_jaxpr"], pr["body_jaxpr"]
        nc_c, nc_b = int(pr["cond_nconsts"]), int(pr["body_nconsts"])
        c_consts, b_consts, init = ins[:nc_c], ins[nc_c:nc_c + nc_b], ins[nc_c + nc_b:]
        (pre,) = self.run(cj.jaxpr, [const_val(np.asarray(c)) for c in cj.consts], c_consts + init)
        if pre.is_const and not bool(pre.cv):
            return init
        depth = len(self.p.loops) + 1
        phis, carry_vals = self._carry_slots(init, depth)
        init_refs = [a for v in init for a in self.elems(v)]
        loop = Loop("while", 0, depth, phis, init_refs)
        loop.cond_pre = self.elems(pre)[0]
        self.p.open_loop(loop)
        # the per-variant 'still running' flag is itself a carried value (the
        # condition at the start of the iteration): a variant that is done keeps its state
        act_phi = self.p.new_id(depth, "b")
        loop.active = act_phi
        outs = self.run(bj.jaxpr, [const_val(np.asarray(c)) for c in bj.consts], b_consts + carry_vals)
        nxt = []
        for old, new in zip(carry_vals, outs):
            kind = _kind(new.cv.dtype)
            for a, b in zip(self.elems(old), self.elems(new)):
                nxt.append(self.p.emit("sel", (act_phi, a, b), kind) if not (isinstance(a, int) and isinstance(b, int) and a == b) else a)
        # the condition on the new state
        nxt_vals = []
        pos = 0
        for v in carry_vals:
            n = v.ref.size
            nxt_vals.append(self.from_elems(nxt[pos:pos + n], v.shape, v.cv.dtype))
            pos += n
        (cnd,) = self.run(cj.jaxpr, [const_val(np.asarray(c)) for c in cj.consts], c_consts + nxt_vals)
        c_ref = self.elems(cnd)[0]
        loop.nxt = nxt
        loop.cond_ref = self.bin("land", act_phi, c_ref, "b") if not isinstance(c_ref, float) else \
            (act_phi if c_ref else 0.0)
        self.p.close_loop()
        return self._after_loop(carry_vals)

    def _after_loop(self, carry_vals):
        """The final carries as values of the enclosing scope (read from their slots after the loop)."""
        d = len(self.p.loops)
        out = []
        for v in carry_vals:
            kind = _kind(v.cv.dtype)
            ids = [self.p.emit("mov", (a,), kind, depth=d) for a in self.elems(v)]
            out.append(self.from_elems(ids, v.shape, v.cv.dtype))
        return out

    def sort(self, eqn, ins):
        if all(v.is_const for v in ins):
            outs = eqn.primitive.bind(*[jnp.asarray(v.cv) for v in ins], **eqn.params)
            return [const_val(np.asarray(o)) for o in outs]
        raise Unsupported("sort of variable values")


# ----------------------------------------------------------------------------- entry
@dataclass
class Generated:
    """The generated C (``source``) and how to call it: ``n_in`` input and
    ``out_sizes`` / ``out_shapes`` / ``out_dtypes`` output elements per
    variant, ``ws_slots`` and ``arena`` workspace vectors, ``W`` lanes,
    ``key`` (a hash of the source). ``shared``: the positions of the
    arguments that are the same for every variant (read once per call from
    their own buffer, never batched; ``n_shared`` elements): run-time values
    such as the model's, which the code then does not fold in."""
    source: str
    W: int
    n_in: int
    in_shapes: list
    in_dtypes: list
    out_shapes: list
    out_dtypes: list
    ws_slots: int
    arena: int
    n_statements: int
    key: str
    treedef: object = None
    shared: tuple = ()
    n_shared: int = 0


def _generator_version():
    """A hash of the generator's own source (a changed generator is a new key)."""
    import os
    h = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("emit.py", "csource.py", "npops.py", "ir.py"):
        with open(os.path.join(here, name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()


FOLDED = (0.0, 1.0, -1.0)     # shared values a pattern-folded build compiles in (a zero direction, an identity)


def shared_pattern(example_args, shared):
    """The pattern of the shared arguments' values that a ``fold`` build
    compiles in (:func:`generate`): per shared element, ``-1 - j`` where it
    is exactly ``FOLDED[j]`` (signed zeros apart: ``-0.0`` is ``-4``), else
    its own position (read at run time). Values with the same pattern share
    the built code: a changed nonzero rate, load or hardpoint keeps it, a
    value that becomes 0 or +-1 (a bushing direction removed, a frame made
    axis-parallel) is another pattern. (Reading equal values once as well
    was measured on the double wishbone: no gain beyond noise, and a pattern
    that a changed rotational rate of a symmetric bushing would break.)"""
    flat = [np.asarray(a, np.float64).ravel() for i, x in enumerate(example_args) if i in shared
            for a in jax.tree_util.tree_leaves(x)]
    v = np.concatenate(flat) if flat else np.zeros(0)
    code = _folded_codes(v)
    code[code == 0] = np.flatnonzero(code == 0)
    return code


def _folded_codes(v):
    """Per element of ``v`` (any shape): its :func:`shared_pattern` code
    where it is exactly 0, +-1 or -0 (``-1 - j``), else 0."""
    code = np.zeros(np.shape(v), np.int64)
    code[v == 1.0] = -2
    code[v == -1.0] = -3
    zero = v == 0.0
    code[zero & ~np.signbit(v)] = -1
    code[zero & np.signbit(v)] = -4
    return code


def rows_pattern(rows):
    """The pattern a ``rows_fold`` build compiles in (:func:`generate`) for
    per-variant rows (R, N) of run-time values, e.g. a hardpoint design's
    rows ``[theta | values]`` at its nominal and bound variants: per element
    the :func:`shared_pattern` code where every row has the same value among
    0 and +-1 (an absent bushing direction, an identity part of a frame that
    no variant moves), else its own position (read per variant at run
    time). Rows with a NaN (a variant that failed to build) are left out."""
    rows = np.atleast_2d(np.asarray(rows, np.float64))
    rows = rows[np.all(np.isfinite(rows), axis=1)]
    code = np.arange(rows.shape[1], dtype=np.int64)
    if len(rows) == 0:
        return code
    codes = _folded_codes(rows)
    same = np.all(codes == codes[0], axis=0) & (codes[0] < 0)
    code[same] = codes[0][same]
    return code


def rows_agree(rows, code):
    """Whether every row (R, N) has the values a ``rows_fold`` build compiled
    in for ``code`` (:func:`rows_pattern`): a row that does not would give
    wrong numbers in that code."""
    rows = np.atleast_2d(np.asarray(rows, np.float64))
    folded = np.flatnonzero(code < 0)
    return np.all(_folded_codes(rows[:, folded]) == code[folded], axis=1)


def pattern_digest(code):
    """A short digest of :func:`shared_pattern` (part of the build's key)."""
    return hashlib.sha256(np.ascontiguousarray(code).tobytes()).hexdigest()[:24]


def trace(fn, *example_args, W=4, chunk=CHUNK, shared=(), fold=False, rows_fold=None):
    """(closed jaxpr, output tree, key) of ``fn``: the key hashes the jaxpr's
    text, its constants, the lanes, the chunking, the shared arguments'
    positions and the generator's version - what the generated code depends
    on (the build cache's key). ``fold``: the shared values' pattern
    (:func:`shared_pattern`) is compiled in and enters the key; so does
    ``rows_fold`` (:func:`generate`)."""
    from kernels.forces import element_loops
    # element groups as loops (one copy of the element code each); traced as a
    # fresh function, so that no trace JAX cached for ``fn`` without the loops is reused
    with element_loops():
        closed, shapes = jax.make_jaxpr(lambda *a: fn(*a), return_shape=True)(*example_args)
    out_tree = jax.tree_util.tree_structure(shapes)
    pattern = pattern_digest(shared_pattern(example_args, shared)) if fold else ""
    if rows_fold is not None:
        pattern += f" rows={pattern_digest(rows_fold)}"
    key = hashlib.sha256(f"{jaxpr_digest(closed)} W={W} chunk={chunk} shared={tuple(shared)} {pattern}"
                         f"{_generator_version()}".encode())
    return closed, out_tree, key.hexdigest()[:24]


def jaxpr_digest(closed):
    """sha256 of a closed jaxpr: its text and its constants' bytes."""
    h = hashlib.sha256()
    h.update(str(closed.jaxpr).encode())
    for c in closed.consts:
        c = np.asarray(c)
        h.update(f"{c.dtype}{c.shape}".encode())
        h.update(np.ascontiguousarray(c).tobytes())
    return h.hexdigest()


def _arena_reads(prog, refs):
    """How often each arena element is read (an int per element): by single
    element references, arena-loop and reduction operands, the rows of a
    scan over a stored array (``xarena``: element ``k`` of each of the
    enclosing loop's ``length`` rows of ``n``) and the outputs (``refs``:
    :func:`sweep.codegen.ir.int_refs` of them)."""
    n = prog.arena
    diff = np.zeros(n + 1, np.int64)       # ranges, as a difference array
    single = np.zeros(n + 1, np.int64)

    singles = []                           # single references, counted at the end (numpy scalar += is slow)

    def one(r):
        if isinstance(r, (int, np.integer)) and r >= BUF:
            singles.append(r)

    def operand(o, length):
        kd, v = o
        if kd == "a":
            diff[v - BUF] += 1
            diff[v - BUF + length] -= 1
        elif kd == "t":
            np.add.at(single, np.asarray(prog.index_tables[v], np.int64), 1)
        elif kd == "s":
            one(v)

    def walk(scope, length):
        for i, op, args in scope:
            if op == "loop":
                for r in list(args.init) + list(args.nxt) + [args.cond_pre, args.cond_ref]:
                    one(r)
                walk(args.pre, length)
                walk(args.body, args.length)
            elif op == "aloop":
                for o in args[3]:
                    operand(o, args[2])
            elif op == "areduce":
                operand(args[1], args[2])
            elif op == "xarena":
                start, rows = int(args[0]), int(args[1])
                if isinstance(length, int) and length > 0:
                    single[start + int(args[2]): start + rows * length: rows] += 1
                else:                   # not inside a counted loop: everything after its start
                    diff[start] += 1
                    diff[n] -= 1
            elif op == "store":
                one(args[1])
            elif op == "ystore":
                one(args[3])
            elif op not in ("in", "shared_in", "itaff", "xtab"):
                for a in args:
                    one(a)
    walk(prog.scopes[0], 1)
    np.add.at(single, refs[refs >= BUF] - BUF, 1)
    if singles:
        np.add.at(single, np.asarray(singles, np.int64) - BUF, 1)
    return (np.cumsum(diff) + single)[:n]


def fuse_output_passes(prog, out_refs):
    """Remove two whole-array passes over a manoeuvre's outputs (each an
    arena array as long as all outputs, i.e. memory touched per step):

    * ``all(is_finite(x))``: the ``is_finite`` loop's array, read only by the
      reduction, is dropped and the reduction tests ``x`` itself (``allfin``);
    * ``where(ok, x, nan)`` whose result only the outputs read: the select
      moves into the copy to the outputs (returned, keyed by the removed
      array's first arena reference: ``(name, operands, n)`` for
      :func:`sweep.codegen.csource.to_c`).

    Only top-level loops (after the time loop) are fused, and only where the
    array has no other reader, so the values are bitwise those of the
    unfused program."""
    top = prog.scopes[0]
    loops = [(k, st) for k, st in enumerate(top) if st[1] == "aloop" and st[2][0] in ("isfin", "sel")]
    if not loops:
        return {}
    refs = int_refs(out_refs)
    reads = _arena_reads(prog, refs)
    drop, selects = set(), {}
    for k, (_, _, (name, base, n, operands, kind)) in loops:
        lo = base - BUF
        if name == "isfin":
            users = [j for j, st in enumerate(top) if st[1] == "areduce" and st[2][0] == "land"
                     and st[2][1] == ("a", base) and st[2][2] == n]
            if len(users) == 1 and (reads[lo:lo + n] == 1).all():
                j = users[0]
                i, op, (_, _, m) = top[j]
                opnd = operands[0]
                if opnd[0] == "t":
                    # all() does not depend on the order: a gather of the outputs
                    # (their concatenation, transposed channels) is read in arena
                    # order as its few contiguous runs - no index table to compile
                    # (the double wishbone's was 1.7 million entries, 4.5 MB of C)
                    idx = np.sort(np.asarray(prog.index_tables[opnd[1]], np.int64))
                    idx = idx[np.concatenate([[True], np.diff(idx) != 0])]
                    cut = np.nonzero(np.diff(idx) != 1)[0] + 1
                    if len(idx) and len(cut) < 64:
                        starts = np.concatenate([[0], cut])
                        ends = np.concatenate([cut, [len(idx)]])
                        opnd = ("r", tuple((int(idx[a]), int(b - a)) for a, b in zip(starts, ends)))
                        m = len(idx)
                top[j] = (i, op, ("allfin", opnd, m))
                drop.add(k)
        elif name == "sel" and operands[1][0] == "c" and (reads[lo:lo + n] == 1).all():
            at = np.flatnonzero(refs == base)
            first = int(at[0]) if len(at) else None
            if first is not None and first + n <= len(refs) and \
                    (refs[first:first + n] == base + np.arange(n)).all():
                selects[base] = (name, operands, n, kind)
                drop.add(k)
    top[:] = [st for k, st in enumerate(top) if k not in drop]
    return selects


def _input(prog, a, codes, op):
    """The value of an input argument ``a``: per element, a constant where
    its pattern code (:func:`shared_pattern`) is negative (the folded 0,
    +-1 or -0), else a read (``op``: ``in`` per variant, ``shared_in`` from
    the shared buffer) of the position the code names."""
    ids, cv = [], np.zeros(a.size, a.dtype)
    for e, c in enumerate(np.asarray(codes, np.int64).tolist()):
        if c < 0:
            ids.append(CONST)
            cv[e] = (0.0, 1.0, -1.0, -0.0)[-1 - c]
        else:
            ids.append(prog.emit(op, (float(c),), _kind(a.dtype), depth=0))
    return Val(np.array(ids, np.int64).reshape(a.shape), cv.reshape(a.shape))


def generate(fn, *example_args, W=4, chunk=CHUNK, traced=None, shared=(), fold=False, rows_fold=None):
    """C for ``fn(*args)`` (a per-variant JAX function of arrays) with every
    scalar a vector of ``W`` variants. ``example_args`` fix the shapes and
    dtypes (their values are not used, except the shared ones' pattern under
    ``fold``); ``traced``: :func:`trace`'s result when the caller has it.
    ``shared``: positions of arguments that are the same for every variant
    (:class:`Generated`). ``fold``: the shared values' pattern is compiled
    in (:func:`shared_pattern`): the values 0 and +-1 as constants, so that
    a bushing's absent directions and a frame's identity parts fold away as
    with values known; every other value is read at run time.
    ``rows_fold``: the same for per-variant inputs - a pattern
    (:func:`rows_pattern`) over the first elements of the batched
    arguments (e.g. a hardpoint design's rows ``[theta | values]``): its
    0 and +-1 compiled in, every other element read per variant."""
    shared = tuple(sorted(int(i) for i in shared))
    closed, out_tree, key = traced or trace(fn, *example_args, W=W, chunk=chunk, shared=shared, fold=fold,
                                            rows_fold=rows_fold)
    code = shared_pattern(example_args, shared) if fold else None
    prog = Program()
    tr = Translator(prog)
    flat_in = jax.tree_util.tree_leaves(example_args)
    is_shared = [i in shared for i, a in enumerate(example_args) for _ in jax.tree_util.tree_leaves(a)]
    args, k, ks = [], 0, 0
    for a, sh in zip(flat_in, is_shared):
        a = np.asarray(a)
        if sh:                  # read once per call from the shared buffer: S(sh[k])
            codes = code[ks:ks + a.size] if code is not None else np.arange(ks, ks + a.size)
            args.append(_input(prog, a, codes, "shared_in"))
            ks += a.size
            continue
        codes = np.arange(k, k + a.size)          # read per variant from its row
        if rows_fold is not None:
            head = np.asarray(rows_fold[k:k + a.size])
            codes[:len(head)] = head
        args.append(_input(prog, a, codes, "in"))
        k += a.size
    outs = tr.run(closed.jaxpr, [const_val(np.asarray(c)) for c in closed.consts], args)
    out_refs = []
    for o in outs:
        out_refs.extend(tr.elems(o))
    selects = fuse_output_passes(prog, out_refs)
    prog.prune(out_refs + [v for sel in selects.values() for kd, v in sel[1] if kd == "s"])
    src, ws_slots, n_st = to_c(prog, out_refs, W, chunk, selects)
    return Generated(src, W, k, [np.shape(a) for a in flat_in], [np.asarray(a).dtype for a in flat_in],
                     [o.shape for o in outs], [v.aval.dtype for v in closed.jaxpr.outvars], ws_slots,
                     prog.arena, n_st, key, out_tree, shared, ks)
