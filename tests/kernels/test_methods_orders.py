"""Integration methods: convergence orders on the linear problem with a ramp input and on the nonlinear rigid body, the error estimates, stiff stability, the generic step against LSRT2 written out, the interface against the time loop, and the orders through load steps and ramp corners of every method and case."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import kernels  # noqa: F401  (float64)
from kernels import integrate
from kernels.lsrt2 import LSRT2
from kernels.ros34pw2 import ROS34PW2
from tests.kernels.test_lsrt2 import BU, CDAMP, OMEGA, Y0, _exact_ramp, linear_system, rigid_body_problem
from tests.kernels.test_methods import EVENT_CASES, FAST_EVENT_CASES, keeps_its_order, METHODS, ORDER, _at_T, _run  # noqa: F401

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", list(METHODS))
@pytest.mark.parametrize("N", [1, 3])
def test_order_on_linear_problem_with_ramp_input(name, N):
    a, b = np.array([1.0, -2.0]), np.array([3.0, 0.5])
    sysm = linear_system(OMEGA, CDAMP, BU, lambda t: jnp.asarray(a) + jnp.asarray(b) * t)
    T = 1.2
    errs = [np.linalg.norm(y - _exact_ramp(T, a, b))
            for y in _at_T(METHODS[name], sysm, Y0, (0.04, 0.02, 0.01, 0.005), T, N)]
    orders = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all(np.abs(orders[1:] - ORDER[name]) < 0.2), (errs, orders)


@pytest.fixture(scope="module")
def rigid_body():
    """tests/kernels/test_lsrt2.py's rigid body on a nonlinear bushing (large
    rotations, K(r) far from identity); Radau reference at rtol 1e-12."""
    return rigid_body_problem()


@pytest.mark.parametrize("name, N", [("ros34pw2", 1), ("ros34pw2", 3), ("linear_implicit_euler", 1),
                                     ("linear_implicit_euler", 3)])
def test_order_on_nonlinear_rigid_body(rigid_body, name, N):
    """ROS34PW2 keeps order 3 with the linearisation reused for 3 steps (a
    W-method); the linear-implicit Euler is of order 1. (LSRT2: test_lsrt2.)"""
    sysm, y0, T, ref = rigid_body
    hs = (4e-3, 2e-3, 1e-3, 5e-4) if name == "ros34pw2" else (1e-4, 5e-5, 2.5e-5, 1.25e-5)
    errs = [np.linalg.norm(y - ref) for y in _at_T(METHODS[name], sysm, y0, hs, T, N)]
    orders = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all(np.abs(orders[1:] - ORDER[name]) < 0.25), (errs, orders)


def test_error_estimate_of_ros34pw2_is_of_embedded_order(rigid_body):
    """The embedded estimate is a local error of the order-2 solution:
    O(h^3), so halving h divides the largest estimate by ~8."""
    sysm, y0, T, _ = rigid_body
    norm = lambda er, ev, r, v: jnp.sqrt(jnp.mean(jnp.concatenate([er, ev]) ** 2))  # noqa: E731
    est = []
    for h in (2e-3, 1e-3, 5e-4):
        traj = jax.jit(integrate.simulate, static_argnums=(0, 1, 6, 7, 8, 10))(
            ROS34PW2, sysm, jnp.asarray(y0[:6]), jnp.asarray(y0[6:]), 0.0, h, int(round(T / h)) + 1, 1, 1,
            None, norm)
        est.append(float(traj.max_error))
    ratios = np.array(est[:-1]) / np.array(est[1:])
    assert np.all((ratios > 6.0) & (ratios < 10.0)), (est, ratios)


def test_stiff_problem_is_stable_for_every_method():
    from scipy.linalg import expm
    Omega = np.diag([1.0, 10.0, 1e4, 1e6, 1e9, 1e12])
    C = np.diag([0.2, 0.5, 100.0, 1e3, 1e5, 1e6])
    J = np.block([[np.zeros((6, 6)), np.eye(6)], [-Omega, -C]])
    sysm = linear_system(Omega, C, np.zeros((6, 2)), lambda t: jnp.zeros(2))
    y0 = np.ones(12)
    exact = expm(J * 2.0) @ y0
    for name, m in METHODS.items():
        ys = _run(m, sysm, y0, 1e-3, 2000)
        assert np.all(np.isfinite(ys)) and np.abs(ys).max() < 1e4, name
        stiff = [4, 5, 10, 11]
        assert np.abs(ys[40:, stiff]).max() < 1e-6, name
        tol = 2e-2 if ORDER[name] == 1 else 5e-3      # slow modes; first order: ~1 % at h = 1 ms
        np.testing.assert_allclose(ys[-1, [0, 1, 6, 7]], exact[[0, 1, 6, 7]], rtol=tol, atol=1e-4,
                                   err_msg=name)


def _old_lsrt2_step(system, lin, lu, q1, r, v, t, h):
    """LSRT2's step written out for s = 2 (eqs. 6-9, Table 1), independently
    of the generic stage loop."""
    GAMMA = 1.0 - 2.0 ** 0.5 / 2.0
    G21, A21, C2, B1, B2 = -GAMMA, 0.5, 0.5, 0.0, 1.0

    def _kmul(K, x):
        m = K.shape[0]
        return jnp.einsum("mij,mj->mi", K, x.reshape(m, 6)).reshape(-1)
    hg = h * GAMMA
    K = lin.K
    S = system.solver
    rate1 = system.rates(r, v)
    du1 = system.du(t)
    rhs1 = q1 + hg * S.ju(lin, du1) + hg * S.jr(lin, rate1)
    dv1 = S.solve(lu, rhs1)
    Kdv1 = _kmul(K, dv1)
    dr1 = rate1 + hg * Kdv1
    r2 = r + h * A21 * dr1
    v2 = v + h * A21 * dv1
    q2 = system.q(r2, v2, system.u(t + C2 * h))
    rate2 = system.rates(r2, v2)
    rhs2 = (q2 + h * G21 * (S.jr(lin, dr1) + S.jv(lin, dv1))
            + hg * S.jr(lin, rate2 + h * G21 * Kdv1))
    dv2 = S.solve(lu, rhs2)
    dr2 = rate2 + hg * _kmul(K, dv2) + h * G21 * Kdv1
    return r + h * (B1 * dr1 + B2 * dr2), v + h * (B1 * dv1 + B2 * dv2)


def test_generic_step_equals_lsrt2_written_out(rigid_body):
    """The generic step with LSRT2's tableau equals LSRT2's step written out
    to 1e-12 (relative) over 200 steps with large rotations and a
    time-varying input term."""
    from kernels.lsrt2 import GAMMA
    sysm, y0, T, _ = rigid_body
    h = 1e-3

    def run(stepper):
        def body(carry, k):
            r, v = carry
            t = k * h
            lin = sysm.linearise(r, v, sysm.u(t))
            lu = sysm.solver.factor(lin, h * GAMMA)
            return stepper(sysm, lin, lu, lin.q, r, v, t, h), None
        (r, v), _ = jax.lax.scan(body, (jnp.asarray(y0[:6]), jnp.asarray(y0[6:])), jnp.arange(200))
        return jnp.concatenate([r, v])
    new = jax.jit(lambda: run(lambda *a: integrate.step(LSRT2, *a)[:2]))()
    old = jax.jit(lambda: run(_old_lsrt2_step))()
    np.testing.assert_allclose(new, old, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", list(METHODS))
def test_simulate_through_the_interface_is_the_time_loop_bitwise(name):
    """``method.simulate(system, ...)`` is ``integrate.simulate(method,
    system, ...)``: identical arrays (samples every 2 steps, linearisation
    reused for 3 steps, an output function, the error norm, and the
    checkpointed variant)."""
    m = METHODS[name]
    a, b = np.array([1.0, -2.0]), np.array([3.0, 0.5])
    sysm = linear_system(OMEGA, CDAMP, BU, lambda t: jnp.asarray(a) + jnp.asarray(b) * t)
    norm = lambda er, ev, r, v: jnp.max(jnp.abs(er)) + jnp.max(jnp.abs(ev))  # noqa: E731
    out = lambda r, v, t: {"x": r[:2] * t, "e": jnp.sum(v ** 2)}  # noqa: E731
    r0, v0 = jnp.asarray(Y0[:6]), jnp.asarray(Y0[6:])
    for ck in (None, 5):
        via_value = jax.jit(lambda r, v: m.simulate(sysm, r, v, 0.1, 0.01, 21, 2, 3, out, norm, ck))(r0, v0)
        via_loop = jax.jit(lambda r, v: integrate.simulate(m, sysm, r, v, 0.1, 0.01, 21, 2, 3, out, norm, ck))(
            r0, v0)
        for x, y in zip(jax.tree_util.tree_leaves(via_value), jax.tree_util.tree_leaves(via_loop)):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        assert (float(via_value.max_error) > 0) == m.has_error_estimate


@pytest.mark.parametrize("name, case", [(n, c) for n in METHODS for c in EVENT_CASES if (n, c) not in FAST_EVENT_CASES])
def test_every_method_keeps_its_order_through_load_steps_and_ramp_corners_all(name, case):
    keeps_its_order(name, case)
