"""Equations of motion and the assembled Jacobians (eqs. 1, 4, 5)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels  # noqa: F401
from kernels import forces
from kernels.dynamics import linearise, q_fn
from kernels.rotations import coordinate_rates
from tests.conftest import random_state


@pytest.fixture(scope="module")
def lin_and_oracle(dw_model):
    model = dw_model
    r, v = random_state(model, seed=3)
    u = jnp.asarray(np.random.default_rng(4).normal(0, 1000, (2, 6)))
    lin = jax.jit(linearise)(model, r, v, u)
    # dense oracle: jacfwd of the whole q (allowed as a test oracle only)
    qf = lambda rr, vv, uu: q_fn(model, rr, vv, uu).reshape(-1)  # noqa: E731
    oracle = jax.jit(jax.jacfwd(qf, argnums=(0, 1, 2)))(r, v, u)
    return lin, oracle, qf(r, v, u)


def _rel(a, b):
    return float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b)))


def test_assembled_q_matches_direct_q(lin_and_oracle):
    lin, _, q = lin_and_oracle
    np.testing.assert_allclose(lin.q, q, rtol=1e-12, atol=1e-9 * float(jnp.abs(q).max()))


@pytest.mark.parametrize("which", ["J_r", "J_v", "J_u"])
def test_assembled_jacobians_match_dense_jacfwd(lin_and_oracle, which):
    lin, oracle, _ = lin_and_oracle
    ref = {"J_r": oracle[0], "J_v": oracle[1], "J_u": oracle[2]}[which].reshape(getattr(lin, which).shape)
    assert _rel(getattr(lin, which), ref) < 1e-8
    # and blockwise: every nonzero block is right relative to its own size
    n = ref.shape[0]
    A = np.asarray(getattr(lin, which)); B = np.asarray(ref)
    cols = A.shape[1]
    for i in range(0, n, 6):
        for j in range(0, cols, 6):
            b = B[i:i + 6, j:j + 6]
            if np.abs(b).max() > 0:
                assert np.abs(A[i:i + 6, j:j + 6] - b).max() <= 1e-8 * np.abs(b).max() + 1e-12 * np.abs(B).max()


def test_jacobian_against_finite_differences(dw_model):
    """Independent of autodiff: a few directional derivatives by central differences."""
    model = dw_model
    r, v = random_state(model, seed=5)
    u = jnp.zeros((2, 6)).at[:, 2].set(5000.0)
    lin = jax.jit(linearise)(model, r, v, u)
    qf = jax.jit(lambda rr, vv: q_fn(model, rr, vv, u).reshape(-1))
    rng = np.random.default_rng(6)
    for _ in range(3):
        dr = jnp.asarray(rng.normal(size=r.shape)) * jnp.array([1e-3] * 3 + [1e-3] * 3)
        h = 1e-4
        fd = (qf(r + h * dr, v) - qf(r - h * dr, v)) / (2 * h)
        np.testing.assert_allclose(lin.J_r @ dr.reshape(-1), fd, atol=2e-5 * float(jnp.abs(fd).max()))
        dv = jnp.asarray(rng.normal(size=v.shape)) * 0.1
        fd = (qf(r, v + h * dv) - qf(r, v - h * dv)) / (2 * h)
        np.testing.assert_allclose(lin.J_v @ dv.reshape(-1), fd, atol=2e-6 * float(jnp.abs(fd).max()))


def test_marker_velocity_matches_finite_difference_of_position(dw_model):
    model = dw_model
    r, v = random_state(model, seed=7, da=0.2)
    rdot = coordinate_rates(r, v)
    h = 1e-6
    pos_local = jnp.array([0.1, -0.2, 0.05])
    for b in range(0, model.topology.n_bodies, 5):
        x = jnp.concatenate([r[b], v[b]])
        _, vel, *_ = forces.marker_kinematics(x, pos_local)
        xp = jnp.concatenate([r[b] + h * rdot[b], v[b]])
        xm = jnp.concatenate([r[b] - h * rdot[b], v[b]])
        fd = (forces.marker_kinematics(xp, pos_local)[0] - forces.marker_kinematics(xm, pos_local)[0]) / (2 * h)
        np.testing.assert_allclose(vel, fd, atol=1e-8)


def test_free_body_newton_euler():
    """One body with no elements: gravity only, torque-free Euler equations."""
    from kernels.model import build_model
    I = np.array([[0.3, 0.01, 0.0], [0.01, 0.5, 0.02], [0.0, 0.02, 0.7]])
    tables = {"name": "free", "gravity": [0, 0, -9.81],
              "bodies": [{"index": 1, "name": "b", "mass": 4.0, "inertia": I.tolist(), "position": [0, 0, 0]}],
              "markers": [], "bushings": [], "p2p": [], "wheels": {"left": 1, "right": 1}}
    model = build_model(tables)
    w = np.array([1.0, -2.0, 3.0])
    v = jnp.asarray(np.concatenate([[0.5, 0, 0], w]))[None]
    r = jnp.asarray([[0, 0, 0, 0.3, -0.2, 0.1]])
    q = q_fn(model, r, v, jnp.zeros((2, 6)))
    np.testing.assert_allclose(q[0, :3], [0, 0, -9.81], atol=1e-14)
    np.testing.assert_allclose(q[0, 3:], np.linalg.solve(I, -np.cross(w, I @ w)), rtol=1e-12)


def test_element_loops_give_the_same_linearisation(lin_and_oracle, dw_model):
    """Traced under ``forces.element_loops`` (the generated backend's trace:
    each element group a ``lax.map`` over its elements), the linearisation
    is a loop in the jaxpr and still equals the dense jacfwd oracle."""
    _, oracle, q = lin_and_oracle
    r, v = random_state(dw_model, seed=3)
    u = jnp.asarray(np.random.default_rng(4).normal(0, 1000, (2, 6)))
    fresh = lambda *a: linearise(*a)     # noqa: E731 - a function JAX has not traced yet
    with forces.element_loops():
        jaxpr = jax.make_jaxpr(fresh)(dw_model, r, v, u)
        lin = jax.jit(fresh)(dw_model, r, v, u)
    assert "scan" in str(jaxpr)
    assert "scan" not in str(jax.make_jaxpr(linearise)(dw_model, r, v, u))
    np.testing.assert_allclose(lin.q, q, rtol=1e-12, atol=1e-9 * float(jnp.abs(q).max()))
    for which, ref in zip(("J_r", "J_v", "J_u"), oracle):
        assert _rel(getattr(lin, which), ref.reshape(getattr(lin, which).shape)) < 1e-8
