"""Linear algebra of one LSRT2 step: the coefficient matrix of eq. (11), its
factorisation, and the Jacobian products of eqs. (7)-(8).

A *solver* bundles these operations for one storage format of the
linearisation, so that the integrator (:mod:`kernels.lsrt2`) is written once:

``factor(lin, h) -> fac``   A = E - h g J_v - (h g)^2 J_r K  (eq. 11), factorised
``solve(fac, b) -> x``      A x = b (both stages reuse one factorisation)
``jr(lin, x)``, ``jv(lin, x)``, ``ju(lin, du)``   J_r x, J_v x, J_u du

``DENSE`` works on the dense (n, n) Jacobians of
:func:`kernels.dynamics.linearise` with a partially pivoted LU.
"""
from typing import Callable, NamedTuple

import jax.numpy as jnp
from jax.scipy.linalg import lu_factor, lu_solve

GAMMA = 1.0 - 2.0 ** 0.5 / 2.0   # g11 = g22 of LSRT2 (Table 1)


class Solver(NamedTuple):
    name: str
    factor: Callable
    solve: Callable
    jr: Callable
    jv: Callable
    ju: Callable


def block_diag_matmul(J, K):
    """J @ blockdiag(K) for J (n, n) and K blocks (m, 6, 6)."""
    n = J.shape[0]
    m = K.shape[0]
    return jnp.einsum("nmj,mjk->nmk", J.reshape(n, m, 6), K).reshape(n, n)


def dense_coefficient_matrix(lin, h):
    """A = E - h g J_v - (h g)^2 J_r K   (eq. 11), dense (n, n)."""
    n = lin.J_v.shape[0]
    hg = h * GAMMA
    return jnp.eye(n, dtype=lin.J_v.dtype) - hg * lin.J_v - hg * hg * block_diag_matmul(lin.J_r, lin.K)


DENSE = Solver(
    name="dense",
    factor=lambda lin, h: lu_factor(dense_coefficient_matrix(lin, h)),
    solve=lambda fac, b: lu_solve(fac, b),
    jr=lambda lin, x: lin.J_r @ x,
    jv=lambda lin, x: lin.J_v @ x,
    ju=lambda lin, du: lin.J_u @ du,
)
