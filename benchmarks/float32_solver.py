"""Accuracy and speed cost of the float32 factorisation option:
``integrator.solver=block32`` (eq. 11's block LU and its solves in float32,
q / Jacobian products / state in float64) against the default float64 block
solver, LSRT2 h = 1 ms, re-linearised every step, nominal axles, the
longitudinal step from 4.5 s: the NMSE of method.md section 3 of both signals
against the Radau reference (benchmarks/work_precision.py's machinery), the
NMSE between the two solvers, and the single-variant time per step.
Batched throughput: ``python benchmarks/sweep_throughput.py --solver block32``.

Usage: python benchmarks/float32_solver.py [--axles double_wishbone multilink]
Writes benchmarks/results/float32_solver.json.
"""
import argparse
import json
import os
import sys
import time

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import work_precision as wp  # noqa: E402
from single_variant import machine  # noqa: E402
from kernels import metrics  # noqa: E402
from sweep.study.loadcase import sample_grid  # noqa: E402
from kernels.response import Options, Problem, solve  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--axles", nargs="+", default=["double_wishbone", "multilink"])
    args = ap.parse_args()
    h = 1e-3
    rows = []
    for axle in args.axles:
        case = wp.load_case(axle)
        ref = wp.reference(case, h)
        n = sample_grid(case.t0, case.t1, h, 1)
        t = case.t0 + np.arange(n) * h
        outs = {}
        for solver in ("block", "block32"):
            a = (Problem(case.model, case.exc, case.t0, h), case.r_eq)
            kw = dict(n_samples=n, every=1, relinearise_every=1, solver=solver)
            compiled = solve.lower(a[0], Options(**kw), a[1]).compile()
            runs = []
            for _ in range(3):
                tic = time.perf_counter()
                res = jax.block_until_ready(compiled(*a))
                runs.append(time.perf_counter() - tic)
            out = {k: np.asarray(res[k]) for k in ("wheel_centre_displacement", "bushing_force")}
            outs[solver] = out
            row = {"axle": axle, "solver": solver, "us_per_step": 1e6 * min(runs) / (n - 1),
                   **{f"nmse_vs_radau_{k}": v for k, v in wp.nmse_of(case, out, ref["channels"], t).items()}}
            rows.append(row)
            print(row, flush=True)
        sel = np.tile(wp._window_mask(t, case.window), 2)
        diff = {}
        for what, key in wp.SIGNALS:
            y32 = wp.pooled_signals(outs["block32"], case.model, what)[sel]
            y64 = wp.pooled_signals(outs["block"], case.model, what)[sel]
            diff[f"nmse_block32_vs_block_{key}"] = float(metrics.nmse(y32, y64))
        rows.append({"axle": axle, "solver": "block32 vs block", **diff})
        print(rows[-1], flush=True)
    os.makedirs(os.path.join(ROOT, "benchmarks", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "benchmarks", "results", "float32_solver.json"), "w") as f:
        json.dump({"rows": rows, "machine": machine(), "h": h,
                   "command": "python benchmarks/float32_solver.py " + " ".join(sys.argv[1:])}, f, indent=2)


if __name__ == "__main__":
    main()
