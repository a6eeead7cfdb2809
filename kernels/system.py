"""Bind a model and an excitation into the integrator's system interface
(:class:`kernels.integrate.System`), so that every method - the fixed-step
Rosenbrock methods and the Radau reference - integrates the multibody
model through the same few functions."""
import jax

from kernels import linsolve, loads
from kernels.dynamics import linearise_blocks, q_fn
from kernels.integrate import System
from kernels.rotations import coordinate_rates

SOLVERS = ("block", "dense", "block32")


def model_system(model, exc, solver="block", split_steps=True) -> System:
    """System over flat r, v (6 m,) and flat u (12,) for :mod:`kernels.integrate`.

    ``solver``: how eq. (11) is factorised, one of ``SOLVERS`` (block LU in
    the elimination order of the body graph, or dense partially pivoted LU;
    ``block32``: the block LU and its two solves in float32, everything else
    - q, the Jacobian products, the state - in float64; an explicit
    precision option, its accuracy cost in BENCHMARKS.md); all use the
    block-sparse linearisation. ``switch_times`` are the excitation's
    (:func:`kernels.loads.switch_times`) when it is concrete, empty when
    ``exc`` is traced (under ``jit``, where only the fixed-step methods run,
    which do not read them). The fixed-step methods read the input one-sided
    per step and split a step at an event inside it (``u_one_sided``,
    ``du_one_sided``, ``events``: :mod:`kernels.loads`). ``split_steps=False``
    leaves the events out: for a caller that knows that every event is on
    the step grid (:func:`kernels.integrate.events_inside_steps`) although
    the excitation is traced, so that no step split is traced."""
    if solver not in SOLVERS:
        raise ValueError(f"solver = {solver!r} is not one of {', '.join(SOLVERS)}")
    m = model.topology.n_bodies
    return System(
        linearise=lambda r, v, u: linearise_blocks(model, r.reshape(m, 6), v.reshape(m, 6), u.reshape(2, 6)),
        q=lambda r, v, u: q_fn(model, r.reshape(m, 6), v.reshape(m, 6), u.reshape(2, 6)).reshape(-1),
        rates=lambda r, v: coordinate_rates(r.reshape(m, 6), v.reshape(m, 6)).reshape(-1),
        u=lambda t: loads.u_at(exc, t).reshape(-1),
        du=lambda t: loads.du_dt(exc, t).reshape(-1),
        u_one_sided=lambda t, t_ref: loads.u_one_sided(exc, t, t_ref).reshape(-1),
        du_one_sided=lambda t_ref: loads.du_one_sided(exc, t_ref).reshape(-1),
        events=(lambda: loads.event_times(exc)) if split_steps else None,
        solver=linsolve.model_solver(model.topology, solver),
        switch_times=_switch_times(exc),
    )


def _switch_times(exc) -> tuple:
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(exc)):
        return ()
    return tuple(float(t) for t in loads.switch_times(exc))
