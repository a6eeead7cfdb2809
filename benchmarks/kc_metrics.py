"""K&C metrics of the nominal axles at their design positions, as a markdown table.

    python benchmarks/kc_metrics.py            # the four axles with K&C figures in the docs
    python benchmarks/kc_metrics.py multilink

The figures of docs/kc_and_tuning.md section 3 are printed by this script
(kernels.kc.kc_metrics: exact derivatives at the design position, brake
lock 1e8 N m/rad, loaded radius 0.295 m; the leaf-spring axle 0.347 m,
its tyre), with the static state under the design wheel load (the
longitudinal step's 5 kN; the leaf-spring axle's 7108 N) and the lowest
modes (kernels.modes).
"""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import kernels  # noqa: E402,F401
from kernels import kc, metrics, modes, statics  # noqa: E402
from sweep.align import load_model_config  # noqa: E402
from kernels.model import build_model  # noqa: E402
from sweep.axle.builder import build_tables  # noqa: E402


LOADED_RADIUS = {"leaf_spring_axle": 0.347}      # m: Chrono's UAZ tyre under 7.1 kN


@jax.jit
def _all(model, locked, wheel_load, radius):
    eq = kc.design_position(locked)
    met = kc.kc_metrics(locked, eq, loaded_radius=radius)
    u = jnp.zeros((2, 6)).at[:, 2].set(wheel_load)
    st = statics.static_equilibrium(model, u)
    md = modes.modes(model, eq.r, kc.design_loads(eq), 12)
    return eq, met, st, md


def report(name):
    cfg = load_model_config(name)
    model = build_model(build_tables(cfg))
    load = float((cfg.get("alignment") or {}).get("wheel_load", 5000.0))
    eq, met, st, md = _all(model, kc.lock_brakes(model, 1e8), load, LOADED_RADIUS.get(name, kc.DEFAULT_LOADED_RADIUS))
    z0 = np.asarray(kc.design_heights(model))
    wc = np.asarray(metrics.wheel_centre_position(model, st.r))
    print(f"\n### {name}\n")
    print(f"design position converged: {bool(eq.converged)}; static state under {load:.0f} N: wheel centre "
          f"{(wc[0, 2] - z0[0]) * 1000:+.2f} mm from design height\n")
    print("| metric | units | left | right |")
    print("|---|---|---|---|")
    for k, (units, _) in kc.METRICS.items():
        v = np.asarray(met[k])
        print(f"| {k} | {units} | {v[0]:.4g} | {v[1]:.4g} |")
    for k, (units, _) in kc.AXLE_METRICS.items():
        print(f"| {k} | {units} | {float(met[k]):.4g} (axle) | |")
    f, z = np.asarray(md.frequency), np.asarray(md.damping_ratio)
    print("\nlowest modes at the design position (Hz / damping ratio): " +
          ", ".join(f"{a:.2f} / {b:.3f}" for a, b in zip(f, z)))


if __name__ == "__main__":
    for n in (sys.argv[1:] or ["double_wishbone", "multilink", "leaf_spring_axle", "macpherson"]):
        report(n)
