"""Single-variant real-time factor of the longitudinal step (method.md section 3).

Usage: python benchmarks/single_variant.py [--model double_wishbone] [--repeat 3]

Runs the full load case (0 -> 6 s, h = 1 ms, re-linearisation every step,
float64) through the engine's own single-variant path (the time-response
chunk runner, ``sweep.kinds.time_response.make_chunk_runner``, for a chunk of one
variant: static equilibrium, then every bushing stored at every step - what
``python -m sweep`` runs for one variant), reports the compile time
separately and the best of --repeat timed runs, and writes
benchmarks/results/single_variant_<model>.json.
"""
import argparse
import json
import os
import platform
import time

import jax
import yaml

import kernels  # noqa: F401
import numpy as np

from sweep.study.loadcase import sample_grid
from sweep.axle.builder import model_from_config
from sweep.axle.params import build_parameters
from sweep.kinds.time_response import Case, make_chunk_runner
from sweep.study.loadcase import build_excitation

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "jax": jax.__version__,
            "device": str(jax.devices()[0])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="double_wishbone")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--relinearise-every", type=int, default=1)
    args = ap.parse_args()
    with open(os.path.join(ROOT, "configs", "model", f"{args.model}.yaml")) as f:
        model = model_from_config(yaml.safe_load(f))
    with open(os.path.join(ROOT, "configs", "loadcase", "longitudinal_step.yaml")) as f:
        exc, t0, t1 = build_excitation(yaml.safe_load(f))
    dt = 1e-3
    n = sample_grid(t0, t1, dt, 1)
    runner = make_chunk_runner(model, build_parameters({}, model), Case(exc, t0, dt, n, every=1, relin=args.relinearise_every, bidx=list(range(len(model.topology.bushing_names)))))
    thetas = np.zeros((1, 0))
    tic = time.perf_counter()
    compiled = runner.lower(thetas).compile()
    compile_s = time.perf_counter() - tic
    runs = []
    for _ in range(args.repeat):
        tic = time.perf_counter()
        jax.block_until_ready(compiled(thetas))
        runs.append(time.perf_counter() - tic)
    best = min(runs)
    res = {"model": args.model, "load_case": "longitudinal_step", "simulated_s": t1 - t0,
           "dt": dt, "steps": n - 1, "relinearise_every": args.relinearise_every,
           "compile_s": compile_s, "run_s": runs, "best_run_s": best,
           "real_time_factor": best / (t1 - t0), "us_per_step": 1e6 * best / (n - 1),
           "machine": machine(),
           "command": f"python benchmarks/single_variant.py --model {args.model}"}
    os.makedirs(os.path.join(ROOT, "benchmarks", "results"), exist_ok=True)
    path = os.path.join(ROOT, "benchmarks", "results", f"single_variant_{args.model}.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=2)
    print(f"| {args.model} | {t1 - t0:.1f} s | {n - 1} | {compile_s:.1f} s | {best:.2f} s | "
          f"{res['us_per_step']:.0f} us | {res['real_time_factor']:.3f} |")
    print(f"machine: {res['machine']}")
    print(f"written: {path}")


if __name__ == "__main__":
    main()
