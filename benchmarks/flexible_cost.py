"""Cost per variant-step of the flexible twist-beam axle against rigid axles.

Usage: python benchmarks/flexible_cost.py [--batches 1 64] [--steps 400]

Models: the twist beam (cross member flexible: 12 modal coordinates in two
modal slots), the same axle with the cross member rigid (its frame body
alone: the rigid twin, same elements), and the toy trailing-arm axle and
the double wishbone for scale. Each: LSRT2, h = 1 ms, relinearised every
step, the longitudinal step's wheel loads (the axle's own design load),
``--steps`` steps from 4.9 s through the load step at 5.0 s, outputs every
10 steps; a batch of N variants is one vmapped program over the pivot /
first bushing's stiffness scaled by 0.8-1.2. Compile time and the best of 2
runs. Writes benchmarks/results/flexible_cost.json.
"""
import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import kernels  # noqa: F401  (float64)
from kernels import loads
from kernels.integrate import simulate
from kernels.methods import METHODS
from kernels.model import build_model
from kernels.statics import equilibrium
from kernels.system import model_system
from sweep.axle.builder import build_tables, load_model_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from single_variant import machine  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WHEEL_LOAD = {"twist_beam": 3100.0, "twist_beam_rigid": 3100.0}


def tables_of(name):
    base = "twist_beam" if name == "twist_beam_rigid" else name
    tables = build_tables(load_model_file(os.path.join(ROOT, "configs", "model", f"{base}.yaml")))
    if name == "twist_beam_rigid":
        tables.pop("flexible_bodies")          # the cross member's frame body alone: rigid
    return tables


def case(name, batch, steps):
    model = build_model(tables_of(name))
    fz = WHEEL_LOAD.get(name, 5000.0)
    u0 = np.zeros((2, 6))
    u0[:, 2] = fz
    amp = np.zeros((2, 6))
    amp[:, 0] = -fz / 2
    exc = loads.excitation(u0, [(5.0, 0.0, amp)])
    scales = jnp.linspace(0.8, 1.2, batch) if batch > 1 else jnp.ones(1)
    m = model.topology.n_bodies

    def one(s):
        mdl = model.replace_elements(bushing={"k_scale": model.elements["bushing"]["k_scale"].at[0].multiply(s)})
        eq = equilibrium(mdl, loads.u_at(exc, 4.9))
        traj = simulate(METHODS["lsrt2"], model_system(mdl, exc), eq.r.reshape(-1), jnp.zeros(6 * m), 4.9,
                        1e-3, steps // 10 + 1, every=10)
        return traj.outputs["r"]
    fn = jax.jit(jax.vmap(one))
    t0 = time.perf_counter()
    compiled = fn.lower(scales).compile()
    t_compile = time.perf_counter() - t0
    best = np.inf
    for _ in range(2):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(scales))
        best = min(best, time.perf_counter() - t0)
    topo = model.topology
    return {"model": name, "batch": batch, "steps": steps, "dof": int(topo.n_dof),
            "bodies": int(topo.n_physical_bodies), "modal_coordinates": int(topo.n_modal_coordinates),
            "compile_s": round(t_compile, 1), "run_s": round(best, 3),
            "us_per_variant_step": round(1e6 * best / (batch * steps), 1),
            "variant_steps_per_s": round(batch * steps / best)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 64])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--models", nargs="+",
                    default=["twist_beam", "twist_beam_rigid", "toy_trailing_arm", "double_wishbone"])
    ap.add_argument("--json", default=os.path.join(ROOT, "benchmarks", "results", "flexible_cost.json"))
    args = ap.parse_args()
    rows = []
    for name in args.models:
        for batch in args.batches:
            row = case(name, batch, args.steps)
            rows.append(row)
            print(json.dumps(row), flush=True)
    with open(args.json, "w") as f:
        json.dump({"machine": machine(), "command": " ".join(sys.argv), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
