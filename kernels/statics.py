"""Static equilibrium: solve q(r, 0, u0) = 0 by Newton with the assembled J_r.

Every run starts from the static equilibrium (method.md section 2, last
implementation note). The iteration is a ``lax.while_loop`` so that it jits
and vmaps over variants; it reports convergence instead of raising, so that
a variant that fails is flagged rather than stopping a batch.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from kernels.dynamics import linearise


class Equilibrium(NamedTuple):
    r: jax.Array           # (m, 6)
    converged: jax.Array   # bool
    iterations: jax.Array  # int
    residual: jax.Array    # max |generalised force| [N or N m]


def generalised_residual(model, q):
    """Max |M q| over all bodies and directions [N, N m] for q of shape (m, 6)."""
    F = q[:, :3] * model.mass[:, None]
    M = jnp.einsum("mij,mj->mi", model.inertia, q[:, 3:])
    return jnp.max(jnp.abs(jnp.concatenate([F, M], 1)))


def static_equilibrium(model, u, r_start=None, tol=1e-6, max_iter=60,
                       max_translation=0.02, max_rotation=0.1):
    """Newton iteration for q(r, 0, u) = 0.

    Args:
      u: (2, 6) wheel-centre loads [N, N m].
      tol: convergence limit on the largest generalised force residual [N, N m].
      max_translation, max_rotation: per-iteration step limits [m, rad]
        (a damped Newton step far from equilibrium; inactive near it).
    """
    m = model.topology.n_bodies
    r0 = model.r_design if r_start is None else r_start
    v0 = jnp.zeros_like(r0)

    def residual_and_step(r):
        lin = linearise(model, r, v0, u)
        res = generalised_residual(model, lin.q.reshape(m, 6))
        dr = -jnp.linalg.solve(lin.J_r, lin.q).reshape(m, 6)
        scale = jnp.minimum(1.0, jnp.minimum(
            max_translation / (jnp.max(jnp.abs(dr[:, :3])) + 1e-300),
            max_rotation / (jnp.max(jnp.abs(dr[:, 3:])) + 1e-300)))
        return res, dr * scale

    def cond(state):
        r, it, res, dr = state
        return (res > tol) & (it < max_iter) & jnp.isfinite(res)

    def body(state):
        r, it, _, dr = state
        r = r + dr
        res, dr = residual_and_step(r)
        return r, it + 1, res, dr

    res0, dr0 = residual_and_step(r0)
    r, it, res, _ = jax.lax.while_loop(cond, body, (r0, jnp.asarray(0), res0, dr0))
    return Equilibrium(r, (res <= tol) & jnp.all(jnp.isfinite(r)), it, res)
