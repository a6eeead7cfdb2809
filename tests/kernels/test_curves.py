"""Tabulated characteristics against scipy's PCHIP and analytic properties."""
import jax
import jax.numpy as jnp
import numpy as np
from scipy.interpolate import PchipInterpolator

import kernels  # noqa: F401
from kernels import curves

X = np.array([-1.57, -1.05, -0.524, -0.393, -0.262, -0.131, -0.052, 0.0, 0.052, 0.262, 0.393, 0.524, 1.05, 1.57])
Y = np.array([-3500, -2790, -1480, -1290, -1110, -670, -180, 0, 110, 230, 270, 330, 580, 700.0])


def ev(tab, x):
    return curves.evaluate(jnp.asarray(tab["breaks"]), jnp.asarray(tab["origin"]),
                           jnp.asarray(tab["coef"]), x)


def test_interior_segments_equal_scipy_pchip_and_knots_are_hit():
    tab = curves.hermite_table(X, Y, n_knots=20)
    ref = PchipInterpolator(X, Y)
    # scipy uses another end-slope rule; segments between interior knots agree
    xs = np.linspace(X[1], X[-2], 801)
    np.testing.assert_allclose([ev(tab, x) for x in xs], ref(xs), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose([ev(tab, x) for x in X], Y, atol=1e-9)


def test_c1_monotone_and_linear_extrapolation():
    tab = curves.hermite_table(X, Y, n_knots=16)
    d = jax.grad(lambda x: ev(tab, x))
    for xk in X:
        np.testing.assert_allclose(d(xk - 1e-9), d(xk + 1e-9), rtol=1e-5, atol=1e-3)
    xs = np.linspace(-3, 3, 2001)
    ys = np.array([ev(tab, x) for x in xs])
    assert np.all(np.diff(ys) > 0), "monotone data must give a monotone curve"
    s_left = (Y[1] - Y[0]) / (X[1] - X[0])
    s_right = (Y[-1] - Y[-2]) / (X[-1] - X[-2])
    np.testing.assert_allclose(ev(tab, -2.0), Y[0] + s_left * (-2.0 - X[0]), rtol=1e-12)
    np.testing.assert_allclose(ev(tab, 2.5), Y[-1] + s_right * (2.5 - X[-1]), rtol=1e-12)


def test_constant_extrapolation_for_stops():
    x = np.array([0.0, 0.002, 0.01, 0.02]) + 0.05
    y = np.array([0.0, 200.0, 1000.0, 2500.0])
    tab = curves.hermite_table(x, y, extrapolate=("constant", "linear"))
    assert ev(tab, 0.0) == 0.0 and ev(tab, 0.0499) == 0.0
    assert ev(tab, 0.0501) > 0.0
    np.testing.assert_allclose(ev(tab, 0.05 + 1e-12), 0.0, atol=1e-6)  # continuous at engagement
