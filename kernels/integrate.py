"""One fixed-step time loop for linear-implicit (Rosenbrock / W-) methods.

A *method* is a value: a :class:`RosenbrockTableau` (frozen, validated,
hashable, so it can be a static argument of ``jax.jit``) whose generic
stage equations are method.md eqs. (6)-(9) with s stages:

    A dv_i = q(r~_i, v~_i, u~_i) + h gamma_i J_u du
             + h (J_r sum_j g_ij dr_j + J_v sum_j g_ij dv_j)
             + h g J_r K [ K(r~_i) v~_i + h sum_j g_ij dv_j ]                (7)
    dr_i = K(r~_i) v~_i + h g K dv_i + h K sum_j g_ij dv_j                  (8)
    r~_i = r + h sum_j a_ij dr_j,  v~_i = v + h sum_j a_ij dv_j,
    u~_i = u(t + c_i h)                                                      (9)
    r+ = r + h sum_i b_i dr_i,  v+ = v + h sum_i b_i dv_i                   (6)

(j < i; g = g_ii the common diagonal, so every stage shares the coefficient
matrix A = E - h g J_v - (h g)^2 J_r K of eq. (11) and one factorisation;
gamma_i = g + sum_j g_ij; ``du`` = du/dt(t), frozen over the step.) These
are Hairer-Wanner's Rosenbrock stages applied to the stacked state (r, v, u)
with the Jacobian [[0, K, 0], [J_r, J_v, J_u], [0, 0, 0]] after eliminating
the r rows (method.md implementation notes): ``K(r~)`` multiplies the stage
velocity, ``K_lin`` the Jacobian-type products. Methods with an embedded
solution (``b_hat``) also return the local error estimate
h sum_i (b_i - b_hat_i) (dr_i, dv_i) of every step.

The methods (each in its own module): :data:`kernels.lsrt2.LSRT2` (order 2,
method.md section 2), :data:`kernels.ros34pw2.ROS34PW2` (order 3, W-method,
embedded order 2), :data:`kernels.linear_implicit_euler.LINEAR_IMPLICIT_EULER`
(order 1). The linear solver receives ``h * g`` from the method.

The system interface (:class:`System`) is what :func:`kernels.system.model_system`
binds for the multibody model and what the tests build for analytic
problems: flat r, v (n,) and flat u.

The method interface (:class:`Method`, the pattern of diffrax's solvers: a
method is a value, the time loop takes it as an argument) is what every
caller - the sweep's time-response variants, tuning (checkpointed reverse
mode), the benchmarks and the tests - programs against: ``name``, ``order``, ``jittable``,
``has_error_estimate`` and ``simulate(system, r0, v0, t0, h, n_samples, ...)
-> Trajectory``. :class:`RosenbrockTableau` implements it with the one
time loop of this module (:func:`simulate`, jittable, vmappable,
differentiable); :class:`kernels.radau.Radau` implements it as the
non-jittable reference (scipy's Radau IIA on the host, one variant at a
time). The registry by name is :data:`kernels.methods.METHODS`.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple, Optional, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from kernels import linsolve
from kernels.rotations import mv


class System(NamedTuple):
    """``linearise(r, v, u) -> lin`` (q, J_r, J_v, J_u, K blocks in the solver's
    format), ``q(r, v, u) -> (n,)``, ``rates(r, v) -> (n,)`` (= K(r) v),
    ``u(t)`` and ``du(t)`` (flat input and its rate), ``solver``
    (:class:`kernels.linsolve.Solver`: factorisation of eq. 11 and the
    Jacobian products), ``switch_times`` (times at which u or du/dt is not
    smooth, ascending floats: a variable-step method such as
    :class:`kernels.radau.Radau` splits its integration there).

    Time events of the fixed-step loop (:func:`simulate`; the model's
    system binds :mod:`kernels.loads`): ``u_one_sided(t, t_ref)`` is the
    input at t of the analytic piece that holds at t_ref, ``du_one_sided(t_ref, t)``
    its rate (a smooth part's at t, the step's start), ``events()`` the array of the times at which the input
    switches (a function, so that a System stays hashable: a static
    argument of ``jax.jit``; jittable). Without them (None: a smooth input, e.g. the analytic test
    problems) the loop reads ``u(t)`` and ``du(t)``.

    State events (switching force laws: a stop with a clearance, Coulomb
    friction; :func:`simulate`, "State events"): the system carries a
    discrete state z (a pytree of arrays: the mode of every switching law
    and what it remembers, e.g. a stick anchor) with which its right-hand
    side is smooth. ``event_state0(r, v, t) -> z`` is the mode that fits a
    state at time t; ``event_roots(r, v, z, t) -> phi`` (n_roots,) the root functions,
    signed so that phi < 0 while the mode z fits and phi > 0 once it does
    not (a contact closed, a sliding velocity reversed); ``event_switch(r, v,
    z, fired, t) -> z`` the discrete state after the roots marked in ``fired``
    (bool, (n_roots,)) have crossed (t: the time of every state; a law
    whose root reads the input - a tyre's contact force - needs it); ``bind(z) -> System`` the system whose
    ``q`` and ``linearise`` use the laws of mode z (everything else the
    same). All four None: no state events."""
    linearise: Callable
    q: Callable
    rates: Callable
    u: Callable
    du: Callable
    solver: linsolve.Solver = linsolve.DENSE
    switch_times: tuple = ()
    u_one_sided: Optional[Callable] = None
    du_one_sided: Optional[Callable] = None
    events: Optional[Callable] = None
    event_state0: Optional[Callable] = None
    event_roots: Optional[Callable] = None
    event_switch: Optional[Callable] = None
    bind: Optional[Callable] = None

    @property
    def has_state_events(self) -> bool:
        return self.event_roots is not None


class Trajectory(NamedTuple):
    """What every method's ``simulate`` returns."""
    t: jax.Array         # (n_samples,) s
    outputs: Any         # pytree with leading n_samples
    r: jax.Array         # final state
    v: jax.Array
    max_error: jax.Array  # largest error_norm of any step (0 without an embedded method)
    n_events: Any = None  # number of state events located (None: a system without state events)
    event_overflow: Any = None  # True where a step needed more than EVENT_MAX_ITER event iterations
    event_state: Any = None  # the discrete state z at the end (the mode of every switching law)


@runtime_checkable
class Method(Protocol):
    """An integration method as a value (module doc).

    ``name``: its name in :data:`kernels.methods.METHODS` (the sweep's
    ``integrator.name``); ``order``: classical order; ``jittable``: whether
    ``simulate`` may run under ``jax.jit`` / ``vmap`` / ``grad`` (True for the
    fixed-step Rosenbrock methods; False for the host-side reference, which
    runs eagerly, one variant at a time); ``has_error_estimate``: whether
    ``error_norm`` is evaluated (an embedded solution) so that
    ``Trajectory.max_error`` means something.

    ``simulate(system, r0, v0, t0, h, n_samples, every=1, relinearise_every=1,
    output_fn=None, error_norm=None, checkpoint_block=None) -> Trajectory``:
    integrate the :class:`System` from (r0, v0) at t0 and return the
    samples at t0 + i * every * h, i = 0 .. n_samples - 1 (``h``: the step
    of a fixed-step method, the output grid of a variable-step one).
    ``output_fn(r, v, t)`` maps a state to the sampled pytree (default
    ``{"r": r, "v": v}``); ``relinearise_every``, ``error_norm`` and
    ``checkpoint_block`` are as in :func:`simulate` and ignored by methods
    to which they do not apply (documented by each). A method that fails
    returns non-finite outputs rather than raising, so that a sweep flags
    the variant and goes on."""
    name: str
    order: int
    jittable: bool
    has_error_estimate: bool

    def simulate(self, system: System, r0, v0, t0, h, n_samples, every=1, relinearise_every=1,
                 output_fn=None, error_norm=None, checkpoint_block=None) -> Trajectory:
        ...


@dataclasses.dataclass(frozen=True)
class RosenbrockTableau:
    """Coefficients of an s-stage linear-implicit method (module doc).

    ``a`` and ``g`` are strictly lower-triangular s x s (tuples of rows),
    ``gamma`` the common diagonal g_ii, ``b`` the weights, ``b_hat`` the
    embedded weights (or None), ``order`` / ``embedded_order`` the classical
    orders (checked by the tests, not here).

    A :class:`Method`: jittable, with an error estimate where it has
    ``b_hat``; its :meth:`simulate` is the module's :func:`simulate`. It
    takes no tolerances (a fixed step): the user's tolerances reach an
    embedded method through ``error_norm``."""
    jittable = True                  # class attribute, not a field

    name: str
    gamma: float
    a: tuple
    g: tuple
    b: tuple
    b_hat: Optional[tuple] = None
    order: int = 1
    embedded_order: Optional[int] = None

    def __post_init__(self):
        s = len(self.b)
        if s < 1:
            raise ValueError(f"{self.name}: a method needs at least one stage")
        for key in ("a", "g"):
            rows = getattr(self, key)
            if len(rows) != s or any(len(r) != s for r in rows):
                raise ValueError(f"{self.name}.{key} must be {s} x {s}")
            arr = np.asarray(rows, float)
            if not np.all(np.isfinite(arr)) or np.any(np.triu(arr) != 0.0):
                raise ValueError(f"{self.name}.{key} must be finite and strictly lower triangular")
        if not (np.isfinite(self.gamma) and self.gamma > 0):
            raise ValueError(f"{self.name}.gamma = {self.gamma} must be positive")
        if self.b_hat is not None and len(self.b_hat) != s:
            raise ValueError(f"{self.name}.b_hat must have {s} entries")
        if not np.all(np.isfinite(np.asarray(self.b, float))):
            raise ValueError(f"{self.name}.b must be finite")

    @property
    def has_error_estimate(self) -> bool:
        return self.b_hat is not None

    def simulate(self, system: System, r0, v0, t0, h, n_samples, every=1, relinearise_every=1,
                 output_fn=None, error_norm=None, checkpoint_block=None) -> Trajectory:
        """:func:`simulate` with this method (the :class:`Method` contract)."""
        return simulate(self, system, r0, v0, t0, h, n_samples, every, relinearise_every,
                        output_fn, error_norm, checkpoint_block)

    @property
    def stages(self) -> int:
        return len(self.b)

    @property
    def c(self) -> tuple:
        """Stage times c_i = sum_j a_ij."""
        return tuple(float(sum(row)) for row in self.a)

    @property
    def gamma_i(self) -> tuple:
        """gamma_i = g + sum_j g_ij (weight of the input-rate term of stage i)."""
        return tuple(self.gamma + float(sum(row)) for row in self.g)

    def stability_function(self, z):
        """R(z) of the method on y' = lambda y, z = h lambda (numpy, complex ok)."""
        s = self.stages
        A, G = np.asarray(self.a, float), np.asarray(self.g, float)
        b = np.asarray(self.b, float)
        z = np.asarray(z, complex)
        # k = z (I - (A + G + gamma I) z)^-1 1 / ... : stages of the linear test equation
        M = A + G + self.gamma * np.eye(s)
        out = np.empty(z.shape, complex)
        for idx, zz in np.ndenumerate(z):
            k = np.linalg.solve(np.eye(s) - zz * M, np.full(s, zz))
            out[idx] = 1.0 + b @ k
        return out


def _kmul(K, x):
    m = K.shape[0]
    return mv(K, x.reshape(m, 6)).reshape(-1)


def _combine(coefs, vecs):
    """sum_j coefs[j] vecs[j] over the nonzero (static) coefficients, or None."""
    out = None
    for c, x in zip(coefs, vecs):
        if c == 0.0:
            continue
        term = x if c == 1.0 else c * x
        out = term if out is None else out + term
    return out


def input_of_step(system: System, t, h):
    """(u(tau), du) of the step [t, t + h]: the one-sided input of the piece
    that holds inside the step (reference time t + h / 2; no event cuts the
    step, :func:`simulate` splits it first), or ``u(tau)`` and ``du(t)`` of
    a system without time events."""
    if system.u_one_sided is None:
        return system.u, system.du(t)
    ref = t + 0.5 * h
    return (lambda tau: system.u_one_sided(tau, ref)), system.du_one_sided(ref, t)


def step(method: RosenbrockTableau, system: System, lin, fac, q1, r, v, t, h):
    """One step k -> k+1 (eqs. 6-9 with ``method``'s coefficients).

    ``fac`` = ``system.solver.factor(lin, h * method.gamma)``, ``q1 = q(r, v,
    u(t))`` (u of this step: :func:`input_of_step`). Returns (r+, v+, err)
    with err = (err_r, err_v) the embedded error estimate (None without
    ``b_hat``)."""
    S = system.solver
    K = lin.K
    hg = h * method.gamma
    u_fn, du = input_of_step(system, t, h)
    drs, dvs = [], []
    for i in range(method.stages):
        a_i, g_i = method.a[i][:i], method.g[i][:i]
        if i == 0:
            r_i, v_i, q_i = r, v, q1
        else:
            sr, sv = _combine(a_i, drs), _combine(a_i, dvs)
            r_i = r if sr is None else r + h * sr                           # (9a)
            v_i = v if sv is None else v + h * sv                           # (9b)
            q_i = system.q(r_i, v_i, u_fn(t + method.c[i] * h))             # (9c)
        rate = system.rates(r_i, v_i)                                       # K(r~) v~
        gdr, gdv = _combine(g_i, drs), _combine(g_i, dvs)
        Kgdv = None if gdv is None else _kmul(K, gdv)
        rhs = q_i
        if method.gamma_i[i] != 0.0:
            rhs = rhs + (h * method.gamma_i[i]) * S.ju(lin, du)
        if gdr is not None:
            rhs = rhs + h * (S.jr(lin, gdr) + S.jv(lin, gdv))
        rhs = rhs + hg * S.jr(lin, rate if Kgdv is None else rate + h * Kgdv)   # (7)
        dv = S.solve(fac, rhs)
        dr = rate + hg * _kmul(K, dv)
        if Kgdv is not None:
            dr = dr + h * Kgdv                                              # (8)
        drs.append(dr)
        dvs.append(dv)
    r_new = r + h * _combine(method.b, drs)                                 # (6a)
    v_new = v + h * _combine(method.b, dvs)                                 # (6b)
    err = None
    if method.b_hat is not None:
        e = tuple(bi - bh for bi, bh in zip(method.b, method.b_hat))
        er, ev = _combine(e, drs), _combine(e, dvs)
        err = (h * er, h * ev)
    return r_new, v_new, err


def events_inside_steps(events, t0, h, n_steps) -> bool:
    """Whether an event lies strictly inside one of the steps [t0 + k h,
    t0 + (k + 1) h], k < n_steps (then :func:`simulate` must be able to split
    a step). Decided on the host when the events, t0 and h are concrete (a
    load case closed over by the traced function: the usual sweep); True
    when any is traced (decided per step at run time)."""
    from kernels.loads import STEP_TOL
    if np.size(events) == 0:                     # the shape is known, traced or not
        return False
    if any(isinstance(x, jax.core.Tracer) for x in (events, t0, h)):
        return True
    ev = np.asarray(events, float)
    t0, h = float(t0), float(h)
    k = np.floor((ev - t0) / h)
    inside = (ev > t0 + k * h + STEP_TOL) & (ev < t0 + (k + 1) * h - STEP_TOL) & (k >= 0) & (k < n_steps)
    return bool(inside.any())


# State events (simulate, "State events"): the located event time is exact to
# EVENT_TOL seconds (the bracket width of the root of the re-stepped root
# functions); a step that needs more than EVENT_MAX_ITER iterations (each one
# sub-step of the method) flags the variant (non-finite state).
EVENT_TOL = 1e-12
EVENT_MAX_ITER = 64


def simulate(method: RosenbrockTableau, system: System, r0, v0, t0, h, n_samples, every=1,
             relinearise_every=1, output_fn=None, error_norm=None, checkpoint_block=None):
    """Integrate from (r0, v0) at t0 with the fixed step h and sample every
    ``every`` steps: outputs at t0 + i * every * h, i = 0 .. n_samples - 1.

    ``relinearise_every = N``: linearise (and factorise) at steps k with
    k % N == 0 and reuse the linearisation in between (a W-method; exact
    bookkeeping, method.md section 2). ``output_fn(r, v, t)`` defaults to the
    state. ``error_norm(err_r, err_v, r, v) -> scalar`` of the embedded error
    estimate (methods with ``b_hat``); the trajectory keeps its maximum.
    ``checkpoint_block = B``: the samples run as a scan over blocks of B
    samples, each under ``jax.checkpoint``, so that reverse mode stores
    only the block boundaries (n_samples - 1 must be a multiple of B).
    n_samples, every, relinearise_every and checkpoint_block are static.

    Time events (``system.events``): every step reads the one-sided input
    of its interval (:func:`input_of_step`), so an event on the step grid
    is exact; a step with events strictly inside (more than
    :data:`kernels.loads.STEP_TOL` from its ends) is split at them into
    sub-steps of the same method, each linearised and factorised at its
    start (``lax.cond``: the other steps do not pay for it as long as the
    events are the same for every variant of a batch); the output grid and
    the carried linearisation stay those of the fixed step. Where the
    events, t0 and h are concrete and every event is on the step grid (the
    usual load case), no split is traced at all.

    State events (``system.event_roots``; the SIMPACK way of root
    functions: locate, restart, switch): the discrete state z starts as
    ``event_state0(r0, v0)`` and every step is taken with the laws of the
    mode z. When a root function is positive at the end of the step (the
    mode no longer fits), the step is taken again from its start with
    shorter sub-steps of the same method to locate the earliest crossing
    of max_i phi_i (Illinois regula falsi on the re-stepped state, bracket
    to :data:`EVENT_TOL` s); the state just after the crossing is kept, z
    switched (``event_switch``) and the rest of the step integrated with
    the new laws - again with location, should another root cross. Every
    sub-step starts anew (linearised at its start), so a method's order is
    kept through the event: no step straddles a kink or jump of the force
    law. Under ``vmap`` the location is a ``while_loop`` whose iterations
    (one sub-step each) run only in steps where some variant of the batch
    has an event; a variant without one keeps its own step (its lanes
    idle in those iterations). ``Trajectory.n_events`` counts the located
    events; a step that needs more than :data:`EVENT_MAX_ITER` iterations
    sets ``event_overflow`` and a NaN state (the sweep flags the variant).
    """
    output_fn = output_fn or (lambda r, v, t: {"r": r, "v": v})
    N = int(relinearise_every)
    track = error_norm is not None and method.b_hat is not None
    events = system.events() if system.u_one_sided is not None and system.events is not None else None
    if events is not None and not events_inside_steps(events, t0, h, (n_samples - 1) * every):
        events = None                 # every event on the step grid: no step to split, no cond traced
    stateful = system.has_state_events

    def bound(z):
        return system.bind(z) if stateful else system

    def relin(sysz, r, v, t, h_step):
        u_fn, _ = input_of_step(sysz, t, h_step)
        lin = sysz.linearise(r, v, u_fn(t))
        return lin, sysz.solver.factor(lin, h_step * method.gamma), lin.q

    def err_max(emax, err, r_new, v_new, moved=True):
        if not track:
            return emax
        return jnp.where(moved, jnp.maximum(emax, error_norm(err[0], err[1], r_new, v_new)), emax)

    def advance(sysz, r, v, emax, a, b):
        """From (r, v) at a to b with fresh linearisations: one sub-step, or
        one per piece between the time events inside [a, b]."""
        if events is None:
            hs = b - a
            lin, fac, q1 = relin(sysz, r, v, a, hs)
            r_new, v_new, err = step(method, sysz, lin, fac, q1, r, v, a, hs)
            return r_new, v_new, err_max(emax, err, r_new, v_new)
        cuts = jnp.concatenate([a[None], jnp.sort(jnp.clip(events, a, b)), b[None]])

        def sub(state, ends):
            r, v, emax = state
            a_, b_ = ends
            hs = b_ - a_
            lin, fac, q1 = relin(sysz, r, v, a_, hs)
            r_new, v_new, err = step(method, sysz, lin, fac, q1, r, v, a_, hs)
            moved = hs > 0        # a cut outside [a, b] clips to an end: a piece of length 0
            return (jnp.where(moved, r_new, r), jnp.where(moved, v_new, v),
                    err_max(emax, err, r_new, v_new, moved)), None
        (r, v, emax), _ = jax.lax.scan(sub, (r, v, emax), (cuts[:-1], cuts[1:]))
        return r, v, emax

    def whole_step(sysz, r, v, lin, fac, emax, k, t):
        if N == 1:
            lin, fac, q1 = relin(sysz, r, v, t, h)
        else:
            lin, fac, q1 = jax.lax.cond(
                k % N == 0, lambda: relin(sysz, r, v, t, h),
                lambda: (lin, fac, sysz.q(r, v, input_of_step(sysz, t, h)[0](t))))
        r_new, v_new, err = step(method, sysz, lin, fac, q1, r, v, t, h)
        return r_new, v_new, lin, fac, err_max(emax, err, r_new, v_new)

    def split_step(sysz, r, v, lin, fac, emax, k, t):
        """The step cut at the time events inside it (events outside the
        step clip to its ends: sub-steps of zero length)."""
        r, v, emax = advance(sysz, r, v, emax, t, t + h)
        return r, v, lin, fac, emax

    def phi_max(r, v, z, t):
        return jnp.max(system.event_roots(r, v, z, t))

    def state_events(r, v, z, emax, t, r1, v1, n_ev):
        """Locate and switch the state events of the step [t, t + h] whose
        end (r1, v1) no longer fits the mode z (module doc). ``r1 = None``:
        the step itself is the loop's first iteration (one copy of the
        linearisation and the step in the program instead of two: XLA's
        compile time of an axle's step roughly doubles with a second)."""
        tb = t + h
        fused = r1 is None
        if fused:
            r1, v1, f1 = r, v, jnp.ones((), r.dtype)
        else:
            f1 = phi_max(r1, v1, z, tb)
        # loop state: start of the rest of the step (ta, ra, va, z), the
        # bracket [lo, hi] of the earliest crossing from ta (f(lo) <= 0 < f(hi),
        # the state at hi), the Illinois side memory, done flag, counters;
        # ``first``: the next iteration is the whole step (fused)
        init = dict(ta=t, ra=r, va=v, z=z, lo=t, hi=tb, flo=phi_max(r, v, z, t), fhi=f1,
                    rhi=r1, vhi=v1, side=jnp.zeros((), jnp.int32), done=~(f1 > 0),
                    it=jnp.zeros((), jnp.int32), n=n_ev, emax=emax,
                    first=jnp.asarray(fused))

        def cond(s):
            return ~s["done"] & (s["it"] < EVENT_MAX_ITER)

        def body(s):
            first = s["first"]
            switch_now = ~first & ((s["hi"] - s["lo"]) <= EVENT_TOL)
            located = first | switch_now
            # located: switch at hi and integrate the rest of the step with the
            # new mode (first: the whole step with the mode as it is)
            fired = system.event_roots(s["rhi"], s["vhi"], s["z"], s["hi"]) > 0
            z_new = system.event_switch(s["rhi"], s["vhi"], s["z"], fired, s["hi"])
            z_use = jax.tree_util.tree_map(lambda a, b: jnp.where(switch_now, a, b), z_new, s["z"])
            ta = jnp.where(switch_now, s["hi"], s["ta"])
            ra = jnp.where(switch_now, s["rhi"], s["ra"])
            va = jnp.where(switch_now, s["vhi"], s["va"])
            # otherwise: Illinois trial inside the bracket (the midpoint if degenerate)
            lo, hi, flo, fhi = s["lo"], s["hi"], s["flo"], s["fhi"]
            # (the secant point kept 1e-3 of the bracket from its ends: a root
            # close to an end - e.g. the mirror-image stop of the other side,
            # crossing 1e-17 s after the first - shrinks it 1000x per iteration)
            w = hi - lo
            tau = hi - fhi * w / (fhi - flo)
            tau = jnp.where(jnp.isfinite(tau), jnp.clip(tau, lo + 1e-3 * w, hi - 1e-3 * w), 0.5 * (lo + hi))
            tau = jnp.where(w <= 4 * EVENT_TOL, 0.5 * (lo + hi), tau)
            target = jnp.where(located, tb, tau)
            r_t, v_t, emax = advance(bound(z_use), ra, va, s["emax"], ta, target)
            f_t = phi_max(r_t, v_t, z_use, target)
            # bookkeeping after a switch: a new bracket [ta, tb] or done
            after = dict(ta=ta, ra=ra, va=va, z=z_use, lo=ta, hi=tb,
                         flo=phi_max(ra, va, z_use, ta), fhi=f_t, rhi=r_t, vhi=v_t,
                         side=jnp.zeros((), jnp.int32), done=~(f_t > 0), first=jnp.zeros((), bool))
            # bookkeeping of a trial: shrink the bracket (Illinois: halve the
            # kept end's value when the same end is kept twice)
            up = f_t > 0                      # the crossing is before tau: tau is the new hi
            side = jnp.where(up, 1, -1).astype(jnp.int32)
            flo_i = jnp.where(~up & (s["side"] == -1), flo, jnp.where(up & (s["side"] == 1), 0.5 * flo, flo))
            fhi_i = jnp.where(~up & (s["side"] == -1), 0.5 * fhi, fhi)
            trial = dict(ta=s["ta"], ra=s["ra"], va=s["va"], z=s["z"],
                         lo=jnp.where(up, lo, tau), hi=jnp.where(up, tau, hi),
                         flo=jnp.where(up, flo_i, f_t), fhi=jnp.where(up, f_t, fhi_i),
                         rhi=jnp.where(up, r_t, s["rhi"]), vhi=jnp.where(up, v_t, s["vhi"]),
                         side=side, done=jnp.zeros((), bool), first=jnp.zeros((), bool))
            out = jax.tree_util.tree_map(lambda a, b: jnp.where(located, a, b), after, trial)
            out.update(it=s["it"] + 1, n=s["n"] + switch_now.astype(s["n"].dtype), emax=emax)
            return out

        s = jax.lax.while_loop(cond, body, init)
        return _result(s, r1, v1, ~s["done"])

    def _result(s, r1, v1, overflow):
        # the loop ends with done = True: the state at tb is rhi/vhi after a
        # switch, or the first try (r1, v1) when nothing fired
        bad = jnp.where(overflow, jnp.nan, 0.0)
        fired_any = s["it"] > 0
        r_end = jnp.where(fired_any, s["rhi"], r1) + bad
        v_end = jnp.where(fired_any, s["vhi"], v1) + bad
        return r_end, v_end, s["z"], s["emax"], s["n"], overflow

    def one_step(carry, k):
        r, v, lin, fac, emax, z, n_ev, over = carry
        t = t0 + k * h
        sysz = bound(z)
        if stateful and N == 1 and events is None:
            r1, v1, z, emax, n_ev, ov = state_events(r, v, z, emax, t, None, None, n_ev)
            return (r1, v1, lin, fac, emax, z, n_ev, over | ov), None
        if events is None:
            out = whole_step(sysz, r, v, lin, fac, emax, k, t)
        else:
            from kernels.loads import STEP_TOL
            inside = jnp.any((events > t + STEP_TOL) & (events < t + h - STEP_TOL))
            out = jax.lax.cond(inside, lambda *a: split_step(sysz, *a), lambda *a: whole_step(sysz, *a),
                               r, v, lin, fac, emax, k, t)
        r1, v1, lin, fac, emax = out
        if stateful:
            # (a W-method's carried linearisation may stem from the mode before
            # an event until its next re-linearisation: its order holds for
            # any Jacobian; the located sub-steps linearise afresh)
            r1, v1, z, emax, n_ev, ov = state_events(r, v, z, emax, t, r1, v1, n_ev)
            over = over | ov
        return (r1, v1, lin, fac, emax, z, n_ev, over), None

    def sample_block(carry, i):
        ks = i * every + jnp.arange(every)
        carry, _ = jax.lax.scan(one_step, carry, ks)
        t = t0 + (i + 1) * every * h
        return carry, output_fn(carry[0], carry[1], t)

    z0 = system.event_state0(r0, v0, t0) if stateful else jnp.zeros((), r0.dtype)
    lin0, fac0, _ = relin(bound(z0), r0, v0, t0, h)
    carry0 = (r0, v0, lin0, fac0, jnp.zeros((), r0.dtype), z0, jnp.zeros((), jnp.int32),
              jnp.zeros((), bool))
    out0 = output_fn(r0, v0, t0)
    n = n_samples - 1
    if checkpoint_block:
        B = int(checkpoint_block)
        if n % B:
            raise ValueError(f"n_samples - 1 = {n} is not a multiple of checkpoint_block = {B}")

        @jax.checkpoint
        def chunk(carry, j):
            return jax.lax.scan(sample_block, carry, j * B + jnp.arange(B))
        carry, outs = jax.lax.scan(chunk, carry0, jnp.arange(n // B))
        outs = jax.tree_util.tree_map(lambda a: a.reshape((n,) + a.shape[2:]), outs)
    else:
        carry, outs = jax.lax.scan(sample_block, carry0, jnp.arange(n))
    outputs = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b], 0), out0, outs)
    times = t0 + jnp.arange(n_samples) * every * h
    if stateful:
        return Trajectory(times, outputs, carry[0], carry[1], carry[4], carry[6], carry[7], carry[5])
    return Trajectory(times, outputs, carry[0], carry[1], carry[4])
