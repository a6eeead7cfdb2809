"""K&C metrics of the nominal axles at their design positions, as a markdown table.

    python benchmarks/kc_metrics.py            # both axles
    python benchmarks/kc_metrics.py multilink

The figures of docs/kc_and_tuning.md section 3 are printed by this script
(kernels.kc.kc_metrics: exact derivatives at the design position, brake
lock 1e8 N m/rad, loaded radius 0.295 m), with the static state under the
longitudinal step's 5 kN wheel loads (ride height, stop clearance) and the
lowest modes (kernels.modes).
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
from sweep.model_builder import build_tables  # noqa: E402


@jax.jit
def _all(model, locked):
    eq = kc.design_position(locked)
    met = kc.kc_metrics(locked, eq)
    u = jnp.zeros((2, 6)).at[:, 2].set(5000.0)
    st = statics.static_equilibrium(model, u)
    md = modes.modes(model, eq.r, kc.design_loads(eq), 12)
    return eq, met, st, md


def report(name):
    model = build_model(build_tables(load_model_config(name)))
    eq, met, st, md = _all(model, kc.lock_brakes(model, 1e8))
    z0 = np.asarray(kc.design_heights(model))
    wc = np.asarray(metrics.wheel_centre_position(model, st.r))
    print(f"\n### {name}\n")
    print(f"design position converged: {bool(eq.converged)}; static state under 5 kN: wheel centre "
          f"{(wc[0, 2] - z0[0]) * 1000:+.2f} mm from design height\n")
    print("| metric | units | left | right |")
    print("|---|---|---|---|")
    for k, (units, _) in kc.METRICS.items():
        v = np.asarray(met[k])
        print(f"| {k} | {units} | {v[0]:.4g} | {v[1]:.4g} |")
    f, z = np.asarray(md.frequency), np.asarray(md.damping_ratio)
    print("\nlowest modes at the design position (Hz / damping ratio): " +
          ", ".join(f"{a:.2f} / {b:.3f}" for a, b in zip(f, z)))


if __name__ == "__main__":
    for n in (sys.argv[1:] or ["double_wishbone", "multilink"]):
        report(n)
