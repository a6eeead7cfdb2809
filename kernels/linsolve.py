"""Linear algebra of one linear-implicit step (LSRT2 and the other Rosenbrock
methods): the coefficient matrix of eq. (11), its factorisation, and the
Jacobian products of eqs. (7)-(8).

A *solver* bundles these operations for one storage format of the
linearisation, so that the generic step and time loop
(:func:`kernels.integrate.step`, :func:`kernels.integrate.simulate`) are
written once for every method and every format:

``factor(lin, hg) -> fac``  A = E - hg J_v - hg^2 J_r K  (eq. 11), factorised;
                           ``hg = h * g`` comes from the method (its
                           diagonal coefficient, :mod:`kernels.integrate`)
``solve(fac, b) -> x``      A x = b (both stages reuse one factorisation)
``jr(lin, x)``, ``jv(lin, x)``, ``ju(lin, du)``   J_r x, J_v x, J_u du

``DENSE`` works on the dense (n, n) Jacobians of
:func:`kernels.dynamics.linearise` with a partially pivoted LU (used by the
analytic test problems). For the multibody model, :func:`model_solver`
returns solvers on the block-sparse :class:`kernels.dynamics.BlockLinearisation`:
``"block"`` (block LU in the elimination order of :mod:`kernels.blocks`) or
``"dense"`` (the same mass-scaled matrix assembled dense, partially pivoted
LU). Both share the block-sparse Jacobian products.
"""
import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from kernels import blocks
from kernels import linalg
from kernels.dynamics import input_groups
from kernels.rotations import mm, mv

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


def dense_coefficient_matrix(lin, hg):
    """A = E - hg J_v - hg^2 J_r K   (eq. 11, hg = h g), dense (n, n)."""
    n = lin.J_v.shape[0]
    return jnp.eye(n, dtype=lin.J_v.dtype) - hg * lin.J_v - hg * hg * block_diag_matmul(lin.J_r, lin.K)


DENSE = Solver(
    name="dense",
    # the coefficient matrix is the "factor": kernels.linalg.solve factors
    # it per solve (no batched LAPACK call; see there)
    factor=lambda lin, hg: dense_coefficient_matrix(lin, hg),
    solve=lambda fac, b: linalg.solve(fac, b),
    jr=lambda lin, x: lin.J_r @ x,
    jv=lambda lin, x: lin.J_v @ x,
    ju=lambda lin, du: lin.J_u @ du,
)


def block_coefficient_matrix(pattern, lin, hg):
    """Mass-scaled eq. (11) in slots: M A = M - hg G_v - hg^2 G_r K, (slots, 6, 6); hg = h g."""
    n = pattern.n
    MA = -hg * lin.G_v[:n] - hg * hg * mm(lin.G_r[:n], lin.K[pattern.cols])
    return MA.at[pattern.diag].add(lin.M)


def _block_products(topology):
    pattern = blocks.model_pattern(topology)
    m = topology.n_bodies
    ws = np.asarray(topology.wheel_slots)

    def jmul(G):
        return lambda lin, x: mv(lin.Minv, blocks.matvec(pattern, G(lin), x.reshape(m, 6))).reshape(-1)

    inputs = [np.asarray(g.bodies(topology)) for g, _ in input_groups(topology)]

    def ju(lin, du):
        if not lin.G_w:
            y = jnp.zeros((m, 6), du.dtype).at[ws].add(mv(lin.G_u, du))
            return mv(lin.Minv, y).reshape(-1)
        # the wheel loads, then each input group's elements (kernels.dynamics.input_groups)
        y = jnp.zeros((m + 1, 6), du.dtype).at[ws].add(mv(lin.G_u, du[:12]))
        off = 12
        for b, (d1, d2) in zip(inputs, lin.G_w):
            n, _, k = d1.shape
            dw = du[off:off + n * k].reshape(n, k)
            off += n * k
            y = y.at[b[:, 0]].add(jnp.einsum("nik,nk->ni", d1, dw)).at[b[:, 1]].add(
                jnp.einsum("nik,nk->ni", d2, dw))
        return mv(lin.Minv, y[:m]).reshape(-1)
    return pattern, m, jmul(lambda l: l.G_r), jmul(lambda l: l.G_v), ju


@functools.lru_cache(maxsize=64)
def model_solver(topology, name="block") -> Solver:
    """Solver over :class:`kernels.dynamics.BlockLinearisation` of one model structure."""
    pattern, m, jr, jv, ju = _block_products(topology)

    def scaled_rhs(lin, b):
        return mv(lin.M, b.reshape(m, 6))
    if name == "block":
        elim = blocks.model_elimination(topology)
        return Solver(
            name="block",
            factor=lambda lin, hg: (blocks.factor(elim, block_coefficient_matrix(pattern, lin, hg)), lin.M),
            solve=lambda fac, b: blocks.solve(elim, fac[0], mv(fac[1], b.reshape(m, 6))).reshape(-1),
            jr=jr, jv=jv, ju=ju)
    if name == "block32":
        # float32 coefficient matrix, factors and solves; the right-hand
        # sides (q and the Jacobian products, float64) are rounded on the way
        # in, the stage increments widened on the way out
        elim = blocks.model_elimination(topology)
        f32 = jnp.float32
        return Solver(
            name="block32",
            factor=lambda lin, hg: (blocks.factor(elim, block_coefficient_matrix(pattern, lin, hg).astype(f32)),
                                    lin.M.astype(f32)),
            solve=lambda fac, b: blocks.solve(elim, fac[0], mv(fac[1], b.reshape(m, 6).astype(f32))
                                              ).astype(b.dtype).reshape(-1),
            jr=jr, jv=jv, ju=ju)
    if name == "dense":
        return Solver(
            name="dense",
            # the barrier keeps XLA from fusing the block products into the
            # dense assembly (re-computed per matrix entry: measured 5 ms per step)
            factor=lambda lin, hg: (blocks.to_dense(pattern, jax.lax.optimization_barrier(
                block_coefficient_matrix(pattern, lin, hg))), lin.M),
            solve=lambda fac, b: linalg.solve(fac[0], mv(fac[1], b.reshape(m, 6)).reshape(-1)),
            jr=jr, jv=jv, ju=ju)
    raise ValueError(f"solver = {name!r} is not one of block, dense, block32")
