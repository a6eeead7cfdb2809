"""The flexible body against Exudyn's ``ObjectFFRFreducedOrder`` on the same
Craig-Bampton data (validation/ffrf_exudyn.py): the beam of
tests/kernels/test_flexible.py on its two wheels and four bushings, no
gravity, no modal damping (Exudyn's reduced FFRF body has Rayleigh damping
only), constant wheel-centre forces.

Exudyn keeps the first-order inertia couplings of the floating frame that
the kernels drop (docs/flexible_bodies.md) and measures bushing rotations
by Tait-Bryan angles; both differ from ours at second order in the motion,
so the static results agree to 3e-6 of the deflection at 100 N loads and
to 2e-4 at 1 kN (the difference scales with the load squared), and the
step response over 50 ms (both at h = 0.1 ms: our LSRT2, Exudyn's
trapezoidal generalised-alpha) to an NMSE of 6e-6 at 1 kN.
"""
import numpy as np
import pytest

pytest.importorskip("exudyn")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from kernels import loads  # noqa: E402
from kernels.integrate import simulate  # noqa: E402
from kernels.methods import METHODS  # noqa: E402
from kernels.model import build_model  # noqa: E402
from kernels.statics import equilibrium  # noqa: E402
from kernels.system import model_system  # noqa: E402
from tests.kernels.test_flexible import beam_tables  # noqa: E402
from validation import ffrf_exudyn as fx  # noqa: E402

pytestmark = pytest.mark.slow

U = np.array([[300.0, -200.0, 1000.0], [-100.0, 150.0, -500.0]])     # N, wheel-centre forces


@pytest.fixture(scope="module")
def beam():
    tables, rb, (nodes, M, K, _) = beam_tables(gravity=(0.0, 0.0, 0.0), zeta=0.0)
    model = build_model(tables)
    return model, rb, nodes, M, K


def _u6(u3):
    u = np.zeros((2, 6))
    u[:, :3] = u3
    return u


@pytest.mark.parametrize("scale, rtol", [(0.1, 2e-5), (1.0, 1e-3)])
def test_static_deflection_matches_exudyn_ffrf(beam, scale, rtol):
    model, rb, nodes, M, K = beam
    ws = np.asarray(model.topology.wheel_slots)
    d0 = np.asarray(model.r_design)[ws, :3]
    ours = np.asarray(equilibrium(model, jnp.asarray(_u6(scale * U))).r)[ws, :3] - d0
    theirs = fx.static_wheel_positions(model, rb, nodes, M, K, scale * U, np.asarray(model.r_design)[0, :3]) - d0
    assert np.abs(ours).max() > scale * 3e-3                       # millimetres at 1 kN
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=rtol * np.abs(ours).max())


def test_step_response_matches_exudyn_ffrf(beam):
    model, rb, nodes, M, K = beam
    h, T = 1e-4, 0.05
    te, pe = fx.step_response(model, rb, nodes, M, K, U, np.asarray(model.r_design)[0, :3], T, h)
    m = model.topology.n_bodies
    n = int(round(T / h)) + 1
    system = model_system(model, loads.excitation(_u6(U)))
    traj = jax.jit(lambda: simulate(METHODS["lsrt2"], system, model.r_design.reshape(-1), jnp.zeros(6 * m),
                                    0.0, h, n))()
    ws = np.asarray(model.topology.wheel_slots)
    r = np.asarray(traj.outputs["r"]).reshape(n, m, 6)[:, ws, :3]
    d0 = np.asarray(model.r_design)[ws, :3]
    ours, theirs = r[np.round(te / h).astype(int)] - d0, pe - d0
    for s in range(2):
        for d in range(3):
            assert np.ptp(theirs[:, s, d]) > 3e-4                      # every channel moves
            nmse = np.mean((ours[:, s, d] - theirs[:, s, d]) ** 2) / np.mean(theirs[:, s, d] ** 2)
            assert nmse < 2e-5, (s, d, nmse)
