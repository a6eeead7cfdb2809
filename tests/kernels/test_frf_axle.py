"""The frequency response of a real axle: its low-frequency end against
finite differences of the static equilibrium (kernels.statics under a
changed wheel load), and a stepped-sine run of the nonlinear equations of
motion: the toy axle at its static equilibrium under
3.5 kN per wheel, a small harmonic vertical force at the left wheel centre
(20 N, the linear range), integrated by scipy's Radau (rtol 1e-9; an
integrator independent of the project's) until the transient has died out;
amplitude and phase of the steady state, fitted over whole periods by least
squares, equal kernels.frf's receptance and toe response at three
frequencies (below, near and above the wheel's resonance) to 0.5 % / 0.5 deg."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate

import kernels  # noqa: F401  (float64)
from kernels import frf, metrics, statics
from kernels.dynamics import q_fn
from kernels.model import build_model
from kernels.rotations import coordinate_rates
from sweep.axle.builder import build_tables
from tests.conftest import load_model_cfg

pytestmark = pytest.mark.slow

AMPLITUDE = 20.0                      # N: small against the 3.5 kN preload, linear range
FREQUENCIES = (2.0, 9.0, 25.0)        # Hz


def test_stepped_sine_equals_the_frequency_response():
    model = build_model(build_tables(load_model_cfg("toy_trailing_arm")))
    m = model.topology.n_bodies
    n = 6 * m
    u0 = jnp.zeros((2, 6)).at[:, 2].set(3500.0)
    st = jax.jit(statics.static_equilibrium)(model, u0, tol=1e-8)
    assert bool(st.converged)
    res = jax.jit(lambda r, w: frf.frequency_response(model, r, u0, w, [frf.INPUTS.index("left_fz")]))(
        st.r, 2 * np.pi * np.asarray(FREQUENCIES))
    wheel = int(model.topology.wheel_slots[0])

    @jax.jit
    def rhs(t, y, w):
        r, v = y[:n].reshape(m, 6), y[n:].reshape(m, 6)
        u = u0.at[0, 2].add(AMPLITUDE * jnp.sin(w * t))
        return jnp.concatenate([coordinate_rates(r, v, model.topology.modal_slots).reshape(-1),
                                q_fn(model, r, v, u).reshape(-1)])
    jac = jax.jit(jax.jacfwd(rhs, argnums=1))
    outputs = jax.jit(lambda y: jnp.concatenate([y[:n].reshape(m, 6)[wheel, 2:3],
                                                 metrics.toe_camber(model, y[:n].reshape(m, 6))[0][:1]]))
    y0 = np.concatenate([np.asarray(st.r).reshape(-1), np.zeros(n)])
    base = np.asarray(outputs(jnp.asarray(y0)))
    for k, f in enumerate(FREQUENCIES):
        w = 2 * np.pi * f
        periods = 8
        t_settle = max(1.5, 10 / f)
        t_end = t_settle + periods / f
        t_eval = np.linspace(t_settle, t_end, 40 * periods + 1)
        sol = scipy.integrate.solve_ivp(lambda t, y: np.asarray(rhs(t, y, w)), (0.0, t_end), y0, method="Radau",
                                        jac=lambda t, y: np.asarray(jac(t, y, w)), t_eval=t_eval,
                                        rtol=1e-9, atol=np.r_[np.full(n, 1e-11), np.full(n, 1e-9)])
        assert sol.success, sol.message
        out = np.array([np.asarray(outputs(jnp.asarray(y))) for y in sol.y.T]) - base
        # least squares: out(t) = a sin(wt) + b cos(wt) + c  ->  complex amplitude (a + i b) per unit force
        A = np.column_stack([np.sin(w * t_eval), np.cos(w * t_eval), np.ones_like(t_eval)])
        coef, *_ = np.linalg.lstsq(A, out, rcond=None)
        measured = (coef[0] + 1j * coef[1]) / AMPLITUDE
        predicted = np.array([complex(res.wheel_centre[k, 0, 2, 0]), complex(res.toe_camber[k, 0, 0, 0])])
        for name, got, want in zip(("wheel centre z", "toe"), measured, predicted):
            assert abs(got - want) <= 0.005 * abs(want), (f, name, got, want)
            assert abs(np.degrees(np.angle(got / want))) < 0.5, (f, name, got, want)


@pytest.fixture(scope="module")
def toy():
    model = build_model(build_tables(load_model_cfg("toy_trailing_arm")))
    u = jnp.zeros((2, 6)).at[:, 2].set(3500.0)
    st = jax.jit(statics.static_equilibrium)(model, u)
    assert bool(st.converged)
    return model, u, st.r


def test_low_frequency_limit_equals_the_static_compliance_by_finite_differences(toy):
    model, u, r = toy
    inputs = [frf.INPUTS.index(n) for n in ("left_fx", "left_fy", "left_fz")]
    low = np.asarray(jax.jit(lambda r: frf.frequency_response(model, r, u, jnp.array([2 * np.pi * 1e-3]),
                                                              inputs).wheel_centre)(r))[0]
    stat = np.asarray(jax.jit(lambda r: frf.static_compliance(model, r, u, inputs))(r))
    np.testing.assert_allclose(low.real, stat, rtol=1e-5, atol=1e-12)
    solve = jax.jit(lambda uu: statics.static_equilibrium(model, uu, r_start=r, tol=1e-9).r)
    wheel = model.topology.wheel_slots
    for j, i in enumerate(inputs):
        h = 10.0                                                      # N
        du = jnp.zeros(12).at[i].set(h).reshape(2, 6)
        fd = (np.asarray(solve(u + du))[wheel, :3] - np.asarray(solve(u - du))[wheel, :3]) / (2 * h)
        np.testing.assert_allclose(stat[:, :, j], fd, rtol=1e-4, atol=1e-10)
