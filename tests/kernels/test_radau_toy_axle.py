"""The Radau reference on the toy axle against scipy's solve_ivp."""
import os
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml
import kernels  # noqa: F401  (float64)
from kernels import loads
from kernels.radau import RADAU, Radau, solve
from tests.kernels.test_lsrt2 import BU, CDAMP, OMEGA, Y0, _exact_ramp, linear_system
from tests.kernels.test_radau import ROOT  # noqa: F401

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def toy_axle():
    """The toy trailing-arm axle, the longitudinal step at 5 s, from its
    static equilibrium at 4.9 s."""
    from kernels.model import build_model
    from kernels.statics import equilibrium
    from sweep.axle.builder import build_tables
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
