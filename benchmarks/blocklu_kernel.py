"""Prototype of a generated per-model kernel for the core of the LSRT2 step:
the block LU of eq. (11) and its two solves, as straight-line C
generated from the model's elimination schedule (:mod:`kernels.blocks`),
vectorised across variants (batch-minor: every scalar of the factorisation
is a SIMD vector of W variants), against XLA's compiled version of the same
schedule (``blocks.factor`` + 2 x ``blocks.solve``, what the engine runs).

What it measures, per axle, on the real mass-scaled coefficient matrix of
eq. (11) at the nominal static equilibrium (h = 1 ms, LSRT2's gamma), made
into ``n`` variants D A D with D diagonal, entries in [0.95, 1.05] (the same
pattern and conditioning):

* XLA: ``jit(vmap(factor + 2 solves))`` over the batch, and the engine's
  micro-batching (``lax.map`` over groups of 32, vmapped inside);
* C: the generated kernel for W = 4 and W = 8 (AVX2 / AVX-512 vectors of
  float64), ``gcc -O3 -march=native``, one thread, data already batch-minor
  (the transposition from XLA's variant-major layout is timed separately:
  a real kernel would be fed batch-minor by the assembly);
* agreement: max |x_C - x_XLA| / max |x_XLA| over all variants.

Times are CPU seconds of the process per variant (factor + 2 solves), best
of ``--repeats``, so XLA's intra-op threads are counted. Needs a C compiler
(``cc``). Writes benchmarks/results/blocklu_kernel.json.

Usage: python benchmarks/blocklu_kernel.py [--axles double_wishbone multilink] [--n 1024]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time

if __name__ == "__main__":      # one CPU device for the timings (not when imported by a test)
    os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=1")
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kernels import blocks  # noqa: E402

# ----------------------------------------------------------------------------- C generator
_PRELUDE = r"""
#include <stdlib.h>
#include <string.h>
typedef double vd __attribute__((vector_size(W * 8), aligned(W * 8)));
#define NI __attribute__((noinline))

/* B = D^-1, Gauss-Jordan without pivoting (as kernels.blocks.inv6) */
static NI void inv6(const vd *restrict D, vd *restrict B) {
  vd A[36];
  for (int i = 0; i < 36; i++) { A[i] = D[i]; B[i] = (vd){0}; }
  for (int i = 0; i < 6; i++) B[7 * i] += 1.0;
  for (int k = 0; k < 6; k++) {
    vd piv = 1.0 / A[7 * k];
    vd ra[6], rb[6];
    for (int j = 0; j < 6; j++) { ra[j] = A[6 * k + j] * piv; rb[j] = B[6 * k + j] * piv; }
    for (int i = 0; i < 6; i++) {
      vd f = A[6 * i + k];
      if (i == k) f -= 1.0;
      for (int j = 0; j < 6; j++) { A[6 * i + j] -= f * ra[j]; B[6 * i + j] -= f * rb[j]; }
    }
  }
}
/* C = A B */
static NI void mm_to(vd *restrict C, const vd *restrict A, const vd *restrict B) {
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 6; j++) {
      vd s = A[6 * i] * B[j];
      for (int k = 1; k < 6; k++) s += A[6 * i + k] * B[6 * k + j];
      C[6 * i + j] = s;
    }
}
/* C -= A B */
static NI void mm_sub(vd *restrict C, const vd *restrict A, const vd *restrict B) {
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 6; j++) {
      vd s = C[6 * i + j];
      for (int k = 0; k < 6; k++) s -= A[6 * i + k] * B[6 * k + j];
      C[6 * i + j] = s;
    }
}
/* y -= A x */
static inline void mv_sub(vd *restrict y, const vd *restrict A, const vd *restrict x) {
  for (int i = 0; i < 6; i++) {
    vd s = y[i];
    for (int k = 0; k < 6; k++) s -= A[6 * i + k] * x[k];
    y[i] = s;
  }
}
/* y = A x */
static inline void mv_to(vd *restrict y, const vd *restrict A, const vd *restrict x) {
  for (int i = 0; i < 6; i++) {
    vd s = A[6 * i] * x[0];
    for (int k = 1; k < 6; k++) s += A[6 * i + k] * x[k];
    y[i] = s;
  }
}
"""


def generate_c(elim: blocks.Elimination, width: int) -> str:
    """C source of ``factor_solve2(groups, A, b1, b2, x1, x2)`` for one model
    structure: A (groups, slots, 36, W), b / x (groups, m, 6, W); W variants per
    SIMD vector. The schedule is ``kernels.blocks``' (same supersteps, same
    order of operations per block)."""
    p, f = elim.pattern, elim.filled
    m, nf = p.m, f.n
    lines = [f"#define W {width}", _PRELUDE]
    n_low = sum(len(st.low) for st in elim.steps)
    lines.append(f"static const short GATHER[{nf}] = {{{', '.join(str(int(g)) for g in elim.gather)}}};")
    lines.append("void factor_solve2(long groups, const double *A_, const double *b1_, const double *b2_,"
                 " double *x1_, double *x2_) {")
    lines.append(f"  vd *a = aligned_alloc(W * 8, sizeof(vd) * 36 * {nf});")
    lines.append(f"  vd *L = aligned_alloc(W * 8, sizeof(vd) * 36 * {max(n_low, 1)});")
    lines.append(f"  vd *Di = aligned_alloc(W * 8, sizeof(vd) * 36 * {m});")
    lines.append("  vd r[6];")
    lines.append("  for (long g = 0; g < groups; g++) {")
    lines.append(f"    const vd *A = (const vd *)A_ + g * {36 * p.n};")
    lines.append(f"    for (int s = 0; s < {nf}; s++) {{")
    lines.append(f"      if (GATHER[s] < {p.n}) memcpy(a + 36 * s, A + 36 * GATHER[s], sizeof(vd) * 36);")
    lines.append("      else memset(a + 36 * s, 0, sizeof(vd) * 36);")
    lines.append("    }")
    # factorisation: L global index per step
    low_base = []
    base = 0
    for st in elim.steps:
        low_base.append(base)
        for q, (k, dslot) in enumerate(zip(st.pivots, st.diag)):
            lines.append(f"    inv6(a + {36 * int(dslot)}, Di + {36 * int(k)});")
        for n_, (slot, k) in enumerate(zip(st.low, st.low_col)):
            lines.append(f"    mm_to(L + {36 * (base + n_)}, a + {36 * int(slot)}, Di + {36 * int(k)});")
        for t, lo, uo in zip(st.upd_target, st.upd_l_local, st.upd_u_local):
            lines.append(f"    mm_sub(a + {36 * int(t)}, L + {36 * (base + int(lo))}, a + {36 * int(st.up[uo])});")
        base += len(st.low)
    # two solves
    for b, x in (("b1_", "x1_"), ("b2_", "x2_")):
        lines.append("    {")
        lines.append(f"      vd *y = (vd *){x} + g * {6 * m};")
        lines.append(f"      memcpy(y, (const vd *){b} + g * {6 * m}, sizeof(vd) * {6 * m});")
        for st, lb in zip(elim.steps, low_base):
            for n_, (i, k) in enumerate(zip(st.low_row, st.low_col)):
                lines.append(f"      mv_sub(y + {6 * int(i)}, L + {36 * (lb + n_)}, y + {6 * int(k)});")
        for st in reversed(elim.steps):
            for q, k in enumerate(st.pivots):
                lines.append(f"      memcpy(r, y + {6 * int(k)}, sizeof(vd) * 6);")
                for slot, piv, j in zip(st.up, st.up_piv, st.up_col):
                    if int(piv) == q:
                        lines.append(f"      mv_sub(r, a + {36 * int(slot)}, y + {6 * int(j)});")
                lines.append(f"      mv_to(y + {6 * int(k)}, Di + {36 * int(k)}, r);")
        lines.append("    }")
    lines.append("  }")
    lines.append("  free(a); free(L); free(Di);")
    lines.append("}")
    return "\n".join(lines) + "\n"


def build_kernel(elim, width, workdir, cc="cc", opt="-O3"):
    """Compile the generated source into a shared library; returns the ctypes
    function, the build time (s) and the source size (bytes). ``opt``: the
    optimisation level (the benchmark's -O3; gcc 12 takes ~220 s at -O3 for
    the double wishbone at width 8, against ~5 s at -O2 and ~3 s at -O3 for
    width 4, measured on the 2-core machine of BENCHMARKS.md)."""
    # a fresh folder per build: dlopen returns an already loaded library for
    # the same path, whatever the file holds now
    workdir = tempfile.mkdtemp(prefix=f"w{width}-", dir=workdir)
    src = os.path.join(workdir, f"blocklu_w{width}.c")
    lib = os.path.join(workdir, f"blocklu_w{width}.so")
    with open(src, "w") as fh:
        fh.write(generate_c(elim, width))
    flags = [opt, "-march=native", "-fno-math-errno", "-shared", "-fPIC"]
    tic = time.perf_counter()
    subprocess.run([cc, *flags, "-o", lib, src], check=True)
    build_s = time.perf_counter() - tic
    fn = ctypes.CDLL(lib).factor_solve2
    dp = np.ctypeslib.ndpointer(np.float64, flags="C_CONTIGUOUS")
    fn.argtypes = [ctypes.c_long, dp, dp, dp, dp, dp]
    fn.restype = None
    return fn, build_s, os.path.getsize(src)


def aligned_empty(shape, align=64):
    """float64 array whose data start on an ``align``-byte boundary (the
    kernel's vector loads are aligned)."""
    n = int(np.prod(shape))
    raw = np.empty(n + align // 8, np.float64)
    off = (-raw.ctypes.data % align) // 8
    return raw[off: off + n].reshape(shape)


def to_batch_minor(x, width):
    """(n, s, ...) variant-major -> (n/W, s, ..., W) batch-minor, 64-byte aligned."""
    n = x.shape[0]
    y = np.moveaxis(x.reshape((n // width, width) + x.shape[1:]), 1, -1)
    out = aligned_empty(y.shape)
    out[...] = y
    return out


def from_batch_minor(x):
    g, w = x.shape[0], x.shape[-1]
    return np.moveaxis(x, -1, 1).reshape((g * w,) + x.shape[1:-1])


def run_generated(fn, width, A, b1, b2):
    """A (n, slots, 6, 6), b (n, m, 6) -> x1, x2 (n, m, 6) through the C kernel."""
    Ab = to_batch_minor(A.reshape(A.shape[0], A.shape[1], 36), width)
    b1b, b2b = to_batch_minor(b1, width), to_batch_minor(b2, width)
    x1b, x2b = aligned_empty(b1b.shape), aligned_empty(b2b.shape)
    fn(Ab.shape[0], Ab, b1b, b2b, x1b, x2b)
    return from_batch_minor(x1b), from_batch_minor(x2b)


# ----------------------------------------------------------------------------- inputs
def coefficient_matrices(axle, n, seed=0):
    """Eq. (11)'s mass-scaled matrix of the axle at its nominal static
    equilibrium (LSRT2, h = 1 ms) in slots, made into n variants."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import work_precision as wp
    from kernels import linsolve, loads
    from kernels.dynamics import linearise_blocks
    from kernels.lsrt2 import GAMMA
    case = wp.load_case(axle)
    model = case.model
    m = model.topology.n_bodies
    lin = linearise_blocks(model, case.r_eq.reshape(m, 6), jnp.zeros((m, 6)),
                           loads.u_at(case.exc, case.t0).reshape(2, 6))
    elim = blocks.model_elimination(model.topology)
    A0 = np.asarray(linsolve.block_coefficient_matrix(elim.pattern, lin, 1e-3 * GAMMA))[: elim.pattern.n]
    rng = np.random.default_rng(seed)
    # variants D A0 D, D = diag(d) with d in [0.95, 1.05] per coordinate: the
    # same pattern and the same conditioning (scaling single blocks instead
    # breaks the cancellation of the stiff joints' blocks: near-singular)
    d = rng.uniform(0.95, 1.05, (n, m, 6))
    p = elim.pattern
    A = d[:, p.rows, :, None] * A0[None] * d[:, p.cols, None, :]
    b1 = rng.standard_normal((n, m, 6))
    b2 = rng.standard_normal((n, m, 6))
    return elim, A, b1, b2


def numpy_dense_solve(elim, A, b):
    """Independent reference: numpy's partially pivoted dense LU of the assembled matrices."""
    p, m = elim.pattern, elim.pattern.m
    D = np.zeros((A.shape[0], 6 * m, 6 * m))
    for s_, (i, j) in enumerate(zip(p.rows, p.cols)):
        D[:, 6 * i:6 * i + 6, 6 * j:6 * j + 6] = A[:, s_]
    return np.linalg.solve(D, b.reshape(b.shape[0], -1, 1))[..., 0].reshape(b.shape)


def rel(x, ref):
    return float(np.abs(x - ref).max() / np.abs(ref).max())


def xla_functions(elim, group=32):
    def one(A, b1, b2):
        fac = blocks.factor(elim, A)
        return blocks.solve(elim, fac, b1), blocks.solve(elim, fac, b2)
    vm = jax.jit(jax.vmap(one))

    @jax.jit
    def grouped(A, b1, b2):
        n = A.shape[0]
        r = lambda x: x.reshape((n // group, group) + x.shape[1:])
        x1, x2 = jax.lax.map(lambda t: jax.vmap(one)(*t), (r(A), r(b1), r(b2)))
        return x1.reshape(b1.shape), x2.reshape(b2.shape)
    return {"xla_vmap": vm, f"xla_lax_map_{group}": grouped}


def best_cpu(fn, repeats):
    best_cpu_s, best_wall = np.inf, np.inf
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        best_cpu_s = min(best_cpu_s, time.process_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - w0)
    return best_cpu_s, best_wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--axles", nargs="+", default=["double_wishbone", "multilink"])
    ap.add_argument("--n", type=int, default=1024, help="variants (a multiple of 32)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "blocklu_kernel.json"))
    args = ap.parse_args()
    if args.n % 32:
        ap.error(f"--n = {args.n}: must be a multiple of 32")
    rows = []
    work = tempfile.mkdtemp(prefix="blocklu-")
    for axle in args.axles:
        elim, A, b1, b2 = coefficient_matrices(axle, args.n)
        flops = elim.flops()[0] + 2 * elim.flops()[1]
        Aj, b1j, b2j = (jax.device_put(x) for x in (A, b1, b2))
        dense_x = numpy_dense_solve(elim, A[:16], b1[:16])
        ref = None
        for name, f in xla_functions(elim).items():
            tic = time.perf_counter()
            out = jax.block_until_ready(f(Aj, b1j, b2j))
            compile_s = time.perf_counter() - tic
            if ref is None:
                ref = [np.asarray(o) for o in out]
            cpu, wall = best_cpu(lambda: jax.block_until_ready(f(Aj, b1j, b2j)), args.repeats)
            err = max(float(np.abs(np.asarray(o) - r).max() / np.abs(r).max()) for o, r in zip(out, ref))
            rows.append(dict(axle=axle, kernel=name, rel_err_vs_numpy_dense=rel(np.asarray(out[0])[:16], dense_x), n=args.n, compile_or_build_s=compile_s,
                             cpu_us_per_variant=1e6 * cpu / args.n, wall_us_per_variant=1e6 * wall / args.n,
                             gflops_per_cpu_s=flops * args.n / cpu / 1e9, rel_diff_vs_xla_vmap=err))
            print(rows[-1], flush=True)
        for width in (4, 8):
            fn, build_s, src_bytes = build_kernel(elim, width, work)
            x1, x2 = run_generated(fn, width, A, b1, b2)
            err = max(float(np.abs(x - r).max() / np.abs(r).max()) for x, r in zip((x1, x2), ref))
            Ab = to_batch_minor(A.reshape(args.n, -1, 36), width)
            b1b, b2b = to_batch_minor(b1, width), to_batch_minor(b2, width)
            x1b, x2b = aligned_empty(b1b.shape), aligned_empty(b2b.shape)
            cpu, wall = best_cpu(lambda: fn(Ab.shape[0], Ab, b1b, b2b, x1b, x2b), args.repeats)
            tcpu, _ = best_cpu(lambda: to_batch_minor(A.reshape(args.n, -1, 36), width), args.repeats)
            rows.append(dict(axle=axle, kernel=f"generated_c_w{width}", n=args.n, compile_or_build_s=build_s,
                             rel_err_vs_numpy_dense=rel(x1[:16], dense_x),
                             source_kb=src_bytes / 1024,
                             cpu_us_per_variant=1e6 * cpu / args.n, wall_us_per_variant=1e6 * wall / args.n,
                             gflops_per_cpu_s=flops * args.n / cpu / 1e9, rel_diff_vs_xla_vmap=err,
                             transpose_to_batch_minor_cpu_us_per_variant=1e6 * tcpu / args.n))
            print(rows[-1], flush=True)
        for r in rows:
            if r["axle"] == axle:
                r["flops_per_variant"] = flops
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from single_variant import machine
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump({"rows": rows, "machine": machine(),
                   "command": "python benchmarks/blocklu_kernel.py " + " ".join(sys.argv[1:])}, fh, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
