"""Cost of state events under vmap: the pothole load case on the double
wishbone with switching stops, a batch of variants of which 0 %, 10 % or
100 % reach the stops (the others get their stops moved 1 m out of reach,
so that they never switch), against the same batch with the smooth stop law
(no root functions at all). Prints the run time per variant-step (compile
excluded) and the events per variant.

    .venv/bin/python benchmarks/event_cost.py [--batch 20] [--method lsrt2]

What it shows: a step in which no variant of the batch has an event costs
the root functions only (the location loop runs its one iteration, the
step); a step in which some variant has one runs the location iterations
for the whole batch (SIMD lanes), so the cost grows with the number of
steps that hold an event in any lane, not with the share of variants.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import yaml  # noqa: E402

import kernels  # noqa: E402,F401
from kernels import build_model, loads, statics  # noqa: E402
from kernels.methods import METHODS  # noqa: E402
from kernels.system import model_system  # noqa: E402
from sweep.axle.builder import build_tables, load_model_file  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pothole():
    with open(os.path.join(ROOT, "configs/loadcase/pothole.yaml")) as fh:
        lc = yaml.safe_load(fh)
    cols = ("fx", "fy", "fz", "mx", "my", "mz")

    def arr(d):
        a = np.zeros((2, 6))
        for i, side in enumerate(("left", "right")):
            for k, v in (d.get(side) or {}).items():
                a[i, cols.index(k)] = v
        return a
    changes = [(c["time"], c["duration"], arr(c)) for c in lc["changes"]]
    return loads.excitation(arr(lc["wheel_loads"]), changes), lc["t_start"], lc["t_end"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--method", default="lsrt2")
    ap.add_argument("--dt", type=float, default=1e-3)
    args = ap.parse_args()
    method = METHODS[args.method]
    exc, t0, t1 = pothole()
    n = int(round((t1 - t0) / args.dt))
    print(f"# {jax.devices()[0].platform}, {os.cpu_count()} cores; double wishbone, pothole "
          f"{t0}-{t1} s, {args.method}, h = {args.dt * 1e3:g} ms, batch {args.batch}")
    for law in ("smooth", "switching"):
        cfg = load_model_file(os.path.join(ROOT, "configs/model/double_wishbone.yaml"))
        cfg["stop_law"] = law
        model = build_model(build_tables(cfg, source="configs/model/double_wishbone.yaml"))
        eq = statics.static_equilibrium(model, loads.u_at(exc, t0))
        m = model.topology.n_bodies
        wheel = int(model.topology.wheel_slots[0])

        def one(far):
            # a variant out of reach of its stops: engagement 1 m further out
            pp = model.elements["p2p"]
            mm = model.replace_elements(p2p={"engage": pp["engage"] - far * pp["engage_sign"]})
            tr = method.simulate(model_system(mm, exc), eq.r.reshape(-1), jnp.zeros(6 * m), t0,
                                 args.dt, n + 1, 1, 1, lambda r, v, t: r.reshape(m, 6)[wheel, 2])
            return tr.outputs, (tr.n_events if tr.n_events is not None else jnp.zeros((), jnp.int32))
        run = jax.jit(jax.vmap(one))
        t_c = time.perf_counter()
        compiled = run.lower(jnp.zeros(args.batch)).compile()
        t_c = time.perf_counter() - t_c
        shares = (0.0, 0.1, 1.0) if law == "switching" else (1.0,)
        for share in shares:
            hit = int(round(share * args.batch))
            far = jnp.asarray(np.r_[np.zeros(hit), np.ones(args.batch - hit)])
            jax.block_until_ready(compiled(far))
            best = np.inf
            for _ in range(3):
                t_r = time.perf_counter()
                _, ev = jax.block_until_ready(compiled(far))
                best = min(best, time.perf_counter() - t_r)
            us = best / (args.batch * n) * 1e6
            print(f"{law:9s} hits {share * 100:5.0f} % ({hit:3d} of {args.batch}): {us:8.1f} us per "
                  f"variant-step, events per variant {float(np.mean(np.asarray(ev))):5.1f} "
                  f"(compile {t_c:.0f} s)")


if __name__ == "__main__":
    main()
