"""External excitation u(t): forces and torques at the wheel centres (method.md eq. 1b).

``u`` has shape (2, 6): rows left/right wheel centre, columns
(Fx, Fy, Fz, Mx, My, Mz) in the vehicle frame [N, N m]. A load case is a
base value plus a sum of ramps; a ramp of zero duration is a step that
switches at its time (inclusive: ``u(t_j)`` already has the new value, so a
step at a step boundary of the integrator is exact, method.md section 2).
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

# a step at t_j is seen as switched for t >= t_j - STEP_TOL (absorbs the
# rounding of t = t0 + k h)
STEP_TOL = 1e-9


class Excitation(NamedTuple):
    base: jax.Array        # (2, 6)
    times: jax.Array       # (ns,) s, start of each ramp
    durations: jax.Array   # (ns,) s, 0 = step
    amplitudes: jax.Array  # (ns, 2, 6)


def excitation(base, changes=()):
    """Build an :class:`Excitation` from a base (2, 6) and (time, duration, amplitude) triples."""
    base = jnp.asarray(base, jnp.float64)
    if not changes:
        return Excitation(base, jnp.zeros(0), jnp.zeros(0), jnp.zeros((0, 2, 6)))
    t, d, a = zip(*changes)
    return Excitation(base, jnp.asarray(t, jnp.float64), jnp.asarray(d, jnp.float64),
                      jnp.asarray(a, jnp.float64).reshape(-1, 2, 6))


def u_at(exc: Excitation, t):
    """u(t), shape (2, 6)."""
    safe = jnp.where(exc.durations > 0, exc.durations, 1.0)
    ramp = jnp.clip((t - exc.times) / safe, 0.0, 1.0)
    step = (t >= exc.times - STEP_TOL).astype(ramp.dtype)
    w = jnp.where(exc.durations > 0, ramp, step)
    return exc.base + jnp.einsum("s,sij->ij", w, exc.amplitudes)


def du_dt(exc: Excitation, t):
    """du/dt(t), shape (2, 6) (zero for steps, amplitude / duration inside a ramp)."""
    return jax.jacfwd(u_at, argnums=1)(exc, jnp.asarray(t, exc.base.dtype))


def switch_times(exc: Excitation):
    """Times at which u or du/dt is not smooth (for the reference solver)."""
    import numpy as np
    t = np.asarray(exc.times)
    d = np.asarray(exc.durations)
    return np.unique(np.concatenate([t, (t + d)[d > 0]]))
