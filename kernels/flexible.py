"""Flexible bodies: a floating reference frame plus modal coordinates (Lion,
seed 002, Gl. 1-9; the Craig-Bampton data come from ``sweep.flexible``).

A flexible body's deformation relative to its reference frame is a Ritz
series ``u = Phi q`` over n elastic modes. The frame is the rigid body of
the same mass and inertia (6 coordinates, its slot in the state as for any
body); the n modal coordinates fill ``n / 6`` further state slots, the
*modal slots* (``Topology.flex_bodies``), whose ``r`` rows are q and whose
``v`` rows are dq/dt (``dr/dt = v``: :func:`kernels.rotations.coordinate_rates`
with ``modal``). The block solver, statics, modes and the time loop see 6-wide
blocks as for rigid bodies; a body with n modes spans ``1 + n / 6`` of them.

Terms kept (the mean-axis, zeroth-order floating-frame formulation). The
modes are mass-normalised and M-orthogonal to the six rigid motions, and
the frame origin is the centre of mass, so the invariants I2 (first
moment), I3 and I4 (translational and rotational coupling) vanish at q = 0
(``sweep.flexible.craig_bampton``). The mass matrix is then
``diag(m I, J, I_n)``: the rigid body's, plus unit modal mass. Kept: the
frame's full rigid-body dynamics (Newton-Euler with its gyroscopic term),
modal stiffness ``omega^2`` and modal damping ``2 zeta omega`` (Gl. 9, Ke
and De), and every force element at an interface node with its exact
first-order kinematics (:func:`deformed_element`). Dropped: the terms of
first order in q of the mass matrix and of the quadratic velocity vector
(I5, I8: the coupling ``M_tq = -R skew(I3 q)`` ..., centrifugal and Coriolis
couplings ``omega x (omega x I3 q)``, ``2 omega x I3 dq/dt``) and geometric
stiffening (I9). Relative to the elastic force ``omega_e^2 q`` they are of
size ``(Omega / omega_e)^2`` and ``Omega / omega_e`` for a frame turning at
``Omega``; for an axle part (Omega < 5 rad/s during a K&C or ride manoeuvre,
first elastic mode omega_e > 2 pi 50 rad/s) under 2e-2 of the dynamic
deformation, which is itself a small part of the deflection. Gravity has no
modal part (I3 = 0).

Interface nodes. A force element at a marker on a flexible body sees the
marker moved by the deformation: position ``p + Phi q``, orientation
``Rot(Psi q) R_m`` (body frame), and the marker's velocity and angular
velocity gain ``Phi dq/dt`` and ``Psi dq/dt``. The element is evaluated
unchanged on a *virtual rigid state* of its body that carries these
(same pose of the frame, velocities shifted) with its marker pose replaced
by the deformed one, and its generalised forces on the virtual velocities
are mapped to the frame and modal coordinates by the transpose of the
(linear) velocity map (virtual power). So every element group works at an
interface node, and its Jacobian with respect to the frame and the modal
slots comes out of forward-mode autodiff like any element's.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from kernels.rotations import euler_to_matrix, mv, rotation_matrix


def end_blocks(topo, slot, interface):
    """State slots an element end depends on: its body slot (none for the
    ground), then the modal slots of its flexible body when the end is at an
    interface node."""
    m = topo.n_bodies
    if slot == m:
        return ()
    if interface < 0:
        return (int(slot),)
    return (int(slot),) + tuple(topo.flex_bodies[topo.flex_interface_body[interface]][1])


def subsets(topo, group):
    """Static split of a group's elements by how their ends attach.

    Yields ``(idx, ifaces, blocks)``: ``idx`` the elements (array), ``ifaces``
    (len(idx), 2) their interface indices, and per end the tuple of block
    *positions* ... see :func:`_signature`. Elements whose two ends are rigid
    markers are left out (the rigid path of kernels.dynamics)."""
    bodies = np.asarray(group.bodies(topo)).reshape(-1, 2)
    ifaces = topo.interfaces(group)
    m = topo.n_bodies
    sigs = {}
    for e in range(len(bodies)):
        if ifaces[e, 0] < 0 and ifaces[e, 1] < 0:
            continue
        sig = tuple(-2 if bodies[e, s] == m else
                    (-1 if ifaces[e, s] < 0 else topo.flex_interface_body[ifaces[e, s]]) for s in (0, 1))
        sigs.setdefault(sig, []).append(e)
    out = []
    for sig, idx in sigs.items():
        idx = np.array(idx, int)
        blocks = np.array([end_blocks(topo, bodies[e, 0], ifaces[e, 0]) + end_blocks(topo, bodies[e, 1], ifaces[e, 1])
                           for e in idx], int)
        out.append((sig, idx, ifaces[idx], blocks))
    return out


def rigid_elements(topo, group):
    """Indices of the group's elements with both ends at rigid markers."""
    ifaces = topo.interfaces(group)
    return np.nonzero((ifaces[:, 0] < 0) & (ifaces[:, 1] < 0))[0]


def flex_edges(topo):
    """Block-pattern edges of the elements at interface nodes: every pair of
    the slots an element touches (frame and modal slots of both ends)."""
    edges = []
    for group in topo.element_groups:
        for _, _, _, blocks in subsets(topo, group):
            for row in blocks:
                edges += [(a, b) for a in row for b in row if a != b]
    return np.array(edges, int).reshape(-1, 2)


def _n_modes(topo, sig_end):
    return 6 * len(topo.flex_bodies[sig_end][1]) if sig_end >= 0 else 0


def deformed_element(topo, group, sig):
    """``(prm, phi, psi, X) -> G``: the group's element between ends of
    signature ``sig`` (per end: flexible body, -1 rigid marker, -2 ground),
    on the stacked states X (nB, 12) of the slots it touches (order of
    :func:`end_blocks`, end 1 then end 2), returning the generalised forces
    (nB, 6) on them. ``phi``, ``psi``: (2, 3, n_max) mode shapes at the two
    ends' interface nodes (ignored for a rigid end)."""
    ends = []
    pos = 0
    for s in (0, 1):
        if sig[s] == -2:
            ends.append(None)
            continue
        n = _n_modes(topo, sig[s])
        ends.append((pos, n))
        pos += 1 + n // 6
    n_blocks = pos

    def fn(prm, phi, psi, X):
        prm = dict(prm)
        r, vel, qd = [], [], []
        for s, end in enumerate(ends):
            if end is None:
                r.append(jnp.zeros(6, X.dtype)); vel.append(jnp.zeros(6, X.dtype)); qd.append(None)
                continue
            at, n = end
            r.append(X[at, :6]); vel.append(X[at, 6:])
            if n == 0:
                qd.append(None)
                continue
            q = X[at + 1: at + 1 + n // 6, :6].reshape(-1)
            qd.append(X[at + 1: at + 1 + n // 6, 6:].reshape(-1))
            key = f"pos{s + 1}"
            prm[key] = prm[key] + mv(phi[s, :, :n], q)            # p + Phi q
            if f"rot{s + 1}" in prm:                                 # Rot(Psi q) R_m
                prm[f"rot{s + 1}"] = rotation_matrix(mv(psi[s, :, :n], q)) @ prm[f"rot{s + 1}"]

        def velocity_map(vel, qd):
            out = []
            for s, end in enumerate(ends):
                if end is None or end[1] == 0:
                    out.append(vel[s])
                    continue
                n = end[1]
                dp = mv(phi[s, :, :n], qd[s])
                dth = mv(psi[s, :, :n], qd[s])
                R = euler_to_matrix(r[s][3:])
                # marker velocity v + R(w x p') + R Phi qd with w' = w + Psi qd
                vt = vel[s][:3] + mv(R, dp - jnp.cross(dth, prm[f"pos{s + 1}"]))
                out.append(jnp.concatenate([vt, vel[s][3:] + dth]))
            return out
        vt, pull = jax.vjp(velocity_map, vel, qd)
        g = group.element(prm, jnp.concatenate([r[0], vt[0]]), jnp.concatenate([r[1], vt[1]]))
        g_vel, g_qd = pull(list(g))
        G = []
        for s, end in enumerate(ends):
            if end is None:
                continue
            G.append(g_vel[s][None])
            if end[1]:
                G.append(g_qd[s].reshape(-1, 6))
        return jnp.concatenate(G, 0)
    fn.n_blocks = n_blocks
    return fn


def _params(model, group, idx, ifaces):
    prm = jax.tree_util.tree_map(lambda a: a[idx], group.params(model))
    safe = np.maximum(ifaces, 0)
    return prm, model.flex["phi"][safe], model.flex["psi"][safe]


def group_forces(model, group, x):
    """Generalised forces of the group's elements at interface nodes on the
    slots they touch: a list of (forces (e, nB, 6), slots (e, nB)). ``x``:
    states with ground (m + 1, 12)."""
    topo = model.topology
    out = []
    for sig, idx, ifaces, blocks in subsets(topo, group):
        fn = deformed_element(topo, group, sig)
        prm, phi, psi = _params(model, group, idx, ifaces)
        out.append((jax.vmap(fn)(prm, phi, psi, x[blocks]), blocks))
    return out


def group_jacobians(model, group, x):
    """As :func:`group_forces`, with d G / d X (e, nB, 6, nB, 12) over the
    touched slots' (r, v)."""
    topo = model.topology
    out = []
    for sig, idx, ifaces, blocks in subsets(topo, group):
        fn = deformed_element(topo, group, sig)
        prm, phi, psi = _params(model, group, idx, ifaces)

        def with_jac(p, f, s, X):
            def value(Y):
                G = fn(p, f, s, Y)
                return G, G
            return jax.jacfwd(value, has_aux=True)(X)
        dG, G = jax.vmap(with_jac)(prm, phi, psi, x[blocks])
        out.append((G, dG, blocks))
    return out


def modal_forces(model, r, v):
    """Elastic and damping forces of the modal slots, ``-omega^2 q - 2 zeta
    omega dq/dt`` (Gl. 9), (nq, 6) in Topology.modal_slots order."""
    ms = model.topology.modal_slots
    return -model.flex["k"] * r[ms] - model.flex["c"] * v[ms]


@functools.lru_cache(maxsize=64)
def rigid_slots(topology):
    """State slots of the rigid bodies and flexible frames (not modal)."""
    return np.setdiff1d(np.arange(topology.n_bodies), topology.modal_slots)
