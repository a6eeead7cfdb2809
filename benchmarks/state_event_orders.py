"""Convergence through state events on the double wishbone's pothole: the
largest wheel-centre z error [m] over 0-0.6 s against Radau with the same
root functions (rtol 1e-10), h = 1, 0.5, 0.25 ms, for the stops' switching
law and for the smooth law (kink straddled).

    .venv/bin/python benchmarks/state_event_orders.py switching lsrt2,ros34pw2 [rtol]
    .venv/bin/python benchmarks/state_event_orders.py smooth lsrt2,ros34pw2

One compiled program per method: every h runs the same 2400 steps (the
first 0.6 s are compared, on the 1 ms grid).
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import kernels  # noqa: E402,F401
from event_cost import ROOT, pothole  # noqa: E402
from kernels import build_model, loads, statics  # noqa: E402
from kernels.methods import METHODS  # noqa: E402
from kernels.radau import Radau  # noqa: E402
from kernels.system import model_system  # noqa: E402
from sweep.axle.builder import build_tables, load_model_file  # noqa: E402

N_STEPS = 2400


def main():
    law, methods = sys.argv[1], sys.argv[2].split(",")
    rtol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-10
    path = os.path.join(ROOT, "configs/model/double_wishbone.yaml")
    cfg = load_model_file(path)
    cfg["stop_law"] = law
    model = build_model(build_tables(cfg, source=path))
    exc, t0, _ = pothole()
    eq = statics.static_equilibrium(model, loads.u_at(exc, t0))
    m, w = model.topology.n_bodies, model.topology.wheel_slots
    system = model_system(model, exc)

    def out(r, v, t):
        return r.reshape(m, 6)[w][:, :3]
    r0, v0 = eq.r.reshape(-1), jnp.zeros(6 * m)
    t = time.time()
    ref = Radau(rtol=rtol).simulate(system, r0, v0, t0, 1e-3, 601, 1, 1, out)
    yref = np.asarray(ref.outputs)
    print(f"radau rtol {rtol:g}: {time.time() - t:.0f} s, events {ref.n_events}", flush=True)
    for name in methods:
        method = METHODS[name]
        prog = jax.jit(lambda h: method.simulate(system, r0, v0, t0, h, N_STEPS + 1, 1, 1, out))
        errs = []
        for k, h in ((1, 1e-3), (2, 5e-4), (4, 2.5e-4)):
            t = time.time()
            tr = prog(h)
            y = np.asarray(tr.outputs)[: 600 * k + 1: k]
            errs.append(float(np.max(np.abs(y[..., 2] - yref[..., 2]))))
            ev = None if tr.n_events is None else int(tr.n_events)
            print(f"{name} {law} h = {h * 1e3:g} ms: max |dz| {errs[-1]:.3e} m, events {ev} "
                  f"({time.time() - t:.0f} s)", flush=True)
        print(f"{name} {law} ratios per halving: {errs[0] / errs[1]:.2f} {errs[1] / errs[2]:.2f}", flush=True)


if __name__ == "__main__":
    main()
