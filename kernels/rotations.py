"""Rotations: z-y'-x'' Euler angles, the kinematic matrix K(r), rotation vectors.

Conventions (method.md section 1): body coordinates
``r_l = (x, y, z, a_z, a_y', a_x'')``; the rotation matrix from body to
vehicle frame is ``R = Rz(a_z) Ry(a_y') Rx(a_x'')``. Generalised speeds
``v_l = (vx, vy, vz, wx, wy, wz)``: translational velocity in the vehicle
frame, angular velocity in the body frame. Angles in rad, rates in rad/s.
"""
import jax.numpy as jnp
import numpy as np


# Small dense products written as unrolled multiply-adds: under vmap over
# thousands of variants, XLA turns these into flat elementwise loops, while
# dot_general on 6x6 operands runs one tiny matrix product per batch element
# (measured ~8x slower, BENCHMARKS.md). The same holds inside jacfwd, whose
# tangents are one more batch axis: unrolled products in the force elements
# cut the element Jacobians by 25 % (batch 256) and the single-variant
# linearisation by 24 %.
def mv(A, x):
    """A @ x over the last two / last axis (any leading batch axes)."""
    return sum(A[..., :, j] * x[..., j, None] for j in range(A.shape[-1]))


def mtv(A, x):
    """A^T @ x over the last two / last axis."""
    return sum(A[..., j, :] * x[..., j, None] for j in range(A.shape[-2]))


def mm(A, B):
    """A @ B over the last two axes."""
    return sum(A[..., :, j, None] * B[..., j, None, :] for j in range(A.shape[-1]))


def mtm(A, B):
    """A^T @ B over the last two axes."""
    return sum(A[..., j, :, None] * B[..., j, None, :] for j in range(A.shape[-2]))


def skew(w):
    """Cross-product matrix: ``skew(w) @ x == cross(w, x)``."""
    z = jnp.zeros_like(w[..., 0])
    return jnp.stack([
        jnp.stack([z, -w[..., 2], w[..., 1]], -1),
        jnp.stack([w[..., 2], z, -w[..., 0]], -1),
        jnp.stack([-w[..., 1], w[..., 0], z], -1),
    ], -2)


def euler_to_matrix(angles):
    """Rotation matrix body -> vehicle of z-y'-x'' angles ``(a_z, a_y', a_x'')`` [rad].
    A numpy array in gives numpy out (model building: no JAX dispatch)."""
    xp = np if isinstance(angles, np.ndarray) else jnp
    az, ay, ax = angles[..., 0], angles[..., 1], angles[..., 2]
    cz, sz = xp.cos(az), xp.sin(az)
    cy, sy = xp.cos(ay), xp.sin(ay)
    cx, sx = xp.cos(ax), xp.sin(ax)
    return xp.stack([
        xp.stack([cz * cy, cz * sy * sx - sz * cx, cz * sy * cx + sz * sx], -1),
        xp.stack([sz * cy, sz * sy * sx + cz * cx, sz * sy * cx - cz * sx], -1),
        xp.stack([-sy, cy * sx, cy * cx], -1),
    ], -2)


def matrix_to_euler(R):
    """Inverse of :func:`euler_to_matrix` for |a_y'| < pi/2 (numpy or jax arrays)."""
    az = jnp.arctan2(R[..., 1, 0], R[..., 0, 0])
    ay = jnp.arcsin(jnp.clip(-R[..., 2, 0], -1.0, 1.0))
    ax = jnp.arctan2(R[..., 2, 1], R[..., 2, 2])
    return jnp.stack([az, ay, ax], -1)


def euler_rate_matrix(angles):
    """Rotational block of K(r) (eq. 1a): Euler rates = H(angles) @ omega_body.

    ``d/dt (a_z, a_y', a_x'') = H @ (wx, wy, wz)`` with omega in the body
    frame. Singular at a_y' = +-pi/2 (never reached by suspension parts).
    """
    ay, ax = angles[..., 1], angles[..., 2]
    cy, sy = jnp.cos(ay), jnp.sin(ay)
    cx, sx = jnp.cos(ax), jnp.sin(ax)
    z = jnp.zeros_like(ax)
    o = jnp.ones_like(ax)
    return jnp.stack([
        jnp.stack([z, sx / cy, cx / cy], -1),
        jnp.stack([z, cx, -sx], -1),
        jnp.stack([o, sx * sy / cy, cx * sy / cy], -1),
    ], -2)


def kinematic_matrix_blocks(r, modal=()):
    """K(r) of eq. (1a) as per-body 6x6 blocks, shape (m, 6, 6) for r of shape (m, 6).

    ``modal``: static indices of modal slots (kernels.flexible), whose
    coordinates are modal amplitudes with dr/dt = v (K the identity)."""
    m = r.shape[0]
    K = jnp.zeros((m, 6, 6), r.dtype)
    K = K.at[:, :3, :3].set(jnp.eye(3, dtype=r.dtype))
    K = K.at[:, 3:, 3:].set(euler_rate_matrix(r[:, 3:]))
    if len(modal):
        K = K.at[np.asarray(modal)].set(jnp.eye(6, dtype=r.dtype))
    return K


def coordinate_rates(r, v, modal=()):
    """dr/dt = K(r) v (eq. 1a), for r, v of shape (m, 6); ``modal`` as in
    :func:`kinematic_matrix_blocks`."""
    rot = mv(euler_rate_matrix(r[:, 3:]), v[:, 3:])
    rates = jnp.concatenate([v[:, :3], rot], axis=1)
    if len(modal):
        idx = np.asarray(modal)
        rates = rates.at[idx].set(v[idx])
    return rates


def rotation_matrix(theta):
    """Rotation matrix of a rotation vector theta (3,) [rad] (Rodrigues),
    with a Taylor branch at small angles so that value and derivatives are
    finite at theta = 0."""
    t2 = jnp.sum(theta * theta)
    small = t2 < 1e-8
    t = jnp.sqrt(jnp.where(small, 1.0, t2))
    a = jnp.where(small, 1.0 - t2 / 6.0, jnp.sin(t) / t)
    b = jnp.where(small, 0.5 - t2 / 24.0, (1.0 - jnp.cos(t)) / jnp.where(small, 1.0, t2))
    S = skew(theta)
    return jnp.eye(3, dtype=theta.dtype) + a * S + b * (S @ S)


def rotation_vector(R, eps=1e-6):
    """Rotation vector (axis * angle, rad) of a rotation matrix; smooth at identity.

    Uses ``angle = atan2(|s|, c)`` with ``s = vee(R - R^T)/2``,
    ``c = (tr R - 1)/2`` and a Taylor branch near zero so that value and
    derivatives are finite at the identity (needed for autodiff Jacobians
    at the design position). Valid for angles below pi.
    """
    s = 0.5 * jnp.stack([R[..., 2, 1] - R[..., 1, 2],
                         R[..., 0, 2] - R[..., 2, 0],
                         R[..., 1, 0] - R[..., 0, 1]], -1)
    c = 0.5 * (R[..., 0, 0] + R[..., 1, 1] + R[..., 2, 2] - 1.0)
    ns2 = jnp.sum(s * s, -1)
    small = ns2 < eps * eps
    ns = jnp.sqrt(jnp.where(small, 1.0, ns2))
    # angle/sin(angle) with sin(angle) = |s|; Taylor: 1 + angle^2/6 ~ 1 + |s|^2/6
    factor = jnp.where(small, 1.0 + ns2 / 6.0, jnp.arctan2(ns, c) / ns)
    return s * factor[..., None]


def _dexp_gamma(t2):
    """gamma(theta) = (1 - (theta/2) cot(theta/2)) / theta^2 of t2 = theta^2.

    Series 1/12 + t2/720 + t2^2/30240 + t2^3/1209600 + t2^4/47900160 below
    t2 = 1e-2 (truncation < 1e-17 relative); above, the closed form, whose
    cancellation costs at most ~1e3 eps relative on gamma there (gamma theta^2
    is then >= 1e-3 of the result: round-off level in float32 and float64).
    The double ``where`` keeps value and derivatives finite at theta = 0.
    Valid for theta < 2 pi (used for theta < pi).
    """
    small = t2 < 1e-2
    ts = jnp.where(small, 1.0, t2)
    h = 0.5 * jnp.sqrt(ts)
    exact = (1.0 - h / jnp.tan(h)) / ts
    series = 1.0 / 12.0 + t2 * (1.0 / 720.0 + t2 * (1.0 / 30240.0 + t2 * (1.0 / 1209600.0
                                                                          + t2 / 47900160.0)))
    return jnp.where(small, series, exact)


def left_jacobian_inv_T_apply(theta, f):
    """``Jl^{-T}(theta) @ f`` for a rotation vector theta [rad] and a 3-vector f.

    Jl is the left Jacobian of SO(3) (for R = exp([theta]): a left increment
    exp([eta]) R has rotation vector theta + Jl^{-1}(theta) eta);
    ``Jl^{-1} = I - [theta]/2 + gamma [theta]^2`` and so
    ``Jl^{-T} f = f + theta x f / 2 + gamma theta x (theta x f)`` with
    gamma = (1 - (theta/2) cot(theta/2)) / theta^2 (:func:`_dexp_gamma`,
    series near 0). Equals ``Rrel Jr^{-T} f`` and ``Jr^{-1} f``. The map from
    the generalised force conjugate to theta (a bushing's torque
    characteristic) to the torque on a body (method.md section 1,
    kernels.forces.bushing_element). dtype follows the inputs.
    """
    t2 = jnp.sum(theta * theta, -1)
    g = _dexp_gamma(t2)
    tf = jnp.cross(theta, f)
    return f + 0.5 * tf + g[..., None] * jnp.cross(theta, tf)
