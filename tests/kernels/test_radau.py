"""The Radau reference as a method value (kernels/radau.py).

Oracles: the matrix exponential of a linear problem with a ramp input (the
value on an analytic System), and kernels.radau.solve - the reference the
NMSE figures are measured against - on the toy axle under a step load: the
value integrates the same equations from the System interface (its own
Jacobian by forward differentiation, the split at the System's switching
times), so both agree to the solver's tolerance. A failed solve gives NaN
outputs, not an exception.
"""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml

import kernels  # noqa: F401  (float64)
from kernels import loads
from kernels.radau import RADAU, Radau, solve
from test_lsrt2 import BU, CDAMP, OMEGA, Y0, _exact_ramp, linear_system

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root


def test_value_on_a_linear_system_matches_the_matrix_exponential():
    a, b = np.array([1.0, -2.0]), np.array([3.0, 0.5])
    sysm = linear_system(OMEGA, CDAMP, BU, lambda t: jnp.asarray(a) + jnp.asarray(b) * t)
    meth = Radau(rtol=1e-11, atol_coordinates=1e-12, atol_speeds=1e-12)
    traj = meth.simulate(sysm, Y0[:6], Y0[6:], 0.0, 0.1, 13, every=1,
                         output_fn=lambda r, v, t: {"y": jnp.concatenate([r, v]), "t": t})
    np.testing.assert_array_equal(traj.t, np.arange(13) * 0.1)
    np.testing.assert_array_equal(traj.outputs["t"], traj.t)
    exact = np.stack([_exact_ramp(t, a, b) for t in np.arange(13) * 0.1])
    np.testing.assert_allclose(traj.outputs["y"], exact, rtol=0, atol=1e-8 * np.abs(exact).max())
    np.testing.assert_array_equal(np.concatenate([traj.r, traj.v]), traj.outputs["y"][-1])
    assert float(traj.max_error) == 0.0


def test_a_failed_solve_gives_nan_outputs_not_an_exception():
    """An input that turns NaN at t = 0.05 s: scipy cannot step past it."""
    sysm = linear_system(OMEGA, CDAMP, BU, lambda t: jnp.where(t > 0.05, jnp.nan, 0.0) * jnp.ones(2))
    traj = RADAU.simulate(sysm, Y0[:6], Y0[6:], 0.0, 0.02, 6,
                          output_fn=lambda r, v, t: {"r": r, "n": jnp.sum(v > 0)})
    assert np.all(np.isnan(traj.outputs["r"])) and np.all(np.isnan(traj.r)) and np.all(np.isnan(traj.v))
    assert traj.outputs["n"].shape == (6,)
    with pytest.raises(jax.errors.TracerArrayConversionError):      # not jittable
        jax.jit(lambda r: RADAU.simulate(sysm, r, Y0[6:], 0.0, 0.02, 6).r)(jnp.asarray(Y0[:6]))


@pytest.fixture(scope="module")
def toy_axle():
    """The toy trailing-arm axle, the longitudinal step at 5 s, from its
    static equilibrium at 4.9 s."""
    from kernels.model import build_model
    from kernels.statics import equilibrium
    from sweep.model_builder import build_tables
    with open(os.path.join(ROOT, "configs", "model", "toy_trailing_arm.yaml")) as f:
        model = build_model(build_tables(yaml.safe_load(f)))
    u0 = np.zeros((2, 6))
    u0[:, 2] = 5000.0
    amp = np.zeros((2, 6))
    amp[:, 0] = -2500.0
    exc = loads.excitation(u0, [(5.0, 0.0, amp)])
    return model, exc, equilibrium(model, loads.u_at(exc, 4.9)).r


def test_value_on_the_toy_axle_matches_solve(toy_axle):
    """Across the load step (4.9-5.05 s, samples every 10 ms): the value
    (System interface) against kernels.radau.solve (the model directly)."""
    from kernels.system import model_system
    model, exc, r_eq = toy_axle
    sysm = model_system(model, exc)
    assert sysm.switch_times == (5.0,)
    h, every, n = 1e-3, 10, 16
    traj = RADAU.simulate(sysm, r_eq.reshape(-1), jnp.zeros(r_eq.size), 4.9, h, n, every)
    t_eval = 4.9 + np.arange(n) * every * h
    t, r, v = solve(model, exc, r_eq, jnp.zeros_like(r_eq), t_eval)
    np.testing.assert_array_equal(traj.t, t)
    R, V = np.asarray(traj.outputs["r"]), np.asarray(traj.outputs["v"])
    assert np.all(np.isfinite(R)) and np.all(np.isfinite(V))
    moved = np.abs(r - r[0]).max()
    assert moved > 1e-4                                  # the step moves the axle
    np.testing.assert_allclose(R, r.reshape(n, -1), rtol=0, atol=1e-6 * moved)
    np.testing.assert_allclose(V, v.reshape(n, -1), rtol=0, atol=1e-5 * np.abs(v).max())
    np.testing.assert_array_equal(R[0], np.asarray(r_eq).reshape(-1))
