"""LSRT2: the 2-stage linear-implicit Rosenbrock method (method.md section 2).

Implements eqs. (6)-(9) with the coefficients of Table 1 and the shared
coefficient matrix of eq. (11), so one LU factorisation per linearisation
serves both stages. Following the implementation notes of method.md, the
term ``K v~`` (the right-hand side dr/dt at the stage point) uses
``K(r~)`` at the stage coordinates, while Jacobian-type products use
``K_lin``; the input increment enters stage 1 as ``h g J_u du/dt`` and
cancels in stage 2. Re-linearisation every N steps is a W-method of order 2.

The integrator is written against a small system interface so that it runs
the multibody model and the analytic test problems alike:

``system.linearise(r, v, u) -> Linearisation`` (flat q, J_r, J_v, J_u, K blocks)
``system.q(r, v, u) -> (n,)``, ``system.rates(r, v) -> (n,)`` (= K(r) v),
with r, v flat (n,) = 6 m and u flat (nu,).
"""
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from kernels import linsolve
from kernels.rotations import mv

# Table 1 (s = 2)
GAMMA = linsolve.GAMMA               # g11 = g22 = 1 - sqrt(2)/2
G21 = -GAMMA
A21 = 0.5
C2 = 0.5
B1, B2 = 0.0, 1.0


class System(NamedTuple):
    linearise: Callable
    q: Callable
    rates: Callable
    u: Callable      # t -> flat u
    du: Callable     # t -> flat du/dt
    solver: linsolve.Solver = linsolve.DENSE   # storage + factorisation of eq. (11)


def _kmul(K, x):
    m = K.shape[0]
    return mv(K, x.reshape(m, 6)).reshape(-1)


coefficient_matrix = linsolve.dense_coefficient_matrix   # eq. (11), dense


def step(system: System, lin, lu, q1, r, v, t, h):
    """One LSRT2 step k -> k+1 (eqs. 6-9); ``q1 = q(r, v, u(t))``."""
    hg = h * GAMMA
    K = lin.K
    S = system.solver
    # stage 1: r~ = r, v~ = v, u~ = u(t)                                  (9)
    rate1 = system.rates(r, v)                      # K(r~1) v~1
    du1 = system.du(t)
    rhs1 = q1 + hg * S.ju(lin, du1) + hg * S.jr(lin, rate1)            # (7)
    dv1 = S.solve(lu, rhs1)
    Kdv1 = _kmul(K, dv1)
    dr1 = rate1 + hg * Kdv1                                               # (8)
    # stage 2
    r2 = r + h * A21 * dr1                                                # (9a)
    v2 = v + h * A21 * dv1                                                # (9b)
    q2 = system.q(r2, v2, system.u(t + C2 * h))                           # (9c)
    rate2 = system.rates(r2, v2)                    # K(r~2) v~2
    rhs2 = (q2 + h * G21 * (S.jr(lin, dr1) + S.jv(lin, dv1))
            + hg * S.jr(lin, rate2 + h * G21 * Kdv1))                  # (7), input terms cancel
    dv2 = S.solve(lu, rhs2)
    dr2 = rate2 + hg * _kmul(K, dv2) + h * G21 * Kdv1                     # (8)
    return r + h * (B1 * dr1 + B2 * dr2), v + h * (B1 * dv1 + B2 * dv2)   # (6)


class Trajectory(NamedTuple):
    t: jax.Array         # (n_samples,)
    outputs: Any         # pytree with leading n_samples
    r: jax.Array         # final state
    v: jax.Array


def simulate(system: System, r0, v0, t0, h, n_samples, every=1, relinearise_every=1,
             output_fn=None):
    """Integrate from (r0, v0) at t0 with fixed step h; sample every ``every`` steps.

    Returns states/outputs at t0 + i * every * h, i = 0 .. n_samples-1
    (n_samples and every are static). ``output_fn(r, v, t)`` defaults to the
    state itself. Re-linearises at steps k with k % relinearise_every == 0.
    """
    output_fn = output_fn or (lambda r, v, t: {"r": r, "v": v})
    N = int(relinearise_every)

    def relin(r, v, t):
        lin = system.linearise(r, v, system.u(t))
        return lin, system.solver.factor(lin, h), lin.q

    def one_step(carry, k):
        r, v, lin, lu = carry
        t = t0 + k * h
        if N == 1:
            lin, lu, q1 = relin(r, v, t)
        else:
            lin, lu, q1 = jax.lax.cond(
                k % N == 0, lambda: relin(r, v, t),
                lambda: (lin, lu, system.q(r, v, system.u(t))))
        r, v = step(system, lin, lu, q1, r, v, t, h)
        return (r, v, lin, lu), None

    def block(carry, i):
        ks = i * every + jnp.arange(every)
        carry, _ = jax.lax.scan(one_step, carry, ks)
        r, v = carry[0], carry[1]
        t = t0 + (i + 1) * every * h
        return carry, output_fn(r, v, t)

    lin0, lu0, _ = relin(r0, v0, t0)
    out0 = output_fn(r0, v0, t0)
    carry, outs = jax.lax.scan(block, (r0, v0, lin0, lu0), jnp.arange(n_samples - 1))
    outputs = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b], 0), out0, outs)
    times = t0 + jnp.arange(n_samples) * every * h
    return Trajectory(times, outputs, carry[0], carry[1])
