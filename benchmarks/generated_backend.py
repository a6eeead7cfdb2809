"""The generated backend against XLA on the integration stage alone.

For one axle: the time-response kind's integration stage (LSRT2, h = 1 ms,
longitudinal step from 4.9 s, every step an output sample) over ``--n``
variants of a two-parameter bushing design, from their static equilibria
(computed once on XLA, not timed). Timed, back to back, each after a
warm-up run:

* generated: :func:`sweep.codegen.build.load_or_build` + ``Kernel`` (groups
  of 4 variants, one thread per core), including the transposition to and
  from the batch-minor layout;
* XLA: the same per-variant function as a job maps it on one device
  (``lax.map`` over micro-batches of 32, vmapped inside).

Prints and writes (benchmarks/results/generated_backend_<axle>.json) the
first-build times (trace, generate, compile), the load time of a second
build (from the cache), variant-steps/s of both and their largest relative
difference per output.

Usage: python benchmarks/generated_backend.py [--axle double_wishbone] [--n 1024] [--steps 200] [--skip-xla] [--repeat 5]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def integration_case(axle, n, steps, values=False):
    """(per-variant integration stage, thetas (n, 2), their equilibria) of
    ``axle``: LSRT2, h = 1 ms, ``steps`` steps of the longitudinal step load
    case from 4.9 s, every step an output sample; two parameters (the
    first bushing's radial stiffness, every bushing's damping), drawn
    uniformly in [0.5, 2]; equilibria computed on XLA. ``values=True``: the
    stage as a job runs it, ``second(theta, values, carry)`` reading the
    model's and load case's values at run time, and the values vector as a
    fourth item."""
    import yaml
    from kernels.model import build_model
    from sweep.kinds.time_response import Case, make_variant
    from sweep.study.loadcase import build_excitation
    from sweep.axle.builder import build_tables
    from sweep.axle.params import build_parameters

    with open(os.path.join(ROOT, "configs", "model", f"{axle}.yaml")) as f:
        model = build_model(build_tables(yaml.safe_load(f)))
    with open(os.path.join(ROOT, "configs", "loadcase", "longitudinal_step.yaml")) as f:
        exc, _, _ = build_excitation(yaml.safe_load(f))      # the load case of method.md section 3
    names = model.topology.bushing_names
    pset = build_parameters({"first_radial": {"target": "bushing.stiffness", "elements": names[0],
                                              "directions": "radial", "bounds": [0.5, 2.0]},
                             "damping": {"target": "bushing.damping", "elements": "*", "bounds": [0.5, 2.0]}},
                            model)
    first, second = make_variant(model, pset, Case(exc, 4.9, 1e-3, steps + 1), stages=True)
    rng = np.random.default_rng(0)
    thetas = 0.5 + 1.5 * rng.random((n, len(pset)))
    carries = jax.device_get(jax.jit(jax.vmap(first))(thetas))
    if not values:
        return second, thetas, carries
    from sweep.engine.values import Lifted
    from sweep.kinds.time_response import run_inputs
    _, integrate = make_variant(model, pset, Case(exc, 4.9, 1e-3, steps + 1), stages=True, lifted="shared")
    return (lambda theta, vec, carry: integrate((theta, vec), carry)), thetas, carries, \
        Lifted(run_inputs(model, exc)).vector


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--axle", default="double_wishbone")
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--skip-xla", action="store_true", help="time the generated code only")
    ap.add_argument("--repeat", type=int, default=1,
                    help="time the generated code this many times: the best in generated_s, all in generated_runs_s")
    args = ap.parse_args()

    from sweep.codegen import build
    from sweep.engine import mapping

    # the stage as a job runs it: the values read at run time, their pattern compiled in
    staged, thetas, carries, vec = integration_case(args.axle, args.n, args.steps, values=True)
    jvec = jax.numpy.asarray(vec)
    second = lambda theta, carry: staged(theta, jvec, carry)     # noqa: E731 - XLA's reference, values closed over
    theta0 = thetas[0]
    carry0 = jax.tree_util.tree_map(lambda a: np.asarray(a)[0], carries)
    res = {"axle": args.axle, "n": args.n, "steps": args.steps, "machine": os.uname().nodename,
           "values": "read at run time (pattern of 0 / +-1 compiled in)"}

    # first build (cache entry removed), then a second from the cache
    from sweep.codegen import emit
    opts = dict(shared=(1,), fold=True)
    key = emit.trace(staged, theta0, vec, carry0, **opts)[2]
    for ext in (".pkl",):
        p = os.path.join(build.cache_dir(), key + ext)
        if os.path.exists(p):
            os.remove(p)
    t = time.perf_counter()
    gen, fn, info = build.load_or_build(staged, theta0, vec, carry0, **opts)
    res["first_total_s"] = time.perf_counter() - t
    res.update({f"first_{k}": v for k, v in info.items()})   # build_s: gcc (0 when the library was cached)
    t = time.perf_counter()
    gen, fn, info2 = build.load_or_build(staged, theta0, vec, carry0, **opts)
    res["second_total_s"] = time.perf_counter() - t
    res["statements"] = gen.n_statements
    kernel = build.Kernel(gen, fn, threads=args.threads)
    kernel(thetas[:8], vec, jax.tree_util.tree_map(lambda a: a[:8], carries))
    runs = []
    for _ in range(max(1, args.repeat)):
        t = time.perf_counter()
        got = kernel(thetas, vec, carries)
        runs.append(time.perf_counter() - t)
    res["generated_s"] = min(runs)
    res["generated_runs_s"] = runs
    vs = args.n * args.steps
    res["generated_variant_steps_per_s"] = vs / res["generated_s"]
    if args.skip_xla:
        print(json.dumps(res, indent=1))
        return
    xla = mapping.map_variants(lambda a: second(*a), 1, 32)
    t = time.perf_counter()
    ref = jax.device_get(xla((thetas, carries)))
    res["xla_compile_and_first_run_s"] = time.perf_counter() - t
    t = time.perf_counter()
    ref = jax.device_get(xla((thetas, carries)))
    res["xla_s"] = time.perf_counter() - t
    res["xla_variant_steps_per_s"] = vs / res["xla_s"]
    res["max_rel_difference"] = {}
    for path, a in jax.tree_util.tree_leaves_with_path(got):
        b = np.asarray(jax.tree_util.tree_leaves(ref)[len(res["max_rel_difference"])], np.float64)
        a = np.asarray(a, np.float64)
        res["max_rel_difference"][jax.tree_util.keystr(path)] = float(
            np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))
    print(json.dumps(res, indent=1))
    os.makedirs(os.path.join(ROOT, "benchmarks", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "benchmarks", "results", f"generated_backend_{args.axle}.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
