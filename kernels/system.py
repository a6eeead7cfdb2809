"""Bind a model and an excitation into the integrator's system interface
(:class:`kernels.integrate.System`), so that every method - the fixed-step
Rosenbrock methods and the Radau reference - integrates the multibody
model through the same few functions."""

import jax
import jax.numpy as jnp
import numpy as np

from kernels import forces, linsolve, loads, metrics, statics
from kernels.dynamics import linearise_blocks, q_fn, states_with_ground
from kernels.integrate import System
from kernels.rotations import coordinate_rates

SOLVERS = ("block", "dense", "block32")


def model_system(model, exc, solver="block", split_steps=True, state_events=True) -> System:
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
    the excitation is traced, so that no step split is traced.

    State events: where the model has switching laws (a stop with ``law:
    switching``, a damper with switching ``friction``;
    ``Topology.p2p_events``), the system carries their discrete state z =
    (contact, slip, anchor) of every P2P element (:func:`switching_laws`);
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
    if not state_events or not (any(topo.p2p_events) or any(topo.bushing_events) or tyres):
        return system
    state0, roots, switch = switching_laws(model, exc)

    def bind(z):
        m = model.replace_elements(p2p={"contact": z[0], "slip": z[1], "anchor": z[2]}, bushing={"play_mode": z[3]})
        e = exc
        if tyres:       # a tyre off the road: no tyre force, no road force on its wheel
            rows = np.asarray(tyres)
            bu = m.elements["bushing"]
            m = m.replace_elements(bushing={"k": bu["k"].at[rows].multiply(z[4][:, None]),
                                            "c": bu["c"].at[rows].multiply(z[4][:, None])})
            e = loads.scaled_by_side(exc, z[4])
        return _bound_system(m, e, solver, split_steps)
    return system._replace(event_state0=state0, event_roots=roots, event_switch=switch, bind=bind)


def _bound_system(model, exc, solver, split_steps) -> System:
    m = model.topology.n_bodies
    return System(
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


def _switch_times(exc) -> tuple:
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(exc)):
        return ()
    return tuple(float(t) for t in loads.switch_times(exc))


def switching_laws(model, exc=None):
    """(state0, roots, switch) of the model's switching laws for
    :class:`kernels.integrate.System` (its ``event_*`` functions over flat
    r, v and the time t): z = (contact, slip, anchor) of every P2P element,
    (n_p2p,) each, the play modes of every bushing, (n_bushings, 6) - the
    parameters ``p2p`` ``contact``, ``slip``, ``anchor`` and ``bushing`` ``play_mode``
    that ``System.bind`` sets - and the road contact of each tyre (2,):
    1 on the road, 0 off it (only a model with tyres,
    ``kernels.statics.tyre_rows``). Root functions: one per switching P2P element
    (:func:`kernels.forces.p2p_root`, in the order of
    ``Topology.p2p_events``' non-empty entries), six per bushing with
    switching play (:func:`kernels.forces.bushing_play_root`; -1 for a
    direction without play), then one per tyre: its contact force as the
    law on the road would give it (:func:`tyre_contact_force`), minus it on
    the road, itself off it - the tyre lifts off where its force would pull
    and lands where it would push again (no jump of the force: a kink, the
    event)."""
    topo = model.topology
    m = topo.n_bodies
    idx = np.array([i for i, ev in enumerate(topo.p2p_events) if ev], int)
    is_contact = np.array([topo.p2p_events[i] == "contact" for i in idx])
    bodies = np.asarray(topo.p2p_bodies).reshape(-1, 2)[idx]
    bidx = np.array([i for i, ev in enumerate(topo.bushing_events) if ev], int)
    bbodies = np.asarray(topo.bushing_bodies).reshape(-1, 2)[bidx]
    prm_all = model.elements["p2p"]
    bprm_all = model.elements["bushing"]

    def states(r, v):
        return states_with_ground(r.reshape(m, 6), v.reshape(m, 6))

    def lengths(x, z):
        prm = jax.tree_util.tree_map(lambda a: a[idx], prm_all)
        prm.update(contact=z[0][idx], slip=z[1][idx], anchor=z[2][idx])
        _, L, Ldot, _ = jax.vmap(forces.p2p_tension)(prm, x[bodies[:, 0]], x[bodies[:, 1]])
        return prm, L, Ldot

    def deflections(x, z):
        prm = jax.tree_util.tree_map(lambda a: a[bidx], bprm_all)
        prm.update(play_mode=z[3][bidx])
        defl, _, _ = jax.vmap(forces.bushing_deflection)(prm, x[bbodies[:, 0]], x[bbodies[:, 1]])
        return prm, defl - prm["offset"]

    tyres = np.asarray(statics.tyre_rows(topo), int)

    def contact(r, v, t):
        return tyre_contact_force(model, exc, r.reshape(m, 6), v.reshape(m, 6), t)

    def state0(r, v, t=None):
        x = states(r, v)
        pp = model.elements["p2p"]
        z = (pp["contact"], pp["slip"], pp["anchor"], model.elements["bushing"]["play_mode"])
        if len(tyres):          # (a model without tyres keeps the four-part state it had)
            z = z + ((contact(r, v, t) >= 0).astype(r.dtype),)
        out = list(z)
        if len(idx):
            prm, L, Ldot = lengths(x, z)
            c, sl, an = jax.vmap(forces.p2p_mode0)(prm, L, Ldot, is_contact)
            out[:3] = (z[0].at[idx].set(c), z[1].at[idx].set(sl), z[2].at[idx].set(an))
        if len(bidx):
            prm, e = deflections(x, z)
            out[3] = z[3].at[bidx].set(jax.vmap(forces.bushing_play_mode0)(prm, e))
        return tuple(out)

    def roots(r, v, z, t=None):
        x = states(r, v)
        phi = []
        if len(idx):
            prm, L, Ldot = lengths(x, z)
            phi.append(jax.vmap(forces.p2p_root)(prm, L, Ldot, is_contact))
        if len(bidx):
            prm, e = deflections(x, z)
            phi.append(jax.vmap(forces.bushing_play_root)(prm, e).reshape(-1))
        if len(tyres):
            fc = contact(r, v, t)
            phi.append(jnp.where(z[4] > 0.5, -fc, fc))
        return jnp.concatenate(phi)

    def switch(r, v, z, fired, t=None):
        x = states(r, v)
        out = list(z)
        if len(idx):
            prm, L, Ldot = lengths(x, z)
            c, sl, an = jax.vmap(forces.p2p_switch)(prm, L, Ldot, is_contact, fired[:len(idx)])
            out[:3] = (z[0].at[idx].set(c), z[1].at[idx].set(sl), z[2].at[idx].set(an))
        if len(bidx):
            prm, e = deflections(x, z)
            f = fired[len(idx):len(idx) + 6 * len(bidx)].reshape(len(bidx), 6)
            out[3] = z[3].at[bidx].set(jax.vmap(forces.bushing_play_switch)(prm, e, f))
        if len(tyres):
            out[4] = jnp.where(fired[len(idx) + 6 * len(bidx):], 1.0 - z[4], z[4])
        return tuple(out)
    return state0, roots, switch


def tyre_contact_force(model, exc, r, v, t):
    """Vertical road force on each wheel [N] (2,) as the tyre law on the road
    gives it at the state (r, v) (m, 6) and time t: the wheel input's fz
    (static load and the road's part, :mod:`kernels.road`) minus the tyre
    bushing's force on the ground (its spring and damper from their rest in
    the static state, :func:`kernels.statics.tyres_at_rest`)."""
    f = metrics.bushing_forces(model, r, v, rows=statics.tyre_rows(model.topology))
    return loads.u_at(exc, t)[:, 2] - f[:, 2]
