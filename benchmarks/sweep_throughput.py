"""Batched throughput of the sweep engine's chunk runner (variant-steps per second).

Usage: python benchmarks/sweep_throughput.py [--batches 1 16 64 256] [--steps 200]

For each batch size: one compiled chunk (lhs parameters of configs/sweep/lhs.yaml,
per-variant static equilibrium, LSRT2 h = 1 ms, re-linearisation every step,
output every 10 steps) over --steps steps across the longitudinal step;
compile time and the best of 2 runs. Writes benchmarks/results/sweep_throughput.json.
"""
import argparse
import json
import os
import sys
import time

import jax
import yaml

import kernels  # noqa: F401
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from single_variant import machine  # noqa: E402
from sweep.study.design import make_design
from sweep.kinds.time_response import Case, make_chunk_runner
from sweep.axle.builder import model_from_config
from sweep.study.loadcase import build_excitation
from sweep.axle.params import build_parameters

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 16, 64, 256])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--micro-batch", type=int, default=0, help="lax.map groups of this many variants (0: one vmap)")
    ap.add_argument("--solver", default="block", help="integrator.solver: block | dense | block32")
    ap.add_argument("--json", default=os.path.join(ROOT, "benchmarks", "results", "sweep_throughput.json"),
                    help="where to write the figures")
    args = ap.parse_args()
    cfg = lambda *p: yaml.safe_load(open(os.path.join(ROOT, "configs", *p)))  # noqa: E731
    model = model_from_config(cfg("model", "double_wishbone.yaml"))
    sw = cfg("sweep", "lhs.yaml")
    pset = build_parameters(sw["parameters"], model)
    exc, _, _ = build_excitation(cfg("loadcase", "longitudinal_step.yaml"))
    t0, dt, every = 5.0 - 0.05, 1e-3, 10
    n_samples = args.steps // every + 1
    rows = []
    for B in args.batches:
        X = make_design({"design": "lhs", "n_variants": B, "seed": 0}, pset)
        run = make_chunk_runner(model, pset, Case(exc, t0, dt, n_samples, every=every, relin=1, bidx=list(range(len(model.topology.bushing_names))), solver=args.solver), micro_batch=args.micro_batch or None)
        tic = time.perf_counter()
        compiled = run.lower(X).compile()
        comp = time.perf_counter() - tic
        times = []
        for _ in range(2):
            tic = time.perf_counter()
            jax.block_until_ready(compiled(X))
            times.append(time.perf_counter() - tic)
        best = min(times)
        row = {"batch": B, "steps": args.steps, "compile_s": comp, "run_s": best,
               "variant_steps_per_s": B * args.steps / best, "solver": args.solver}
        rows.append(row)
        print(f"| {B} | {args.steps} | {comp:.1f} s | {best:.2f} s | {row['variant_steps_per_s']:.0f} |",
              flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"rows": rows, "machine": machine(),
                   "note": "includes each variant's static equilibrium (Newton, ~12 iterations)",
                   "xla_flags": os.environ.get("XLA_FLAGS", ""),
                   "command": "python benchmarks/sweep_throughput.py " + " ".join(sys.argv[1:])}, f, indent=2)


if __name__ == "__main__":
    main()
