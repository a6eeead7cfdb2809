"""Equations of motion (method.md eq. 1) and their linearisation (eqs. 4-5).

Computation order (method.md section 1): body kinematics -> marker
kinematics -> force elements (per group, vectorised) -> gravity and wheel
loads -> per-body Newton/Euler -> q. The Jacobians are assembled from
element-local Jacobians (each element differentiated w.r.t. the 12 + 12
states of its own two bodies) into 6x6 body blocks.

Shapes: r, v (m, 6); u (2, 6) = (Fx, Fy, Fz, Mx, My, Mz) at the left and
right wheel centre, vehicle frame [N, N m].
"""
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from kernels import blocks, flexible, forces
from kernels.linalg import inv3
from kernels.rotations import euler_to_matrix, kinematic_matrix_blocks, mm, mv, skew


class Linearisation(NamedTuple):
    """q and its Jacobians at one state (eqs. 4-5); blocks are per body pair."""
    q: jax.Array        # (n,)  n = 6 m
    J_r: jax.Array      # (n, n)
    J_v: jax.Array      # (n, n)
    J_u: jax.Array      # (n, 12)
    K: jax.Array        # (m, 6, 6) blocks of K(r) at the linearisation state


def states_with_ground(r, v):
    """Per-body states ``(r, v)`` side by side, (m + 1, 12), with a last row
    of zeros for the ground: the force elements index their two bodies into
    it by state slot (slot m = ground, which has no state)."""
    x = jnp.concatenate([r, v], axis=1)
    return jnp.concatenate([x, jnp.zeros((1, 12), x.dtype)], axis=0)




def _wheel_loads(model, r, u):
    """Generalised forces of u on the wheel bodies: (2, 6) rows (F, R^T M)."""
    slots = model.topology.wheel_slots
    R = euler_to_matrix(r[slots, 3:])
    return jnp.concatenate([u[:, :3], jnp.einsum("sji,sj->si", R, u[:, 3:])], axis=1)


def generalised_forces(model, r, v, u):
    """Sum of element, gravity and wheel forces per body, (m, 6): F (vehicle frame), M (body frame)."""
    topo = model.topology
    m = topo.n_bodies
    x = states_with_ground(r, v)
    Q = jnp.zeros((m + 1, 6), r.dtype)
    for group in topo.element_groups:       # kernels.forces.ElementGroup
        bodies = group.bodies(topo)
        if len(bodies) == 0:
            continue
        prm = group.params(model)
        if topo.flex_bodies:                # elements at interface nodes: kernels.flexible
            for G, blk in flexible.group_forces(model, group, x):
                Q = Q.at[blk.reshape(-1)].add(G.reshape(-1, 6))
            sel = flexible.rigid_elements(topo, group)
            if not len(sel):
                continue
            bodies = np.asarray(bodies)[sel]
            prm = jax.tree_util.tree_map(lambda a: a[sel], prm)
        g1, g2 = forces.map_elements(group.element, prm, x[bodies[:, 0]], x[bodies[:, 1]])
        Q = Q.at[bodies[:, 0]].add(g1).at[bodies[:, 1]].add(g2)
    Q = _gravity_and_modal(model, Q[:m], r, v)
    return Q.at[topo.wheel_slots].add(_wheel_loads(model, r, u))


def _gravity_and_modal(model, Q, r, v):
    """Q plus gravity on the bodies and, for flexible bodies, the modal
    elastic and damping forces (no gravity on modal slots: I3 = 0)."""
    topo = model.topology
    if not topo.flex_bodies:
        return Q.at[:, :3].add(model.mass[:, None] * model.gravity[None, :])
    rs, ms = flexible.rigid_slots(topo), topo.modal_slots
    Q = Q.at[rs, :3].add(model.mass[rs, None] * model.gravity[None, :])
    return Q.at[ms].add(flexible.modal_forces(model, r, v))


def newton_euler(model, v, Q):
    """Accelerations q from generalised forces (m, 6) -> (m, 6).

    Newton: dv/dt = F / m (vehicle frame). Euler: I dw/dt = M - w x (I w)
    (body frame).
    """
    w = v[:, 3:]
    Iw = mv(model.inertia, w)
    wdot = mv(inv3(model.inertia), Q[:, 3:] - jnp.cross(w, Iw))      # closed form: kernels.linalg
    return jnp.concatenate([Q[:, :3] / model.mass[:, None], wdot], axis=1)


def q_fn(model, r, v, u):
    """q(r, v, u) of eq. (1b), shape (m, 6)."""
    return newton_euler(model, v, generalised_forces(model, r, v, u))


class BlockLinearisation(NamedTuple):
    """q and its Jacobians (eqs. 4-5) in block-sparse form on the model's
    :func:`kernels.blocks.model_pattern` (slot n = dump slot for ground).

    J_r = Minv G_r, J_v = Minv G_v, J_u = Minv G_u, where G = dQ/dx are the
    derivatives of the generalised forces (before Newton/Euler).
    """
    q: jax.Array        # (n,)  n = 6 m  [accelerations]
    G_r: jax.Array      # (slots + 1, 6, 6)  dQ/dr  [N/m, N, N m/rad]
    G_v: jax.Array      # (slots + 1, 6, 6)  dQ/dv  [N s/m, ...]
    G_u: jax.Array      # (2, 6, 12)  dQ/du of the two wheel bodies
    M: jax.Array        # (m, 6, 6)  body mass matrices diag(m I, I_body)
    Minv: jax.Array     # (m, 6, 6)  their inverses
    K: jax.Array        # (m, 6, 6)  blocks of K(r) at the linearisation state
    # per element group with a time-varying input (input_groups): d(g1, g2)/dw
    # of each element, ((n, 6, k), (n, 6, k)); empty without such groups
    G_w: tuple = ()


# --------------------------------------------------------------------------- group inputs
# An element group may read a time-varying input of its own
# (kernels.forces.ElementGroup.input, e.g. the road under a tyre). The
# integrator sees it as part of the flat input vector: u = [wheel loads (12) |
# each input group's (n, k) inputs, flattened], so that the linear-implicit
# methods' J_u du/dt term (method.md eq. 4) takes its rate like the load's.

def input_groups(topo):
    """[(group, n)]: the model's element groups with an ``input`` and
    elements, in the groups' order (static)."""
    return [(g, len(g.names(topo))) for g in topo.element_groups
            if g.input is not None and len(g.names(topo))]


def with_inputs(model, w):
    """``model`` with each input group's ``input`` entry (n, k) set from the
    flat vector ``w`` (the groups' inputs in :func:`input_groups` order)."""
    out, off = {}, 0
    for g, n in input_groups(model.topology):
        shape = g.params(model)["input"].shape
        size = int(np.prod(shape))
        out[g.name] = {"input": w[off:off + size].reshape(shape)}
        off += size
    return model.replace_elements(**out) if out else model


def group_input(model, t):
    """w at time t [s], flat: every input group's elements' ``input(prm, t)``
    in :func:`input_groups` order; an empty array without such groups."""
    parts = [jax.vmap(lambda p: g.input(p, t))(g.params(model)).reshape(-1)
             for g, _ in input_groups(model.topology)]
    return jnp.concatenate(parts) if parts else jnp.zeros(0, model.mass.dtype)


def group_inputs(model, t):
    """(w, dw/dt) at time t [s], flat: :func:`group_input` and its time
    derivative (forward mode)."""
    t = jnp.asarray(t, model.mass.dtype)
    return jax.jvp(lambda tt: group_input(model, tt), (t,), (jnp.ones_like(t),))


def input_jacobians(model, r, v) -> tuple:
    """Per input group: d(g1, g2)/dw of each element at its stored input,
    ((n, 6, k), (n, 6, k)) (forward mode)."""
    x = states_with_ground(r, v)
    out = []
    for g, _ in input_groups(model.topology):
        b = np.asarray(g.bodies(model.topology))

        def d_input(p, x1, x2, g=g):
            return jax.jacfwd(lambda w: g.element({**p, "input": w}, x1, x2))(p["input"])
        out.append(tuple(jax.vmap(d_input)(g.params(model), x[b[:, 0]], x[b[:, 1]])))
    return tuple(out)


def linearise_with_inputs(model, r, v, u):
    """:func:`linearise_blocks` over the flat input u = [wheel loads (12) |
    the input groups' inputs] (:func:`input_groups`), with their Jacobians
    (``G_w``)."""
    m_w = with_inputs(model, u[12:])
    bl = linearise_blocks(m_w, r, v, u[:12].reshape(2, 6))
    return bl._replace(G_w=input_jacobians(m_w, r, v))


def _element_slots(pattern, bodies, m):
    """Static split of a group: (subset, wrt, slots) per kind of element.

    kind "pair": both bodies free, Jacobian w.r.t. both (slots 11, 12, 21, 22);
    "ground2" / "ground1": one body is the ground, Jacobian w.r.t. the free
    body only (slot of its diagonal block)."""
    out = []
    pair = np.nonzero((bodies[:, 0] != m) & (bodies[:, 1] != m))[0]
    g2 = np.nonzero((bodies[:, 0] != m) & (bodies[:, 1] == m))[0]
    g1 = np.nonzero((bodies[:, 0] == m) & (bodies[:, 1] != m))[0]
    if len(pair):
        i, j = bodies[pair, 0], bodies[pair, 1]
        sl = [np.array([pattern.slot(a, b) for a, b in zip(ii, jj)], np.int32)
              for ii, jj in ((i, i), (i, j), (j, i), (j, j))]
        out.append(("pair", pair, sl))
    if len(g2):
        out.append(("ground2", g2, [np.array([pattern.slot(a, a) for a in bodies[g2, 0]], np.int32)]))
    if len(g1):
        out.append(("ground1", g1, [np.array([pattern.slot(b, b) for b in bodies[g1, 1]], np.int32)]))
    return out


def element_jac(fn, free):
    """(prm, x1, x2) -> ((g1, g2), d_1, ...): for each free body b in ``free``
    (0 or 1), d_b = (dg1/dx_b, dg2/dx_b) as (6, 12) blocks over (r_b, v_b).

    Coordinates and speeds are differentiated in two forward passes, so the
    speed tangents only run through the velocity-dependent part of the
    element (rates, damping), not through its kinematics."""
    def per_part(prm, x1, x2):
        x = [x1, x2]

        def with_r(*rs):
            y = list(x)
            for b, rb in zip(free, rs):
                y[b] = jnp.concatenate([rb, x[b][6:]])
            g = fn(prm, *y)
            return g, g

        def with_v(*vs):
            y = list(x)
            for b, vb in zip(free, vs):
                y[b] = jnp.concatenate([x[b][:6], vb])
            return fn(prm, *y)
        argn = tuple(range(len(free)))
        jr, g = jax.jacfwd(with_r, argnums=argn, has_aux=True)(*[x[b][:6] for b in free])
        jv = jax.jacfwd(with_v, argnums=argn)(*[x[b][6:] for b in free])
        # jr[k][n]: d g_k / d r_(free n), (6, 6)
        return (g, *[tuple(jnp.concatenate([jr[k][n], jv[k][n]], axis=1) for k in (0, 1))
                     for n in range(len(free))])
    return per_part


def _free_body_part(jac_fn, b, prm, x1, x2):
    """The generalised force on body ``b`` (0 or 1) of a closed-form element
    Jacobian and its derivative w.r.t. that body's state (6, 12)."""
    g, d = jac_fn(prm, x1, x2)
    return g[b], d[b][b]


def _element_jacobians(model, r, v):
    """Element-local Jacobians dQ/dx scattered into pattern slots (slots + 1, 6, 12), and Q (m, 6).

    Each element is differentiated (forward mode) w.r.t. the 12 states of its
    free bodies only; groups are vectorised per element type (method.md eq. 5)."""
    topo = model.topology
    m = topo.n_bodies
    pattern = blocks.model_pattern(topo)
    x = states_with_ground(r, v)
    dG, dG_slots, gQ, gQ_bodies = [], [], [], []
    for group in topo.element_groups:       # kernels.forces.ElementGroup
        bodies = np.asarray(group.bodies(topo))
        if len(bodies) == 0:
            continue
        fn, jac_fn = group.element, group.jacobian
        prm = group.params(model)
        if topo.flex_bodies:                # elements at interface nodes: kernels.flexible
            for Gf, dGf, blk in flexible.group_jacobians(model, group, x):
                nB = blk.shape[1]
                gQ.append(Gf.reshape(-1, 6))
                gQ_bodies.append(blk.reshape(-1))
                for a in range(nB):
                    for b in range(nB):
                        dG.append(dGf[:, a, :, b, :])
                        dG_slots.append(np.array([pattern.slot(i, j) for i, j in blk[:, [a, b]]], np.int32))
            sel = flexible.rigid_elements(topo, group)
            if not len(sel):
                continue
            bodies = bodies[sel]
            prm = jax.tree_util.tree_map(lambda a: a[sel], prm)
        for kind, idx, slots in _element_slots(pattern, bodies, m):
            p = jax.tree_util.tree_map(lambda a: a[idx], prm)
            x1, x2 = x[bodies[idx, 0]], x[bodies[idx, 1]]
            free = {"pair": (0, 1), "ground2": (0,), "ground1": (1,)}[kind]
            if jac_fn is not None and kind == "pair":     # closed form: all four blocks
                (g1, g2), (d1, d2) = forces.map_elements(jac_fn, p, x1, x2, weight=4)
                d = {0: d1, 1: d2}
            elif jac_fn is not None:
                # one body is the ground: only the free body's force and its
                # diagonal block leave the mapped function, so that a loop over
                # the elements (kernels.forces.element_loops) computes no more
                # (under vmap XLA drops the unused blocks itself)
                b = free[0]
                gb, dbb = forces.map_elements(functools.partial(_free_body_part, jac_fn, b), p, x1, x2)
                g1 = g2 = gb
                d = {b: {b: dbb}}
            else:
                (g1, g2), *ds = forces.map_elements(element_jac(fn, free), p, x1, x2,
                                                       weight=4 if kind == "pair" else 1)
                d = dict(zip(free, ds))
            if kind == "pair":
                dG += [d[0][0], d[1][0], d[0][1], d[1][1]]       # slots 11, 12, 21, 22
                gQ += [g1, g2]
                gQ_bodies += [bodies[idx, 0], bodies[idx, 1]]
            elif kind == "ground2":
                dG.append(d[0][0])
                gQ.append(g1)
                gQ_bodies.append(bodies[idx, 0])
            else:
                dG.append(d[1][1])
                gQ.append(g2)
                gQ_bodies.append(bodies[idx, 1])
            dG_slots += list(slots)
    G = blocks.StaticSum(np.concatenate(dG_slots), pattern.n + 1)(jnp.concatenate(dG))
    Q = blocks.StaticSum(np.concatenate(gQ_bodies), m)(jnp.concatenate(gQ))
    return G, Q


def mass_matrices(model):
    """Body mass matrices diag(m I3, I_body) (m, 6, 6) and their inverses."""
    m = model.topology.n_bodies
    dt = model.mass.dtype
    M = jnp.zeros((m, 6, 6), dt).at[:, :3, :3].set(jnp.eye(3, dtype=dt) * model.mass[:, None, None])
    M = M.at[:, 3:, 3:].set(model.inertia)
    Minv = jnp.zeros((m, 6, 6), dt).at[:, :3, :3].set(jnp.eye(3, dtype=dt) / model.mass[:, None, None])
    Minv = Minv.at[:, 3:, 3:].set(inv3(model.inertia))
    return M, Minv


def linearise_blocks(model, r, v, u) -> BlockLinearisation:
    """q, dQ/dr, dQ/dv, dQ/du (eqs. 4-5) in block-sparse form, and K(r)."""
    topo = model.topology
    pattern = blocks.model_pattern(topo)
    G, Q = _element_jacobians(model, r, v)
    Q = _gravity_and_modal(model, Q, r, v)
    if topo.flex_bodies:                    # d(modal forces)/d(q, dq/dt): diagonal
        ms = topo.modal_slots
        d = np.arange(6)
        G = G.at[pattern.diag[ms][:, None], d, d].add(-model.flex["k"])
        G = G.at[pattern.diag[ms][:, None], d, 6 + d].add(-model.flex["c"])
    slots = topo.wheel_slots
    Q = Q.at[slots].add(_wheel_loads(model, r, u))
    # wheel torques R^T M depend on the wheel orientation; u enters linearly
    dW_dr = jax.jacfwd(lambda rw: _wheel_loads(model, r.at[slots].set(rw), u))(r[slots])
    dW_dr = jnp.stack([dW_dr[0, :, 0], dW_dr[1, :, 1]])            # (2, 6, 6)
    wdiag = np.array([pattern.slot(s, s) for s in np.asarray(slots)], np.int32)
    G = G.at[wdiag, :, :6].add(dW_dr, unique_indices=True)
    dW_du = jax.jacfwd(lambda uu: _wheel_loads(model, r, uu))(u)    # (2, 6, 2, 6)
    G_u = jnp.stack([dW_du[0, :, :, :].reshape(6, 12), dW_du[1, :, :, :].reshape(6, 12)])

    # gyroscopic term of Euler's equation: d(-w x I w)/dw on the diagonal
    w = v[:, 3:]
    Iw = mv(model.inertia, w)
    dgyro_dw = skew(w) @ model.inertia - skew(Iw)
    G = G.at[pattern.diag, 3:, 9:].add(-dgyro_dw, unique_indices=True)
    M, Minv = mass_matrices(model)
    q = mv(Minv, Q - jnp.concatenate([jnp.zeros_like(w), jnp.cross(w, Iw)], 1))
    return BlockLinearisation(q.reshape(-1), G[..., :6], G[..., 6:], G_u, M, Minv,
                              kinematic_matrix_blocks(r, topo.modal_slots))


def dense_linearisation(model, bl: BlockLinearisation) -> Linearisation:
    """Dense view (J = Minv G) of a block linearisation."""
    topo = model.topology
    m = topo.n_bodies
    pattern = blocks.model_pattern(topo)
    Minv_s = bl.Minv[pattern.rows]
    J_r = blocks.to_dense(pattern, mm(Minv_s, bl.G_r[: pattern.n]))
    J_v = blocks.to_dense(pattern, mm(Minv_s, bl.G_v[: pattern.n]))
    slots = topo.wheel_slots
    J_u = jnp.zeros((m, 6, 12), bl.q.dtype).at[slots].set(mm(bl.Minv[slots], bl.G_u)).reshape(6 * m, 12)
    return Linearisation(bl.q, J_r, J_v, J_u, bl.K)


def dense_kinematic_matrix(lin):
    """K(r) of a :class:`Linearisation` as the dense (n, n) block diagonal of
    its per-body 6x6 blocks (velocities -> coordinate rates)."""
    m = lin.K.shape[0]
    n = 6 * m
    idx = jnp.arange(m)
    return jnp.zeros((n, n), lin.K.dtype).reshape(m, 6, m, 6).at[idx, :, idx, :].set(lin.K).reshape(n, n)


def linearise(model, r, v, u):
    """q, J_r, J_v, J_u (eqs. 4-5) and K(r), dense, from element-local Jacobians."""
    return dense_linearisation(model, linearise_blocks(model, r, v, u))
