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
from tests.kernels.test_lsrt2 import BU, CDAMP, OMEGA, Y0, _exact_ramp, linear_system

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


