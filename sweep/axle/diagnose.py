"""Why a model's static state fails: what a job and ``python -m sweep.align``
say when an equilibrium does not converge.

An axle is free bodies held only by force elements, so a direction no
element restrains (a tie rod between two ball joints of zero rotational
stiffness spins about its own axis; a strut whose top mount has no axial
rate slides freely) makes the stiffness singular and Newton's method
wanders. That shows before any load: linearised at rest at the design
geometry (eq. 1 at v = 0, gravity only), the speed-space matrix
``S = J_r K(r)`` (n, n) has eigenvalues ``-omega^2`` - the squared natural
frequencies of the undamped axle. A mode below :data:`FREE_BELOW_HZ` is
unrestrained (a rigid-body motion of some bodies that no element resists),
named by the bodies that carry its kinetic energy and, per body, the
motion: translation along or rotation about an axis of the vehicle frame.
(The design geometry is not an equilibrium - alignment shims and preloads
deflect elements there - so the signs of the other eigenvalues say
nothing about stability; only the near-zero ones are used.)

:func:`largest_residual` names the body and direction of the largest
generalised force residual at a state (where the imbalance sits).

Host-side, after a failure only (a few seconds of compilation for a full
axle); pure of any job machinery: the caller passes the model.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from kernels.dynamics import q_fn
from kernels.statics import residual_forces
from kernels.rotations import euler_to_matrix

FREE_BELOW_HZ = 0.05        # Hz: a mode this slow is an unrestrained direction
BODY_SHARE = 0.1            # a body is named when it carries this share of the mode's kinetic energy
DIRECTIONS = ("x", "y", "z")


def _speed_space_matrix(model, r):
    """S = J_r K(r) (n, n) at rest at r (m, 6), no wheel loads: dv/dt = S dv
    for small motions (eigenvalues -omega^2); from the modal analysis's
    state matrix A = [[0, K], [J_r, J_v]] (:func:`kernels.modes.state_matrix`)."""
    from kernels.modes import state_matrix
    A = np.asarray(jax.jit(state_matrix)(model, r, jnp.zeros((2, 6), r.dtype)))
    n = A.shape[0] // 2
    return A[n:, :n] @ A[:n, n:]


def _axis_text(vec):
    """'x', '-z' or '[0.71, 0.00, 0.71]' for a unit vector in the vehicle frame."""
    k = int(np.argmax(np.abs(vec)))
    if abs(vec[k]) > 0.98:
        return ("-" if vec[k] < 0 else "") + DIRECTIONS[k]
    return "[" + ", ".join(f"{c:.2f}" for c in vec) + "]"


def _describe(model, r, mode):
    """[(body, share, motion text)] of a speed-space mode vector (n,)."""
    names = model.topology.body_names
    m = len(names)
    v = np.real(mode).reshape(m, 6)
    mass = np.asarray(model.mass)
    inertia = np.asarray(model.inertia)
    e_t = 0.5 * mass * np.sum(v[:, :3] ** 2, 1)
    e_r = 0.5 * np.einsum("mi,mij,mj->m", v[:, 3:], inertia, v[:, 3:])
    e = e_t + e_r
    total = e.sum()
    if not total > 0:
        return []
    out = []
    for b in np.argsort(-e):
        share = e[b] / total
        if share < BODY_SHARE:
            break
        R = np.asarray(euler_to_matrix(np.asarray(r)[b, 3:]))
        if e_r[b] >= e_t[b]:
            w = R @ v[b, 3:]                         # body-frame angular velocity -> vehicle frame
            motion = f"rotation about {_axis_text(w / np.linalg.norm(w))}"
        else:
            t = v[b, :3]
            motion = f"translation along {_axis_text(t / np.linalg.norm(t))}"
        out.append((names[b], float(share), motion))
    return out


def unrestrained(model, r=None, free_below_hz=FREE_BELOW_HZ):
    """Unrestrained and unstable directions of the axle at rest at ``r``
    (m, 6) (default: the design geometry), gravity only.

    Returns [(frequency [Hz], [(body, energy share, motion)])] of every
    mode with |omega| below ``free_below_hz``, slowest first; [] for an
    axle every direction of which some element holds."""
    r = model.r_design if r is None else r
    S = _speed_space_matrix(model, jnp.asarray(r))
    lam, vec = np.linalg.eig(S)
    limit = (2 * np.pi * free_below_hz) ** 2
    return [(float(np.sqrt(abs(lam[k])) / (2 * np.pi)), _describe(model, r, vec[:, k]))
            for k in np.argsort(np.abs(lam)) if abs(lam[k]) < limit]


def largest_residual(model, r, u=None):
    """(body, direction, value [N or N m]) of the largest generalised force
    residual M q at rest at ``r`` (m, 6) under wheel-centre loads ``u``
    (2, 6) (default none)."""
    r = jnp.asarray(r)
    u = jnp.zeros((2, 6), r.dtype) if u is None else jnp.asarray(u)
    G = np.asarray(jax.jit(lambda m, rr, uu: residual_forces(
        m, q_fn(m, rr, jnp.zeros_like(rr), uu).reshape(-1, 6)))(model, r, u))
    b, d = np.unravel_index(int(np.nanargmax(np.abs(np.nan_to_num(G, nan=np.inf)))), G.shape)
    return model.topology.body_names[b], ("fx", "fy", "fz", "mx", "my", "mz")[d], float(G[b, d])


def explain_unrestrained(found, limit=3):
    """One line per unrestrained direction (at most ``limit``), e.g.
    'tie_rod_left rotation about -y (0.000 Hz)'."""
    lines = []
    for f, bodies in found[:limit]:
        who = "; ".join(f"{name} {motion}" + (f" ({share:.0%} of the mode)" if len(bodies) > 1 else "")
                        for name, share, motion in bodies) or "(no body carries the mode)"
        lines.append(f"{who} ({f:.3f} Hz)")
    if len(found) > limit:
        lines.append(f"... and {len(found) - limit} more")
    return lines


__all__ = ["unrestrained", "largest_residual", "explain_unrestrained", "FREE_BELOW_HZ"]
