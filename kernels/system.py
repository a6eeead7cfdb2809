"""Bind a model and an excitation into the integrator's system interface
(:class:`kernels.integrate.System`), so that every method - the fixed-step
Rosenbrock methods and the Radau reference - integrates the multibody
model through the same few functions."""

import jax
import jax.numpy as jnp
import numpy as np

from kernels import linsolve, loads, metrics, statics
from kernels.dynamics import (group_input, group_inputs, input_groups, linearise_blocks, linearise_with_inputs,
                              q_fn, states_with_ground, with_inputs)
from kernels.integrate import System
from kernels.rotations import coordinate_rates

SOLVERS = ("block", "dense", "block32")


def model_system(model, exc, solver="block", split_steps=True, state_events=True) -> System:
    """System over flat r, v (6 m,) and flat u (12,) for :mod:`kernels.integrate`
    (with element groups that read a time-varying input, u is the wheel
    loads (12) followed by their inputs: :func:`kernels.dynamics.group_inputs`).

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
    the excitation is traced, so that no step split is traced.

    State events: where the model has switching laws (a stop with ``law:
    switching``, a damper with switching ``friction``, a bushing's play with
    the switching law, an added group's ``events``; tyres that may lift
    off), the system carries their discrete state z (:func:`switching_laws`);
    a model without them has none (nothing is traced for them).
    ``state_events=False`` leaves them out: the stops by the sign of their
    penetration, no friction force (the laws as statics sees them) - for
    reverse-mode differentiation, which the location loop (a
    ``while_loop``) does not allow."""
    if solver not in SOLVERS:
        raise ValueError(f"solver = {solver!r} is not one of {', '.join(SOLVERS)}")
    system = _bound_system(model, exc, solver, split_steps)
    topo = model.topology
    tyres = statics.tyre_rows(topo)
    if not state_events or not (event_groups(topo) or tyres):
        return system
    state0, roots, switch = switching_laws(model, exc)

    def bind(z):
        m = model.replace_elements(**{g: s for g, s in z.items() if g != "tyre_contact"})
        e = exc
        if tyres:       # a tyre off the road: no tyre force, no road force on its wheel
            rows = np.asarray(tyres)
            bu = m.elements["bushing"]
            on = z["tyre_contact"]
            m = m.replace_elements(bushing={"k": bu["k"].at[rows].multiply(on[:, None]),
                                            "c": bu["c"].at[rows].multiply(on[:, None])})
            e = loads.scaled_by_side(exc, on)
        return _bound_system(m, e, solver, split_steps)
    return system._replace(event_state0=state0, event_roots=roots, event_switch=switch, bind=bind)


def _bound_system(model, exc, solver, split_steps) -> System:
    m = model.topology.n_bodies
    system = System(
        linearise=lambda r, v, u: linearise_blocks(model, r.reshape(m, 6), v.reshape(m, 6), u.reshape(2, 6)),
        q=lambda r, v, u: q_fn(model, r.reshape(m, 6), v.reshape(m, 6), u.reshape(2, 6)).reshape(-1),
        rates=lambda r, v: coordinate_rates(r.reshape(m, 6), v.reshape(m, 6), model.topology.modal_slots).reshape(-1),
        u=lambda t: loads.u_at(exc, t).reshape(-1),
        du=lambda t: loads.du_dt(exc, t).reshape(-1),
        u_one_sided=lambda t, t_ref: loads.u_one_sided(exc, t, t_ref).reshape(-1),
        du_one_sided=lambda t_ref, t=None: loads.du_one_sided(exc, t_ref, t).reshape(-1),
        events=(lambda: loads.event_times(exc)) if split_steps else None,
        solver=linsolve.model_solver(model.topology, solver),
        switch_times=_switch_times(exc),
    )
    if not input_groups(model.topology):
        return system

    # element groups that read time-varying inputs: the flat input is [wheel
    # loads (12) | the groups' inputs] (kernels.dynamics.group_input); the
    # groups' inputs are smooth, so their one-sided value and rate are the plain ones
    def cat(a, b):
        return jnp.concatenate([a, b])
    return system._replace(
        linearise=lambda r, v, u: linearise_with_inputs(model, r.reshape(m, 6), v.reshape(m, 6), u),
        q=lambda r, v, u: q_fn(with_inputs(model, u[12:]), r.reshape(m, 6), v.reshape(m, 6),
                               u[:12].reshape(2, 6)).reshape(-1),
        u=lambda t: cat(system.u(t), group_input(model, t)),
        du=lambda t: cat(system.du(t), group_inputs(model, t)[1]),
        u_one_sided=lambda t, t_ref: cat(system.u_one_sided(t, t_ref), group_input(model, t)),
        du_one_sided=lambda t_ref, t=None: cat(system.du_one_sided(t_ref, t),
                                               group_inputs(model, t_ref if t is None else t)[1]))


def _switch_times(exc) -> tuple:
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(exc)):
        return ()
    return tuple(float(t) for t in loads.switch_times(exc))


def event_groups(topo):
    """[(group, rows)]: the model's element groups with state events
    (``ElementGroup.events``) and the rows of their elements that have them
    (``Topology.group_static[name]["events"]`` truthy), in the groups' order."""
    out = []
    for g in topo.element_groups:
        if g.events is not None:
            rows = np.array([i for i, ev in enumerate(topo.group_static.get(g.name, {}).get("events", ())) if ev], int)
            if len(rows):
                out.append((g, rows))
    return out


def switching_laws(model, exc=None):
    """(state0, roots, switch) of the model's switching laws for
    :class:`kernels.integrate.System` (its ``event_*`` functions over flat
    r, v and the time t). The discrete state z is a dict: for every element
    group with state events (:func:`event_groups`; the P2P stops and
    friction dampers, the bushings with switching play, an added group's
    own, :class:`kernels.forces.Events`) {group: {entry: (n, ...) array}},
    the entries of its parameter table that ``System.bind`` sets; and
    ``"tyre_contact"``, the road contact of each tyre (2,): 1 on the road, 0
    off it (only a model with tyres, ``kernels.statics.tyre_rows``). Root
    functions: the groups' (``n_roots`` per element with events, in the
    groups' order), then one per tyre: its contact force as the law on the
    road would give it (:func:`tyre_contact_force`), minus it on the road,
    itself off it - the tyre lifts off where its force would pull and lands
    where it would push again (no jump of the force: a kink, the event)."""
    topo = model.topology
    m = topo.n_bodies
    groups = []
    for g, rows in event_groups(topo):
        ends = np.asarray(g.bodies(topo)).reshape(-1, 2)[rows]
        flag = (np.zeros(len(g.names(topo))) if g.events.flag is None else np.asarray(g.events.flag(topo)))[rows]
        groups.append((g, rows, ends, flag))

    def states(r, v):
        return states_with_ground(r.reshape(m, 6), v.reshape(m, 6))

    def table(g, rows, z):
        """The event elements' parameter rows with the discrete state of z."""
        prm = jax.tree_util.tree_map(lambda a: a[rows], g.params(model))
        prm.update({k: z[g.name][k][rows] for k in g.events.state})
        return prm

    def each(fn, g, rows, ends, flag, x, z, *args):
        return jax.vmap(fn)(table(g, rows, z), x[ends[:, 0]], x[ends[:, 1]], flag, *args)

    tyres = np.asarray(statics.tyre_rows(topo), int)

    def contact(r, v, t):
        return tyre_contact_force(model, exc, r.reshape(m, 6), v.reshape(m, 6), t)

    def state0(r, v, t=None):
        x = states(r, v)
        z = {g.name: {k: g.params(model)[k] for k in g.events.state} for g, *_ in groups}
        out = {}                # every group of z gets its fitted state below
        for g, rows, ends, flag in groups:
            new = each(g.events.mode0, g, rows, ends, flag, x, z)
            out[g.name] = {k: z[g.name][k].at[rows].set(new[k]) for k in g.events.state}
        if len(tyres):
            out["tyre_contact"] = (contact(r, v, t) >= 0).astype(r.dtype)
        return out

    def roots(r, v, z, t=None):
        x = states(r, v)
        phi = [each(g.events.root, g, rows, ends, flag, x, z).reshape(-1) for g, rows, ends, flag in groups]
        if len(tyres):
            fc = contact(r, v, t)
            phi.append(jnp.where(z["tyre_contact"] > 0.5, -fc, fc))
        return jnp.concatenate(phi)

    def switch(r, v, z, fired, t=None):
        x = states(r, v)
        out = dict(z)
        o = 0
        for g, rows, ends, flag in groups:
            n = len(rows) * g.events.n_roots
            f = fired[o:o + n].reshape(len(rows), g.events.n_roots)
            new = each(g.events.switch, g, rows, ends, flag, x, z, f)
            out[g.name] = {k: z[g.name][k].at[rows].set(new[k]) for k in g.events.state}
            o += n
        if len(tyres):
            out["tyre_contact"] = jnp.where(fired[o:], 1.0 - z["tyre_contact"], z["tyre_contact"])
        return out
    return state0, roots, switch


def tyre_contact_force(model, exc, r, v, t):
    """Vertical road force on each wheel [N] (2,) as the tyre law on the road
    gives it at the state (r, v) (m, 6) and time t: the wheel input's fz
    (static load and the road's part, :mod:`kernels.road`) minus the tyre
    bushing's force on the ground (its spring and damper from their rest in
    the static state, :func:`kernels.statics.tyres_at_rest`)."""
    f = metrics.bushing_forces(model, r, v, rows=statics.tyre_rows(model.topology))
    return loads.u_at(exc, t)[:, 2] - f[:, 2]
