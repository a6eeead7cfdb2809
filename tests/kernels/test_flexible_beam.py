"""The flexible beam against the full FE model's eigenfrequencies, its rigid limit, and its step response against scipy's Radau."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.linalg
from kernels import loads
from kernels.dynamics import linearise, q_fn
from kernels.model import ModelError, build_model
from sweep.flexible import BeamFrame, FlexibleBodyError, Section, assemble, reduce
from sweep.flexible.tables import body_tables
from tests.kernels.test_flexible import CROSS, C_MOUNT, K_HUB, K_MOUNT, N_NODES, ORIGIN, STEEL, WHEEL_INERTIA, WHEEL_MASS, _stiffness, beam_fe, beam_tables, full_fe_system  # noqa: F401

pytestmark = pytest.mark.slow


def test_eigenfrequencies_match_the_full_fe_model():
    """Undamped natural frequencies of beam + wheels on their bushings: the
    kernels' state matrix against the full FE model's generalised
    eigenproblem, within 1 % up to half the highest kept fixed-interface
    frequency (the cutoff rule of docs/flexible_bodies.md)."""
    tables, rb, (nodes, M, K, ends) = beam_tables(gravity=(0.0, 0.0, 0.0), zeta=0.0, n_fixed=12)
    for b in tables["bushings"]:
        b["damping"] = [0.0] * 6
    model = build_model(tables)
    _, _, lin = _stiffness(model)
    # x'' = J_r K x (Euler-angle coordinates: K maps body rates to angle rates)
    Kd = scipy.linalg.block_diag(*np.asarray(lin.K))
    w2_kernels = np.sort(np.linalg.eigvals(-np.asarray(lin.J_r) @ Kd).real)
    Mt, Kt = full_fe_system(M, K, ends)
    w2_fe = scipy.linalg.eigh(Kt, Mt, eigvals_only=True)
    f_k, f_fe = np.sqrt(w2_kernels) / (2 * np.pi), np.sqrt(w2_fe) / (2 * np.pi)
    below = f_fe < 0.5 * rb.fixed_interface_frequencies_hz.max()
    assert below.sum() >= 15
    np.testing.assert_allclose(f_k[:below.sum()], f_fe[below], rtol=1e-2)
    # the modes of the beam on its bushings (below the first elastic mode of
    # the free beam, 221 Hz) are far closer than that
    low = f_fe < 0.5 * rb.frequencies_hz[0]
    assert low.sum() >= 12
    np.testing.assert_allclose(f_k[:low.sum()], f_fe[low], rtol=1e-4)


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
