"""Rotations and K(r) against scipy's rotations and finite differences."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import kernels  # noqa: F401
from kernels.rotations import (coordinate_rates, euler_rate_matrix, euler_to_matrix,
                               matrix_to_euler, rotation_vector, skew)

rng = np.random.default_rng(1)
ANGLES = rng.uniform([-3, -1.2, -3], [3, 1.2, 3], size=(20, 3))


def test_euler_matches_scipy_intrinsic_zyx():
    for a in ANGLES:
        expected = Rotation.from_euler("ZYX", a).as_matrix()
        np.testing.assert_allclose(euler_to_matrix(jnp.asarray(a)), expected, atol=1e-14)


def test_matrix_to_euler_round_trip():
    for a in ANGLES:
        np.testing.assert_allclose(matrix_to_euler(euler_to_matrix(jnp.asarray(a))), a, atol=1e-12)


def test_euler_rates_reproduce_body_angular_velocity():
    """dR/dt = R skew(w_body) when the angles move with rates H(a) w (eq. 1a)."""
    eps = 1e-6
    for a in ANGLES:
        a = jnp.asarray(a)
        w = jnp.asarray(rng.normal(size=3))
        rates = euler_rate_matrix(a) @ w
        dR = (euler_to_matrix(a + eps * rates) - euler_to_matrix(a - eps * rates)) / (2 * eps)
        np.testing.assert_allclose(dR, euler_to_matrix(a) @ skew(w), atol=1e-8)


def test_coordinate_rates_is_K_times_v():
    r = jnp.asarray(np.hstack([rng.normal(size=(4, 3)), ANGLES[:4]]))
    v = jnp.asarray(rng.normal(size=(4, 6)))
    out = coordinate_rates(r, v)
    np.testing.assert_allclose(out[:, :3], v[:, :3])
    for i in range(4):
        np.testing.assert_allclose(out[i, 3:], euler_rate_matrix(r[i, 3:]) @ v[i, 3:], rtol=1e-13)


@pytest.mark.parametrize("scale", [0.0, 1e-9, 1e-5, 0.3, 2.5])
def test_rotation_vector_matches_scipy_and_is_smooth(scale):
    axis = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    rv = axis * scale
    R = Rotation.from_rotvec(rv).as_matrix()
    np.testing.assert_allclose(rotation_vector(jnp.asarray(R)), rv, atol=1e-12)
    # derivative w.r.t. the matrix entries is finite and matches central differences
    J = jax.jacfwd(rotation_vector)(jnp.asarray(R))
    assert np.all(np.isfinite(J))
    if scale > 1e-4:
        eps = 1e-7
        E = np.zeros((3, 3)); E[0, 1] = 1.0
        fd = (rotation_vector(jnp.asarray(R + eps * E)) - rotation_vector(jnp.asarray(R - eps * E))) / (2 * eps)
        np.testing.assert_allclose(J[:, 0, 1], fd, atol=1e-6)
