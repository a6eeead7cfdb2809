"""Convergence of the fixed-step methods through a load step, on and off the step grid.

    .venv/bin/python benchmarks/event_orders.py                 # double wishbone, lsrt2 + ros34pw2
    .venv/bin/python benchmarks/event_orders.py --axle toy_trailing_arm --methods lsrt2 ros34pw2 linear_implicit_euler
    .venv/bin/python benchmarks/event_orders.py --nmse --axle multilink   # the NMSE table row of docs/validation.md, h = 1 ms

The longitudinal step of method.md section 3 (5 kN vertical per wheel
centre, a -2.5 kN longitudinal step) switched at 5.0 s (on the grid of every
h) and at 5.0003 s (inside a step of every h: the step is split there), from
the static equilibrium at 4.9 s, integrated to 6.0 s with h = 1, 0.5 and
0.25 ms. Error: the RMS over 4.9-6.0 s of the left wheel-centre x against
scipy's Radau (rtol 1e-10, restarted at the switch) on the 1 ms grid.
Prints one table row per method and step time: the three errors and the
ratios per halving of h (an order-p method: about 2^p).

``--nmse``: instead, the NMSE of method.md section 3 of each method at
h = 1 ms against Radau (rtol 1e-8, the reference of docs/validation.md's table) over
4.9-6.0 s for the step at 5.0 s, both signals of that table
(wheel-centre displacement, reference-bushing force; both sides pooled:
``sweep.results.cube.pooled_signals``, ``kernels.metrics.nmse``).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--axle", default="double_wishbone")
    ap.add_argument("--methods", nargs="+", default=["lsrt2", "ros34pw2"])
    ap.add_argument("--steps", nargs="+", type=float, default=[5.0, 5.0003])
    ap.add_argument("--nmse", action="store_true", help="the NMSE at h = 1 ms of docs/validation.md's table instead")
    args = ap.parse_args(argv)
    if args.nmse:
        return nmse_table(args.axle, args.methods)

    import yaml
    import jax.numpy as jnp

    import kernels  # noqa: F401  (float64)
    from kernels import loads
    from kernels.model import build_model
    from kernels.radau import solve as radau
    from kernels.statics import equilibrium
    from kernels.response import Options, Problem, solve
    from sweep.axle.builder import build_tables

    with open(os.path.join(ROOT, "configs", "model", f"{args.axle}.yaml")) as f:
        model = build_model(build_tables(yaml.safe_load(f)))
    t0, t1 = 4.9, 6.0
    t_grid = t0 + np.arange(1101) * 1e-3
    print(f"{args.axle}: longitudinal step, RMS error of the left wheel-centre x against Radau "
          f"(rtol 1e-10) over {t0}-{t1} s; h = 1, 0.5, 0.25 ms")
    print(f"| method | step at | err 1 ms [m] | err 0.5 ms | err 0.25 ms | ratio 1->0.5 | ratio 0.5->0.25 |")
    print("|---|---|---|---|---|---|---|")
    for t_step in args.steps:
        u0 = np.zeros((2, 6))
        u0[:, 2] = 5000.0
        amp = np.zeros((2, 6))
        amp[:, 0] = -2500.0
        exc = loads.excitation(u0, [(t_step, 0.0, amp)])
        eq = equilibrium(model, loads.u_at(exc, t0))
        tic = time.perf_counter()
        _, r_ref, _ = radau(model, exc, eq.r, jnp.zeros_like(eq.r), t_grid, rtol=1e-10,
                            atol_coordinates=1e-12, atol_speeds=1e-10)
        from kernels import metrics
        nb = model.topology.n_bodies
        x_ref = np.array([np.asarray(metrics.wheel_centre_position(model, jnp.asarray(r).reshape(nb, 6)))[0, 0]
                          for r in r_ref])
        x_ref -= x_ref[0]
        ref_s = time.perf_counter() - tic
        for name in args.methods:
            errs = []
            for k, h in ((1, 1e-3), (2, 5e-4), (4, 2.5e-4)):
                out = solve(Problem(model, exc, t0, h), Options(n_samples=1101, every=k, relinearise_every=1, method=name), eq.r)
                x = np.asarray(out["wheel_centre_displacement"])[:, 0, 0]
                errs.append(float(np.sqrt(np.mean((x - x_ref) ** 2))))
            r1, r2 = errs[0] / errs[1], errs[1] / errs[2]
            print(f"| {name} | {t_step} s | {errs[0]:.3g} | {errs[1]:.3g} | {errs[2]:.3g} | {r1:.2f} | {r2:.2f} |",
                  flush=True)
        print(f"(Radau reference for the step at {t_step} s: {ref_s:.0f} s)", flush=True)


def nmse_table(axle, methods):
    import yaml
    import jax
    import jax.numpy as jnp

    import kernels  # noqa: F401  (float64)
    from kernels import loads, metrics
    from kernels.model import build_model
    from kernels.radau import solve as radau
    from kernels.statics import equilibrium
    from sweep.results.cube import pooled_signals
    from kernels.response import Options, Problem, make_outputs as make_channels, solve
    from sweep.axle.builder import build_tables

    with open(os.path.join(ROOT, "configs", "model", f"{axle}.yaml")) as f:
        model = build_model(build_tables(yaml.safe_load(f)))
    u0 = np.zeros((2, 6))
    u0[:, 2] = 5000.0
    amp = np.zeros((2, 6))
    amp[:, 0] = -2500.0
    exc = loads.excitation(u0, [(5.0, 0.0, amp)])
    t = 4.9 + np.arange(1101) * 1e-3
    channels = make_channels()
    eq = equilibrium(model, loads.u_at(exc, 4.9))
    _, r, v = radau(model, exc, eq.r, jnp.zeros_like(eq.r), t)
    ref = jax.vmap(lambda a, b: channels(model, a, b, eq.r))(jnp.asarray(r), jnp.asarray(v))
    print(f"{axle}: NMSE against Radau (rtol 1e-8) over 4.9-6.0 s, h = 1 ms")
    for name in methods:
        out = solve(Problem(model, exc, 4.9, 1e-3), Options(n_samples=1101, every=1, relinearise_every=1, method=name), eq.r)
        res = [float(metrics.nmse(pooled_signals(out, model, w), pooled_signals(ref, model, w)))
               for w in ("wheel_displacement", "bushing_force")]
        print(f"| {name} | displacement {res[0]:.2g} | force {res[1]:.2g} |", flush=True)


if __name__ == "__main__":
    main()
