"""External excitation u(t): forces and torques at the wheel centres (method.md eq. 1b).

``u`` has shape (2, 6): rows left/right wheel centre, columns
(Fx, Fy, Fz, Mx, My, Mz) in the vehicle frame [N, N m]. A load case is a
base value plus a sum of ramps; a ramp of zero duration is a step that
switches at its time (:func:`u_at` is inclusive: ``u(t_j)`` already has the
new value - the static equilibrium at a start time and the Radau reference,
which restarts at every switch, read it so).

A switch (a step, a ramp's start or end) is a *time event* of the
fixed-step integration: within a step [t_n, t_n + h] every stage sees the
input of the one analytic piece that holds on the open interval - the
one-sided input (:func:`u_one_sided`, :func:`du_one_sided`; the piece is
picked by a reference time inside the step) - so a switch on the step grid
is exact for every method, also for stages at c_i = 1, whose inclusive
value would already be the next piece's (an O(h) error committed once,
which makes every method first order on a load step). A switch strictly
inside a step splits it there (:func:`event_times`;
:func:`kernels.integrate.simulate`).

A load case may also carry a sum of harmonics (``h_omega``, ``h_cos``,
``h_sin``: u += sum_k C_k cos(w_k t) + S_k sin(w_k t)), e.g. the wheel-centre
force of a road under a tyre (:mod:`kernels.road`). Harmonics are smooth:
they add no event, and a step's input rate is their derivative at the step's
start (the W-methods' ``J_u du/dt`` term, :mod:`kernels.integrate`).
"""
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

# a step at t_j is seen as switched for t >= t_j - STEP_TOL (absorbs the
# rounding of t = t0 + k h)
STEP_TOL = 1e-9


class Excitation(NamedTuple):
    base: jax.Array        # (2, 6)
    times: jax.Array       # (ns,) s, start of each ramp
    durations: jax.Array   # (ns,) s, 0 = step
    amplitudes: jax.Array  # (ns, 2, 6)
    h_omega: Any = None    # (nh,) rad/s, angular frequencies of the harmonics (None: none)
    h_cos: Any = None      # (nh, 2, 6) amplitudes of cos(w t) [N, N m]
    h_sin: Any = None      # (nh, 2, 6) amplitudes of sin(w t) [N, N m]


def with_harmonics(exc: Excitation, omega, cos, sin) -> Excitation:
    """``exc`` plus the harmonics sum_k cos_k cos(omega_k t) + sin_k sin(omega_k t)
    (omega (nh,) rad/s; cos, sin (nh, 2, 6))."""
    omega = jnp.asarray(omega, jnp.float64)
    return exc._replace(h_omega=omega, h_cos=jnp.asarray(cos, jnp.float64).reshape(-1, 2, 6),
                        h_sin=jnp.asarray(sin, jnp.float64).reshape(-1, 2, 6))


def scaled_by_side(exc: Excitation, scale) -> Excitation:
    """``exc`` with each side's loads times ``scale`` (2,) (0: a wheel off the road)."""
    s2 = scale[:, None]
    return exc._replace(base=exc.base * s2, amplitudes=exc.amplitudes * s2[None],
                        h_cos=None if exc.h_cos is None else exc.h_cos * s2[None],
                        h_sin=None if exc.h_sin is None else exc.h_sin * s2[None])


def without_harmonics(exc: Excitation) -> Excitation:
    """``exc`` without its harmonics."""
    return exc._replace(h_omega=None, h_cos=None, h_sin=None)


def harmonic(exc: Excitation, t):
    """The harmonics' part of u(t), (2, 6); 0 without harmonics."""
    if exc.h_omega is None:
        return 0.0
    wt = exc.h_omega * t
    return jnp.einsum("k,kij->ij", jnp.cos(wt), exc.h_cos) + jnp.einsum("k,kij->ij", jnp.sin(wt), exc.h_sin)


def _plus_harmonic(u, exc, t):
    return u if exc.h_omega is None else u + harmonic(exc, t)


def harmonic_rate(exc: Excitation, t):
    """d/dt of :func:`harmonic` at t, (2, 6); 0 without harmonics."""
    if exc.h_omega is None:
        return 0.0
    wt = exc.h_omega * t
    return (jnp.einsum("k,kij->ij", exc.h_omega * jnp.cos(wt), exc.h_sin)
            - jnp.einsum("k,kij->ij", exc.h_omega * jnp.sin(wt), exc.h_cos))


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
    return _plus_harmonic(exc.base + jnp.einsum("s,sij->ij", w, exc.amplitudes), exc, t)


def du_dt(exc: Excitation, t):
    """du/dt(t), shape (2, 6) (zero for steps, amplitude / duration inside a ramp)."""
    return jax.jacfwd(u_at, argnums=1)(exc, jnp.asarray(t, exc.base.dtype))


def switch_times(exc: Excitation):
    """Times at which u or du/dt is not smooth (for the reference solver)."""
    import numpy as np
    t = np.asarray(exc.times)
    d = np.asarray(exc.durations)
    return np.unique(np.concatenate([t, (t + d)[d > 0]]))


def u_one_sided(exc: Excitation, t, t_ref):
    """u(t) of the analytic piece of the load case that holds at ``t_ref``:
    steps at t_j <= t_ref are on, the others off, whatever t is; a ramp
    running at t_ref is its straight line (not clipped), one not started
    is 0, one ended is its full amplitude. With t_ref strictly inside a
    step [t_n, t_n + h] that no switch cuts, this is the input of that
    step at any stage time, t_n + h included (the left limit there)."""
    safe = jnp.where(exc.durations > 0, exc.durations, 1.0)
    on = (t_ref >= exc.times).astype(exc.base.dtype)
    ended = t_ref >= exc.times + exc.durations
    ramp = jnp.where(ended, 1.0, on * (t - exc.times) / safe)
    w = jnp.where(exc.durations > 0, ramp, on)
    return _plus_harmonic(exc.base + jnp.einsum("s,sij->ij", w, exc.amplitudes), exc, t)


def du_one_sided(exc: Excitation, t_ref, t=None):
    """du/dt of the piece that holds at ``t_ref``: amplitude / duration of
    the ramps running there, zero for steps (their jump is the event), plus
    the harmonics' rate at ``t`` (default ``t_ref``; the integrators pass
    the step's start)."""
    running = (exc.durations > 0) & (t_ref >= exc.times) & (t_ref < exc.times + exc.durations)
    rate = jnp.where(running, 1.0 / jnp.where(exc.durations > 0, exc.durations, 1.0), 0.0)
    du = jnp.einsum("s,sij->ij", rate.astype(exc.base.dtype), exc.amplitudes)
    if exc.h_omega is None:
        return du
    return du + harmonic_rate(exc, t_ref if t is None else t)


def event_times(exc: Excitation):
    """The times at which u or du/dt switches, (2 ns,) - every ramp's start
    and end, a step's time twice (jittable: a traced excitation keeps its
    shape)."""
    if any(isinstance(x, jax.core.Tracer) for x in (exc.times, exc.durations)):
        return jnp.concatenate([exc.times, exc.times + exc.durations])
    # a concrete load case (the usual one: closed over by the traced
    # function) stays concrete inside a trace, so that
    # kernels.integrate.events_inside_steps decides on the host whether a
    # step has to be split - and leaves the split out of the program when
    # every event is on the step grid (jnp would stage the sum as a traced value)
    times = np.asarray(exc.times)
    return np.concatenate([times, times + np.asarray(exc.durations)])
