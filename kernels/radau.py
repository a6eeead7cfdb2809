"""The reference method: scipy's Radau IIA (variable step, implicit, order 5).

Every fixed-step method of the project is checked against this one (the
tests, the work-precision benchmark, the sweep's ``integrator=radau`` cubes
and the NMSE beside them): ``scipy.integrate.solve_ivp(method="Radau")`` at
tight tolerances, with the exact Jacobian of the right-hand side
f(r, v) = (K(r) v, q(r, v, u(t))),

    df/d(r, v) = [[d(K v)/dr, K], [J_r, J_v]]

(including the dK/dr term that the linear-implicit methods neglect),
sampled on the fixed-step methods' output times. The integration is split
at the switching times of the excitation (steps, ramp corners), so that no
step straddles a discontinuity of u or du/dt, and at the state events of
switching force laws (the same root functions as the fixed-step loop,
:class:`kernels.integrate.System`: scipy's terminal ``events``, restarted
with the switched laws).

Two entry points:

:class:`Radau`
    The method as a value behind :class:`kernels.integrate.Method`
    (``METHODS["radau"]`` of :mod:`kernels.methods`): integrates any
    :class:`kernels.integrate.System` from its ``rates``, ``q``, ``u`` and
    ``switch_times``. **Not jittable**: it runs eagerly on the host (scipy
    drives the steps), one variant at a time, and its right-hand side and
    Jacobian (``jax.jacfwd`` of f) are compiled anew on every call (they
    close over the system). A failed solve returns all-NaN outputs (the
    caller flags the variant) instead of raising.
:func:`solve`
    The same integration from a model and an excitation directly, its
    right-hand side compiled once per model structure (the model is an
    argument of the compiled functions, not a closure); raises
    ``RuntimeError`` when scipy fails. Used where many variants of one model
    are integrated and by the tests and benchmarks; :func:`make_rhs` is its
    f and Jacobian.

Absolute tolerances are per kind of state: coordinates [m, rad] and speeds
[m/s, rad/s]. The speeds cannot be asked for much tighter than the
default: the round-off of the stiff elements' forces (1e8 N/m ball joints
on 0.3 kg parts) alone makes accelerations of ~1e-8 m/s^2 noise, and a
tighter speed tolerance only forces ever smaller steps without changing
the coordinates.
"""
from __future__ import annotations

import dataclasses
import logging
import math

import jax
import jax.numpy as jnp
import numpy as np
from scipy.integrate import solve_ivp

from kernels import loads
from kernels.dynamics import linearise, q_fn
from kernels.integrate import System, Trajectory
from kernels.rotations import coordinate_rates

log = logging.getLogger(__name__)


@jax.jit
def _rhs(model, exc, t, y):
    m = model.topology.n_bodies
    n = 6 * m
    r, v = y[:n].reshape(m, 6), y[n:].reshape(m, 6)
    u = loads.u_at(exc, t)
    return jnp.concatenate([coordinate_rates(r, v, model.topology.modal_slots).reshape(-1), q_fn(model, r, v, u).reshape(-1)])


@jax.jit
def _jac(model, exc, t, y):
    m = model.topology.n_bodies
    n = 6 * m
    r, v = y[:n].reshape(m, 6), y[n:].reshape(m, 6)
    lin = linearise(model, r, v, loads.u_at(exc, t))
    dKv = jax.jacfwd(lambda rr: coordinate_rates(rr.reshape(m, 6), v, model.topology.modal_slots).reshape(-1))(y[:n])
    K = jax.scipy.linalg.block_diag(*[lin.K[i] for i in range(m)])
    return jnp.block([[dKv, K], [lin.J_r, lin.J_v]])


def make_rhs(model, exc):
    """f(t, y) and its exact Jacobian for y = (r, v) flat; compiled once per model structure."""
    return (lambda t, y: _rhs(model, exc, t, y)), (lambda t, y: _jac(model, exc, t, y))


def _atol(n, atol_coordinates, atol_speeds):
    return np.concatenate([np.full(n, atol_coordinates), np.full(n, atol_speeds)])


def _integrate(fn, jn, y, t_eval, switch_times, rtol, atol, state_events=None):
    """Radau from y at t_eval[0] to t_eval[-1], split at the switching times
    inside; returns (ys (nt, ny) at t_eval, None, n_events) or (partial ys,
    the message of the failed segment, n_events).

    ``state_events = (roots, switch, z)``: the discrete state z of the
    switching laws (:class:`kernels.integrate.System`): ``fn(t, y, z)``,
    ``jn(t, y, z)``, ``roots(y, z, t) -> (n_roots,)``, ``switch(y, z, fired, t)
    -> z``; every root is a terminal scipy event (a crossing from < 0 to
    > 0), after which the integration restarts at the located time with
    the switched z."""
    t0, t1 = float(t_eval[0]), float(t_eval[-1])
    cuts = [t for t in switch_times if t0 < t < t1]
    bounds = [t0] + cuts + [t1]
    ys = np.full((len(t_eval), y.size), np.nan)
    z, n_events = (None, 0) if state_events is None else (state_events[2], 0)
    for a, b in zip(bounds[:-1], bounds[1:]):
        last = b == t1
        after_event = False
        while True:
            # after a state event at a, the samples up to a are written already
            start = (t_eval > a) if after_event else (t_eval >= a - 1e-12)
            sel = start & ((t_eval <= b + 1e-12) if last else (t_eval < b - loads.STEP_TOL))
            ts = t_eval[sel]
            # also stop exactly at b to hand the state over to the next segment
            ts_b = ts if (len(ts) and ts[-1] == b) else np.append(ts, b)
            # a sample within 1e-12 s before a switch time (t0 + k h rounded,
            # e.g. 0.15499999999999997 for a switch at 0.155) is taken at it
            ts_b = np.clip(ts_b, a, b)
            if state_events is None:
                sol = solve_ivp(fn, (a, b), y, method="Radau", t_eval=ts_b, rtol=rtol, atol=atol, jac=jn)
            else:
                roots, switch = state_events[:2]
                cache = {}

                def root_values(t_, y_, z_=z):
                    key = (float(t_), y_.tobytes())
                    if key not in cache:
                        cache.clear()
                        cache[key] = np.asarray(roots(y_, z_, t_))
                    return cache[key]
                n_roots = root_values(a, y).size
                events = []
                for i in range(n_roots):
                    ev = (lambda t, y_, i=i: root_values(t, y_)[i])
                    ev.terminal, ev.direction = True, 1.0
                    events.append(ev)
                sol = solve_ivp(lambda t, y_: fn(t, y_, z), (a, b), y, method="Radau", t_eval=ts_b,
                                rtol=rtol, atol=atol, jac=lambda t, y_: jn(t, y_, z), events=events)
            if not sol.success:
                return ys, f"Radau reference failed on [{a}, {b}]: {sol.message}", n_events
            if sol.status == 1:          # a state event: switch, restart there
                hit = [i for i, te in enumerate(sol.t_events) if len(te)]
                t_e = float(sol.t_events[hit[0]][0])
                y_e = sol.y_events[hit[0]][0]
                done = sel & (t_eval <= t_e)
                k = int(done.sum())
                if k:
                    ys[np.nonzero(done)[0]] = np.asarray(sol.y).T[:k]
                fired = np.zeros(n_roots, bool)
                fired[hit] = True
                z = switch(y_e, z, fired, t_e)
                n_events += 1
                y, a, after_event = y_e, t_e, True
                continue
            ys[sel] = sol.y.T[:len(ts)]
            y = sol.y[:, -1]
            break
    return ys, None, n_events


def solve(model, exc, r0, v0, t_eval, rtol=1e-8, atol_coordinates=1e-10, atol_speeds=1e-8):
    """Integrate ``model`` under ``exc`` with Radau from (r0, v0) at
    t_eval[0]; returns (t_eval, r (nt, m, 6), v (nt, m, 6)). Raises
    ``RuntimeError`` when scipy's solver fails. Tolerances: module doc."""
    m = model.topology.n_bodies
    f, jac = make_rhs(model, exc)
    fn = lambda t, y: np.asarray(f(t, jnp.asarray(y)))  # noqa: E731
    jn = lambda t, y: np.asarray(jac(t, jnp.asarray(y)))  # noqa: E731
    t_eval = np.asarray(t_eval, float)
    y = np.concatenate([np.asarray(r0).reshape(-1), np.asarray(v0).reshape(-1)])
    n = 6 * m
    ys, failed, _ = _integrate(fn, jn, y, t_eval, loads.switch_times(exc), rtol,
                               _atol(n, atol_coordinates, atol_speeds))
    if failed:
        raise RuntimeError(failed)
    return t_eval, ys[:, :n].reshape(-1, m, 6), ys[:, n:].reshape(-1, m, 6)


def _nan_like(struct):
    if jnp.issubdtype(struct.dtype, jnp.inexact):
        return jnp.full(struct.shape, jnp.nan, struct.dtype)
    return jnp.zeros(struct.shape, struct.dtype)


@dataclasses.dataclass(frozen=True)
class Radau:
    """Radau IIA as a :class:`kernels.integrate.Method` (module doc): not
    jittable, no error estimate (its own step-size control keeps the local
    error within ``rtol`` / ``atol_*``; ``Trajectory.max_error`` is 0).

    The user's tolerances: ``dataclasses.replace(RADAU, rtol=...)`` or
    ``Radau(rtol=..., atol_coordinates=..., atol_speeds=...)`` (module doc
    for the units)."""
    rtol: float = 1e-8
    atol_coordinates: float = 1e-10
    atol_speeds: float = 1e-8

    # the Method attributes (class attributes, not fields)
    name = "radau"
    order = 5
    jittable = False
    has_error_estimate = False

    def __post_init__(self):
        for key in ("rtol", "atol_coordinates", "atol_speeds"):
            val = getattr(self, key)
            if not (isinstance(val, (int, float)) and math.isfinite(val) and val > 0):
                raise ValueError(f"radau.{key} = {val!r} must be a positive number")

    def simulate(self, system: System, r0, v0, t0, h, n_samples, every=1, relinearise_every=1,
                 output_fn=None, error_norm=None, checkpoint_block=None) -> Trajectory:
        """Integrate ``system`` from (r0, v0) (flat) at t0 and sample at
        t0 + i * every * h, i = 0 .. n_samples - 1 (``h`` only defines the
        output grid; the steps are Radau's own), splitting at
        ``system.switch_times``. ``output_fn(r, v, t)`` (default the state)
        is applied to every sample (vmapped, compiled per call).
        ``relinearise_every``, ``error_norm`` and ``checkpoint_block`` do
        not apply and are ignored. Eager (host), not differentiable. A
        failed solve gives NaN outputs and final state, with a logged
        warning."""
        output_fn = output_fn or (lambda r, v, t: {"r": r, "v": v})
        r0 = jnp.ravel(jnp.asarray(r0))
        v0 = jnp.ravel(jnp.asarray(v0))
        n = r0.size

        stateful = system.has_state_events

        def f(t, y, z):
            r, v = y[:n], y[n:]
            sysz = system.bind(z) if stateful else system
            return jnp.concatenate([sysz.rates(r, v), sysz.q(r, v, sysz.u(t))])

        fj = jax.jit(f)
        jj = jax.jit(jax.jacfwd(f, argnums=1))
        fn = lambda t, y, z=None: np.asarray(fj(t, jnp.asarray(y), z))  # noqa: E731
        jn = lambda t, y, z=None: np.asarray(jj(t, jnp.asarray(y), z))  # noqa: E731
        t_eval = np.asarray(t0 + np.arange(int(n_samples)) * int(every) * h, float)
        y = np.concatenate([np.asarray(r0, float), np.asarray(v0, float)])
        state_events = None
        if stateful:
            roots_j = jax.jit(lambda y_, z, t_: system.event_roots(y_[:n], y_[n:], z, t_))
            switch_j = jax.jit(lambda y_, z, fired, t_: system.event_switch(y_[:n], y_[n:], z, fired, t_))
            state_events = (lambda y_, z, t_: roots_j(jnp.asarray(y_), z, t_),
                            lambda y_, z, fired, t_: switch_j(jnp.asarray(y_), z, jnp.asarray(fired), t_),
                            system.event_state0(r0, v0, t0))
        ys, failed, n_events = _integrate(fn, jn, y, t_eval, tuple(system.switch_times), self.rtol,
                                          _atol(n, self.atol_coordinates, self.atol_speeds), state_events)
        R, V, T = jnp.asarray(ys[:, :n]), jnp.asarray(ys[:, n:]), jnp.asarray(t_eval)
        if failed:
            log.warning(f"{failed} (outputs set to NaN)")
            R, V = jnp.full_like(R, jnp.nan), jnp.full_like(V, jnp.nan)
            shapes = jax.eval_shape(jax.vmap(output_fn), R, V, T)
            outputs = jax.tree_util.tree_map(_nan_like, shapes)
        else:
            outputs = jax.jit(jax.vmap(output_fn))(R, V, T)
        if stateful:
            return Trajectory(T, outputs, R[-1], V[-1], jnp.zeros((), R.dtype),
                              jnp.asarray(n_events, jnp.int32), jnp.asarray(False))
        return Trajectory(T, outputs, R[-1], V[-1], jnp.zeros((), R.dtype))


RADAU = Radau()
