"""The time response of one variant: the one driver that the time-response
job kind, tuning (checkpointed reverse mode), the generated backend, the
tests and the benchmarks all call.

A time-response problem is its values and its structure, kept apart so that
a compiled program is keyed on structure only:

- :class:`Problem` (a pytree, traced): the model, the load case's
  excitation (:mod:`kernels.loads`), the start time ``t0`` [s] and the step
  ``dt`` [s];
- :class:`Options` (frozen, hashable: a static argument of ``jax.jit``):
  the method (a :class:`kernels.integrate.Method` value or its name in
  :data:`kernels.methods.METHODS`), the number of output samples, the
  output thinning ``every``, how often the linearisation is renewed, the
  linear solver of eq. (11), whether a step may be split at a load event,
  whether switching force laws run as state events, the reverse mode's
  checkpoint block and the error tolerance of an embedded method.

:func:`driver` turns options and an output function into the pair
``(init, run)``: ``init(problem) -> Start`` is the static equilibrium under
the loads at ``t0`` (the state the run starts from, at rest), and
``run(problem, r_eq) -> Trajectory`` integrates from it with the method
(method.md eqs. 6-11, :mod:`kernels.integrate`), the outputs sampled every
``every`` steps. :func:`solve` is the jitted single-variant composition.

The default outputs (:data:`OUTPUTS`) are the time-response cube's channels:
wheel-centre displacement from the static equilibrium [m], toe and camber
[rad] (DIN 70000), bushing forces and torques on the first body [N, N m].
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from kernels import loads, metrics, statics
from kernels.dynamics import group_input, input_groups, with_inputs
from kernels.integrate import Trajectory, events_inside_steps
from kernels.model import Model
from kernels.system import SOLVERS, model_system


class Problem(NamedTuple):
    """The values of one time response (traced: a changed value reuses the
    compiled program)."""
    model: Model
    excitation: Any          # kernels.loads.Excitation
    t0: Any                  # start time [s]: the static equilibrium is under the loads at t0
    dt: Any                  # step [s] (a fixed-step method), output grid (a variable-step one)


@dataclasses.dataclass(frozen=True)
class Options:
    """The structure of one time response (static, hashable).

    ``method``: a method value or its name (:data:`kernels.methods.METHODS`);
    ``n_samples``: output samples at t0 + i every dt; ``relinearise_every``:
    steps between renewals of the linearisation; ``solver``: one of
    :data:`kernels.system.SOLVERS`; ``split_steps``: whether a step may be
    split at a load event inside it (None: decided by :func:`solve` from the
    concrete load case, :func:`needs_split`, and taken as True - always
    correct - by a driver run under a trace); ``state_events``:
    switching stop and friction laws as state events (False: the laws as
    statics sees them, for reverse-mode differentiation); ``checkpoint_block``:
    steps per checkpointed block of the reverse pass (None: none);
    ``tolerance``: (rtol, atol_coordinates [m, rad], atol_speeds [m/s, rad/s])
    of an embedded method's error estimate (``Trajectory.max_error`` <= 1:
    within it), None to leave the estimate out; ``equilibrium_solver``: how
    the static equilibrium's Newton steps are solved
    (:func:`kernels.statics.newton_increment`: ``dense``, or ``block``,
    faster per iteration and twice as long to compile)."""
    n_samples: int
    method: Any = "lsrt2"
    every: int = 1
    relinearise_every: int = 1
    solver: str = "block"
    split_steps: Optional[bool] = None
    state_events: bool = True
    checkpoint_block: Optional[int] = None
    tolerance: Optional[tuple] = None
    equilibrium_solver: str = "dense"

    def __post_init__(self):
        if isinstance(self.method, str):
            from kernels.methods import METHODS
            object.__setattr__(self, "method", METHODS[self.method])
        for name in ("n_samples", "every", "relinearise_every"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"Options.{name} = {getattr(self, name)} must be >= 1")
            object.__setattr__(self, name, int(getattr(self, name)))
        if self.solver not in SOLVERS:
            raise ValueError(f"Options.solver = {self.solver!r} is not one of {', '.join(SOLVERS)}")
        if self.tolerance is not None:
            object.__setattr__(self, "tolerance", tuple(float(x) for x in self.tolerance))

    @property
    def n_steps(self) -> int:
        """Steps of the run: (n_samples - 1) every."""
        return (self.n_samples - 1) * self.every


def needs_split(exc, t0, dt, n_steps) -> bool:
    """Whether a load event of a concrete load case lies strictly inside one
    of the run's steps (a structural choice made on the host,
    :func:`kernels.integrate.events_inside_steps`): a load case with its
    switches on the step grid compiles without the split."""
    return events_inside_steps(loads.event_times(exc), t0, dt, n_steps)


def error_norm(tolerance):
    """RMS of the embedded error estimate, each component scaled by atol +
    rtol |y| (coordinates and speeds with their own atol): <= 1 means the
    step's local error is within ``tolerance`` = (rtol, atol_coordinates,
    atol_speeds)."""
    rtol, atol_r, atol_v = tolerance

    def norm(err_r, err_v, r, v):
        sr = err_r / (atol_r + rtol * jnp.abs(r))
        sv = err_v / (atol_v + rtol * jnp.abs(v))
        return jnp.sqrt(jnp.mean(jnp.concatenate([sr, sv]) ** 2))
    return norm


# ----- outputs

class Sample(NamedTuple):
    """What an output function sees at one sample of one variant."""
    model: Model
    r: jax.Array             # (n_bodies, 6) poses [m, rad]
    v: jax.Array             # (n_bodies, 6) pose rates [m/s, rad/s]
    r_eq: jax.Array          # (n_bodies, 6) the variant's static equilibrium
    bushing_index: object    # the bushings to output (numpy index array), None for all


def wheel_centre_displacement(s: Sample):
    """(side, axis) wheel-centre displacement from the static equilibrium [m]."""
    return metrics.wheel_centre_position(s.model, s.r) - metrics.wheel_centre_position(s.model, s.r_eq)


def toe(s: Sample):
    """(side,) toe angle [rad] (DIN 70000, + = toe-in)."""
    return metrics.toe_camber(s.model, s.r)[0]


def camber(s: Sample):
    """(side,) camber angle [rad] (DIN 70000, + = top out)."""
    return metrics.toe_camber(s.model, s.r)[1]


def bushing_force(s: Sample):
    """(bushing, component) force [N] and torque [N m] of each bushing on its
    first body, vehicle frame."""
    f = metrics.bushing_forces(s.model, s.r, s.v)
    return f if s.bushing_index is None else f[s.bushing_index]


@dataclasses.dataclass(frozen=True)
class GroupForce:
    """Output: (element, component) force [N] and torque [N m] of each element
    of the element group ``group`` on its first body, vehicle frame (the
    group's ``output``; :func:`kernels.metrics.element_forces`)."""
    group: str

    def __call__(self, s: Sample):
        return metrics.element_forces(s.model, self.group, s.r, s.v)


# the default outputs, in the time-response cube's order
OUTPUTS = {"wheel_centre_displacement": wheel_centre_displacement, "toe": toe, "camber": camber,
           "bushing_force": bushing_force}


def make_outputs(bushing_idx=None, table=None) -> Callable:
    """``out(model, r, v, r_eq) -> {name: value}`` (r, v flat or (n_bodies,
    6)) from a table {name: fn(Sample)} (default :data:`OUTPUTS`);
    ``bushing_idx`` selects the bushings (default: all)."""
    import numpy as np
    idx = None if bushing_idx is None else np.asarray(bushing_idx)
    table = OUTPUTS if table is None else table

    def out(m, r, v, r_eq):
        nb = m.topology.n_bodies
        s = Sample(m, r.reshape(nb, 6), v.reshape(nb, 6), r_eq.reshape(nb, 6), idx)
        return {name: fn(s) for name, fn in table.items()}
    return out


# ----- the driver

class Start(NamedTuple):
    """The state a run starts from: the static equilibrium at t0, at rest."""
    r: jax.Array             # (n_bodies, 6) poses [m, rad]
    converged: jax.Array     # bool: Newton converged
    iterations: jax.Array    # Newton iterations


def _init(p: Problem, solver="dense") -> Start:
    """The static equilibrium under the loads at t0 (method.md section 1),
    without the load case's harmonics (a road's: their mean is zero, the
    static state is the one on the road's mean height). ``solver``: of its
    Newton steps (:func:`kernels.statics.newton_increment`)."""
    eq = statics.static_equilibrium(p.model, loads.u_at(loads.without_harmonics(p.excitation), p.t0),
                                    solver=solver)
    return Start(eq.r, eq.converged, eq.iterations)


class Driver(NamedTuple):
    init: Callable           # (problem) -> Start
    run: Callable            # (problem, r_eq) -> Trajectory


def driver(options: Options, outputs: Optional[Callable] = None) -> Driver:
    """The time response's ``(init, run)`` for ``options`` (module doc).
    ``outputs(model, r, v, r_eq) -> pytree`` maps a state to the sampled
    outputs (default :func:`make_outputs` of every bushing). Both functions
    are pure: jit-, vmap- and (with ``state_events=False`` and a
    ``checkpoint_block``) reverse-mode-safe for a jittable method; a
    host method (the Radau reference) runs them eagerly."""
    out_fn = make_outputs() if outputs is None else outputs
    meth = options.method
    norm = (error_norm(options.tolerance)
            if options.tolerance is not None and meth.has_error_estimate else None)

    def run(p: Problem, r_eq) -> Trajectory:
        split = True if options.split_steps is None else options.split_steps
        model = statics.at_rest(p.model, r_eq.reshape(p.model.topology.n_bodies, 6))  # tyres, sprung body: at rest
        system = model_system(model, p.excitation, options.solver, split, options.state_events)
        n = r_eq.size
        if input_groups(model.topology):    # outputs see the groups' inputs at the sample's time
            out = lambda r, v, t: out_fn(with_inputs(model, group_input(model, t)), r, v, r_eq)  # noqa: E731
        else:
            out = lambda r, v, t: out_fn(model, r, v, r_eq)  # noqa: E731
        return meth.simulate(system, r_eq.reshape(-1), jnp.zeros(n, r_eq.dtype), p.t0, p.dt, options.n_samples,
                             options.every, options.relinearise_every, out, error_norm=norm,
                             checkpoint_block=options.checkpoint_block)
    return Driver(lambda p: _init(p, options.equilibrium_solver), run)


def solve(problem: Problem, options: Options, r_eq, bushing_idx=None):
    """The single-variant path: :func:`driver`'s ``run`` from ``r_eq`` with
    the default outputs (``bushing_idx``: the bushings, default all), jitted
    for a jittable method (the problem traced, the options static); returns
    the outputs at every sample. ``solve.lower(...)`` lowers the same call
    (the benchmarks compile apart from the timed run)."""
    bidx = None if bushing_idx is None else tuple(int(i) for i in bushing_idx)
    options = with_split_decided(problem, options)
    if not options.method.jittable:
        return _solve(problem, options, r_eq, bidx)
    return _solve_jit(problem, options, r_eq, bidx)


def _solve(problem, options, r_eq, bidx):
    return driver(options, make_outputs(bidx)).run(problem, r_eq).outputs


def with_split_decided(problem, options):
    """``options`` with ``split_steps`` decided from the concrete problem's load
    events (:func:`needs_split`) where it is None."""
    if options.split_steps is not None:
        return options
    split = needs_split(problem.excitation, problem.t0, problem.dt, options.n_steps)
    return dataclasses.replace(options, split_steps=split)


_solve_jit = jax.jit(_solve, static_argnums=(1, 3))
solve.lower = lambda problem, options, r_eq, bushing_idx=None: _solve_jit.lower(  # noqa: E731
    problem, with_split_decided(problem, options), r_eq,
    None if bushing_idx is None else tuple(int(i) for i in bushing_idx))


# the driver's ``init`` (it does not depend on the options), jitted
equilibrium = jax.jit(_init)
