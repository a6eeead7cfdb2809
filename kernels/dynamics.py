"""Equations of motion (method.md eq. 1) and their linearisation (eqs. 4-5).

Computation order (method.md section 1): body kinematics -> marker
kinematics -> force elements (per group, vectorised) -> gravity and wheel
loads -> per-body Newton/Euler -> q. The Jacobians are assembled from
element-local Jacobians (each element differentiated w.r.t. the 12 + 12
states of its own two bodies) into 6x6 body blocks.

Shapes: r, v (m, 6); u (2, 6) = (Fx, Fy, Fz, Mx, My, Mz) at the left and
right wheel centre, vehicle frame [N, N m].
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from kernels import forces
from kernels.rotations import euler_to_matrix, kinematic_matrix_blocks, skew


class Linearisation(NamedTuple):
    """q and its Jacobians at one state (eqs. 4-5); blocks are per body pair."""
    q: jax.Array        # (n,)  n = 6 m
    J_r: jax.Array      # (n, n)
    J_v: jax.Array      # (n, n)
    J_u: jax.Array      # (n, 12)
    K: jax.Array        # (m, 6, 6) blocks of K(r) at the linearisation state


def _states_with_ground(r, v):
    x = jnp.concatenate([r, v], axis=1)
    return jnp.concatenate([x, jnp.zeros((1, 12), x.dtype)], axis=0)


def _wheel_loads(model, r, u):
    """Generalised forces of u on the wheel bodies: (2, 6) rows (F, R^T M)."""
    slots = model.topology.wheel_slots
    R = euler_to_matrix(r[slots, 3:])
    return jnp.concatenate([u[:, :3], jnp.einsum("sji,sj->si", R, u[:, 3:])], axis=1)


def generalised_forces(model, r, v, u):
    """Sum of element, gravity and wheel forces per body, (m, 6): F (vehicle frame), M (body frame)."""
    topo = model.topology
    m = topo.n_bodies
    x = _states_with_ground(r, v)
    Q = jnp.zeros((m + 1, 6), r.dtype)
    for _, fn, params, attr in forces.GROUPS:
        bodies = getattr(topo, attr)
        if len(bodies) == 0:
            continue
        g1, g2 = jax.vmap(fn)(params(model), x[bodies[:, 0]], x[bodies[:, 1]])
        Q = Q.at[bodies[:, 0]].add(g1).at[bodies[:, 1]].add(g2)
    Q = Q[:m]
    Q = Q.at[:, :3].add(model.mass[:, None] * model.gravity[None, :])
    return Q.at[topo.wheel_slots].add(_wheel_loads(model, r, u))


def newton_euler(model, v, Q):
    """Accelerations q from generalised forces (m, 6) -> (m, 6).

    Newton: dv/dt = F / m (vehicle frame). Euler: I dw/dt = M - w x (I w)
    (body frame).
    """
    w = v[:, 3:]
    Iw = jnp.einsum("mij,mj->mi", model.inertia, w)
    wdot = jnp.linalg.solve(model.inertia, (Q[:, 3:] - jnp.cross(w, Iw))[..., None])[..., 0]
    return jnp.concatenate([Q[:, :3] / model.mass[:, None], wdot], axis=1)


def q_fn(model, r, v, u):
    """q(r, v, u) of eq. (1b), shape (m, 6)."""
    return newton_euler(model, v, generalised_forces(model, r, v, u))


def _element_jacobian_blocks(model, r, v):
    """Sum of element-local Jacobians dQ/dx as (m+1, m+1, 6, 12) body blocks, and Q."""
    topo = model.topology
    m = topo.n_bodies
    x = _states_with_ground(r, v)
    blocks = jnp.zeros((m + 1, m + 1, 6, 12), r.dtype)
    Q = jnp.zeros((m + 1, 6), r.dtype)
    for _, fn, params, attr in forces.GROUPS:
        bodies = getattr(topo, attr)
        if len(bodies) == 0:
            continue

        def with_aux(prm, x1, x2, fn=fn):
            g = fn(prm, x1, x2)
            return g, g
        jac, (g1, g2) = jax.vmap(jax.jacfwd(with_aux, argnums=(1, 2), has_aux=True))(
            params(model), x[bodies[:, 0]], x[bodies[:, 1]])
        (d11, d12), (d21, d22) = jac
        i, j = bodies[:, 0], bodies[:, 1]
        blocks = (blocks.at[i, i].add(d11).at[i, j].add(d12)
                  .at[j, i].add(d21).at[j, j].add(d22))
        Q = Q.at[i].add(g1).at[j].add(g2)
    return blocks[:m, :m], Q[:m]


def _blocks_to_dense(blocks):
    m = blocks.shape[0]
    return blocks.transpose(0, 2, 1, 3).reshape(6 * m, 6 * m)


def linearise(model, r, v, u):
    """q, J_r, J_v, J_u (eqs. 4-5) and K(r), from element-local Jacobians."""
    topo = model.topology
    m = topo.n_bodies
    blocks, Q = _element_jacobian_blocks(model, r, v)
    Q = Q.at[:, :3].add(model.mass[:, None] * model.gravity[None, :])
    slots = topo.wheel_slots
    Q = Q.at[slots].add(_wheel_loads(model, r, u))
    # wheel torques R^T M depend on the wheel orientation; u enters linearly
    dW_dr = jax.jacfwd(lambda rw: _wheel_loads(model, r.at[slots].set(rw), u))(r[slots])
    dW_dr = jnp.stack([dW_dr[0, :, 0], dW_dr[1, :, 1]])            # (2, 6, 6)
    blocks = blocks.at[slots, slots, :, :6].add(dW_dr)
    dW_du = jax.jacfwd(lambda uu: _wheel_loads(model, r, uu))(u)    # (2, 6, 2, 6)

    # Newton/Euler: q = Minv (Q - gyro(w)); dq/dx = Minv (dQ/dx - dgyro/dx)
    w = v[:, 3:]
    Iw = jnp.einsum("mij,mj->mi", model.inertia, w)
    I = model.inertia
    dgyro_dw = skew(w) @ I - skew(Iw)
    diag = jnp.arange(m)
    blocks = blocks.at[diag, diag, 3:, 9:].add(-dgyro_dw)
    Minv = jnp.zeros((m, 6, 6), r.dtype)
    Minv = Minv.at[:, :3, :3].set(jnp.eye(3) / model.mass[:, None, None])
    Minv = Minv.at[:, 3:, 3:].set(jnp.linalg.inv(I))
    blocks = jnp.einsum("mij,mnjk->mnik", Minv, blocks)
    q = jnp.einsum("mij,mj->mi", Minv, Q - jnp.concatenate([jnp.zeros_like(w), jnp.cross(w, Iw)], 1))
    J_r = _blocks_to_dense(blocks[..., :6])
    J_v = _blocks_to_dense(blocks[..., 6:])
    J_u = jnp.zeros((m, 6, 2, 6), r.dtype).at[slots].set(
        jnp.einsum("sij,sjtk->sitk", Minv[slots], dW_du)).reshape(6 * m, 12)
    return Linearisation(q.reshape(-1), J_r, J_v, J_u, kinematic_matrix_blocks(r))

