"""Flexible bodies: a floating reference frame plus modal coordinates (Lion,
seed 002, Gl. 1-9; the Craig-Bampton data come from ``sweep.axle.fe``).

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
(``sweep.axle.fe.craig_bampton``). The mass matrix is then
``diag(m I, J, I_n)``: the rigid body's, plus unit modal mass. Kept: the
frame's full rigid-body dynamics (Newton-Euler with its gyroscopic term),
modal stiffness ``omega^2`` and modal damping ``2 zeta omega`` (Gl. 9, Ke
and De), and every force element at an interface node with its exact
first-order kinematics (:func:`interface_element`). Dropped: the terms of
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
unchanged on a *virtual rigid state* of its end: a rigid body that carries
the element's marker (its local pose unchanged) to the deformed node, with
speeds linear in the frame's and modal speeds (:func:`virtual_kinematics`).
Its generalised forces on the virtual speeds map to the frame and modal
coordinates by the transpose of that velocity map (virtual power), and its
Jacobian - the group's closed form where it has one - by the chain rule
(:func:`interface_element`). So every element group works at an interface
node without code of its own.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from kernels.rotations import euler_to_matrix, matrix_to_euler, mv, rotation_matrix, skew


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

    Returns a list of ``(sig, idx, ifaces, blocks)``, one per signature
    ``sig`` (per end: its flexible body, -1 a rigid marker, -2 the ground):
    ``idx`` the elements, ``ifaces`` (len(idx), 2) their interface indices,
    ``blocks`` (len(idx), nB) the state slots each touches
    (:func:`end_blocks` of end 1, then of end 2). Elements whose two ends
    are rigid markers are left out (the rigid path of kernels.dynamics)."""
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


def _ends(topo, sig):
    """Per element end: None (ground) or (position of its body's block among
    the touched slots, number of modes of its flexible body (0: rigid
    marker)); and the number of touched slots."""
    ends, pos = [], 0
    for s in (0, 1):
        if sig[s] == -2:
            ends.append(None)
            continue
        n = _n_modes(topo, sig[s])
        ends.append((pos, n))
        pos += 1 + n // 6
    return ends, pos


def virtual_kinematics(topo, sig):
    """``(prm, phi, psi, Y) -> (poses (2, 6), P (2, 6, nB, 6))``: the virtual
    rigid poses of an element's two ends and their velocity maps, from the
    coordinates Y (nB, 6) of the slots it touches (order of
    :func:`end_blocks`); the virtual speeds are ``P @ speeds`` (linear).

    At a rigid marker the virtual state is the body's own (P the identity
    on its slot); at the ground it is zero. At an interface node with
    deformation ``u = Phi q``, ``theta = Psi q`` (body frame) it is the state
    of a rigid body that carries the element's marker (its local pose p, R_m
    unchanged) to the deformed node: orientation ``R~ = R Rot(theta)``,
    origin ``r + R (p + u) - R~ p``; angular velocity ``Rot(theta)^T (w + Psi
    dq/dt)`` (body frame) and origin velocity ``v + R (w x (p + u) + Phi
    dq/dt) + (R~ p) x R (w + Psi dq/dt)`` (the node's velocity moved to the
    origin). First order in q, as the whole formulation."""
    ends, nB = _ends(topo, sig)

    def fn(prm, phi, psi, Y):
        poses, Ps = [], []
        for s, end in enumerate(ends):
            P = jnp.zeros((6, nB, 6), Y.dtype)
            if end is None:
                poses.append(jnp.zeros(6, Y.dtype))
                Ps.append(P)
                continue
            at, n = end
            if n == 0:
                poses.append(Y[at])
                Ps.append(P.at[:, at, :].set(jnp.eye(6, dtype=Y.dtype)))
                continue
            k = n // 6
            r, q = Y[at], Y[at + 1: at + 1 + k].reshape(-1)
            Phi, Psi = phi[s, :, :n], psi[s, :, :n]
            p = prm[f"pos{s + 1}"]
            R = euler_to_matrix(r[3:])
            R_theta = rotation_matrix(mv(Psi, q))
            R_virtual = R @ R_theta
            p_node = p + mv(Phi, q)
            arm = mv(R_virtual, p)                       # virtual origin -> node, vehicle frame
            origin = r[:3] + mv(R, p_node) - arm
            poses.append(jnp.concatenate([origin, matrix_to_euler(R_virtual)]))
            S = skew(arm) @ R
            P = P.at[:3, at, :3].set(jnp.eye(3, dtype=Y.dtype))
            P = P.at[:3, at, 3:].set(S - R @ skew(p_node))
            P = P.at[:3, at + 1: at + 1 + k, :].set((R @ Phi + S @ Psi).reshape(3, k, 6))
            P = P.at[3:, at, 3:].set(R_theta.T)
            P = P.at[3:, at + 1: at + 1 + k, :].set((R_theta.T @ Psi).reshape(3, k, 6))
            Ps.append(P)
        return jnp.stack(poses), jnp.stack(Ps)
    return fn


def _element_and_jacobian(group):
    """``(prm, x1, x2) -> ((g1, g2), ((dg1/dx1, dg2/dx1), (dg1/dx2, dg2/dx2)))``:
    the group's closed form where it has one, else forward-mode autodiff."""
    if group.jacobian is not None:
        return group.jacobian

    def jac(prm, x1, x2):
        def f(a, b):
            g = group.element(prm, a, b)
            return g, g
        (d1, d2), g = jax.jacfwd(f, argnums=(0, 1), has_aux=True)(x1, x2)
        # d1[k]: d g_k / d x1  ->  ((dg1/dx1, dg2/dx1), (dg1/dx2, dg2/dx2))
        return g, ((d1[0], d1[1]), (d2[0], d2[1]))
    return jac


def interface_element(topo, group, sig):
    """``(prm, phi, psi, X) -> (G, dG)``: the group's element between ends of
    signature ``sig`` (per end: flexible body, -1 rigid marker, -2 ground)
    on the stacked states X (nB, 12) of the slots it touches: generalised
    forces G (nB, 6) on them and dG/dX (nB, 6, nB, 12).

    The element runs on the virtual rigid states x~ = (pose, P speeds) of
    its ends (:func:`virtual_kinematics`) with its own Jacobian (closed form
    where the group has one); its generalised forces g~ map to the touched
    slots by the transpose of the velocity map, ``G = P^T g~`` (virtual
    power), and ``dG/dX = P^T (dg~/dx~) (dx~/dX) + d(P^T)/dY g~``: the chain
    rule, with the kinematic map differentiated by forward mode over the
    coordinates only (the speeds enter linearly through P)."""
    kin = virtual_kinematics(topo, sig)
    jac = _element_and_jacobian(group)
    _, nB = _ends(topo, sig)

    def fn(prm, phi, psi, X):
        Y, V = X[:, :6], X[:, 6:]
        poses, P = kin(prm, phi, psi, Y)
        speeds = jnp.einsum("sibj,bj->si", P, V)                       # (2, 6)
        x1, x2 = jnp.concatenate([poses[0], speeds[0]]), jnp.concatenate([poses[1], speeds[1]])
        (g1, g2), ((d11, d21), (d12, d22)) = jac(prm, x1, x2)
        g = jnp.stack([g1, g2])
        G = jnp.einsum("sibj,si->bj", P, g)
        g_fixed = jax.lax.stop_gradient(g)

        def of_coordinates(Yc):
            ps, Pc = kin(prm, phi, psi, Yc)
            return ps, jnp.einsum("sibj,bj->si", Pc, V), jnp.einsum("sibj,si->bj", Pc, g_fixed)
        d_pose, d_speed, dPg = jax.jacfwd(of_coordinates)(Y)             # (2, 6, nB, 6) x2, (nB, 6, nB, 6)
        # dx~_s / dX: coordinates columns (pose; speeds through P(Y)), speed columns (0; P)
        dx = jnp.concatenate([jnp.concatenate([d_pose, jnp.zeros_like(d_pose)], -1),
                              jnp.concatenate([d_speed, P], -1)], 1)    # (2, 12, nB, 12)
        # a fusion barrier: XLA's CPU compiler (jaxlib 0.10) fused the element
        # Jacobian into the chain-rule products below wrongly when this
        # function is vmapped over variants (dG off by ~1e9 on the twist
        # beam, every variant's static equilibrium failed);
        # tests/kernels/test_flexible.py compares batched and single here
        d11, d12, d21, d22, dx = jax.lax.optimization_barrier((d11, d12, d21, d22, dx))
        dg = jnp.stack([jnp.einsum("ij,jbk->ibk", d11, dx[0]) + jnp.einsum("ij,jbk->ibk", d12, dx[1]),
                        jnp.einsum("ij,jbk->ibk", d21, dx[0]) + jnp.einsum("ij,jbk->ibk", d22, dx[1])])
        dG = jnp.einsum("siaj,sibk->ajbk", P, dg)
        dG = dG.at[..., :6].add(dPg)
        return G, dG
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
        kin = virtual_kinematics(topo, sig)
        prm, phi, psi = _params(model, group, idx, ifaces)

        def one(p, f, s, X, kin=kin):
            poses, P = kin(p, f, s, X[:, :6])
            speeds = jnp.einsum("sibj,bj->si", P, X[:, 6:])
            g1, g2 = group.element(p, jnp.concatenate([poses[0], speeds[0]]),
                                   jnp.concatenate([poses[1], speeds[1]]))
            return jnp.einsum("sibj,si->bj", P, jnp.stack([g1, g2]))
        out.append((jax.vmap(one)(prm, phi, psi, x[blocks]), blocks))
    return out


def group_jacobians(model, group, x):
    """As :func:`group_forces`, with d G / d X (e, nB, 6, nB, 12) over the
    touched slots' (r, v): a list of (G, dG, slots)."""
    topo = model.topology
    out = []
    for sig, idx, ifaces, blocks in subsets(topo, group):
        fn = interface_element(topo, group, sig)
        prm, phi, psi = _params(model, group, idx, ifaces)
        G, dG = jax.vmap(fn)(prm, phi, psi, x[blocks])
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
