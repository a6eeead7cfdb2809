"""The flexible beam axle, full forms (on demand): its step response against scipy's Radau and its rigid limit. CI's forms: the eigenfrequencies against the full FE model (tests/kernels/test_flexible_beam.py) and the static deflection and step response against Exudyn's FFRF (tests/validation/test_exudyn_flexible.py)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
from kernels import loads
from kernels.model import build_model
from sweep.axle.fe import Section
from tests.kernels.test_flexible import CROSS, C_MOUNT, K_HUB, K_MOUNT, N_NODES, ORIGIN, STEEL, WHEEL_INERTIA, WHEEL_MASS, _stiffness, beam_fe, beam_tables, full_fe_system  # noqa: F401

pytestmark = pytest.mark.validation


def _step_response(model, T=0.2, method="lsrt2"):
    """Static equilibrium under gravity, then a step of wheel loads at 20 ms
    (left: +2 kN vertical, right: -1 kN longitudinal); LSRT2 at h = 1 ms."""
    from kernels.integrate import simulate
    from kernels.methods import METHODS
    from kernels.statics import equilibrium
    from kernels.system import model_system
    amp = np.zeros((2, 6))
    amp[0, 2], amp[1, 0] = 2000.0, -1000.0
    exc = loads.excitation(np.zeros((2, 6)), [(0.02, 0.0, amp)])
    eq = equilibrium(model, loads.u_at(exc, 0.0))
    assert bool(eq.converged)
    m = model.topology.n_bodies
    n = int(round(T / 1e-3)) + 1
    system = model_system(model, exc)
    traj = jax.jit(lambda r: simulate(METHODS[method], system, r.reshape(-1), jnp.zeros(6 * m), 0.0, 1e-3, n))(eq.r)
    return exc, eq, np.arange(n) * 1e-3, np.asarray(traj.outputs["r"]).reshape(n, m, 6)


def _nmse(a, b):
    return float(np.mean((a - b) ** 2) / np.var(b))


def test_step_response_matches_scipy_radau():
    """The time loop over frame and modal slots: LSRT2 (h = 1 ms) against
    scipy's Radau IIA at rtol 1e-8 on the same equations (kernels.radau),
    wheel-centre and frame channels to NMSE < 1e-3 (the rigid axles' level),
    and the quasi-static part of the first modal coordinates."""
    from kernels import radau
    model = build_model(beam_tables()[0])
    exc, eq, t, r = _step_response(model, T=0.12)
    ref = np.asarray(radau.solve(model, exc, eq.r, jnp.zeros_like(eq.r), t)[1])
    for slot, d in ((1, 2), (1, 0), (2, 0), (2, 2), (0, 4), (0, 2)):
        assert np.ptp(ref[:, slot, d]) > 1e-5
        assert _nmse(r[:, slot, d], ref[:, slot, d]) < 1e-3, (slot, d)
    # the lowest mode (221 Hz) is resolved at 1 ms only in its slow part
    assert _nmse(r[:, 3, 0], ref[:, 3, 0]) < 2e-2
    assert np.ptp(ref[:, 3, 0]) > 1e-5


def test_rigid_limit_reproduces_the_rigid_body():
    """A very stiff section (E, G x 1e4): the flexible beam's equilibrium
    and step response equal those of the same beam as one rigid body to the
    beam's residual compliance."""
    stiff = Section(**{**CROSS.__dict__, "E": 1e4 * STEEL["E"], "G": 1e4 * STEEL["G"]})
    flex = build_model(beam_tables(section=stiff)[0])
    rigid = build_model(beam_tables(section=stiff, flexible=False)[0])
    _, eq_f, _, r_f = _step_response(flex)
    _, eq_r, _, r_r = _step_response(rigid)
    np.testing.assert_allclose(np.asarray(eq_f.r)[:3], np.asarray(eq_r.r), rtol=0, atol=1e-7)
    d_f, d_r = r_f[:, :3] - r_f[:1, :3], r_r - r_r[:1]
    assert np.abs(d_r[:, 1:, :3]).max() > 5e-3                # the wheels move by millimetres
    np.testing.assert_allclose(d_f, d_r, rtol=0, atol=1e-4 * np.abs(d_r).max())
