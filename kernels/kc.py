"""Quasi-static kinematics & compliance (K&C) of an axle, as on a K&C rig.

Pure JAX (jit / vmap / grad). Conventions (vehicle frame x forward, y left,
z up; DIN 70000 toe-in > 0 and camber top-out > 0, :func:`kernels.metrics.toe_camber`):

Design position
    The wheel centres are held at their design heights (``model.r_design``)
    by vertical forces Fz0 found together with the equilibrium
    (:func:`kernels.statics.constrained_equilibrium`: the rig's wheel pads in
    position control, augmented Newton system, exact). Gravity acts; no other
    load. Fz0 is the *design wheel load* carried at the wheel centre.

Wheel travel (kinematics)
    Wheel-centre heights prescribed, z = z_design + s (parallel: both sides
    +s; opposite: left +s, right -s); the vertical forces follow; no other
    load. Metrics are derivatives at s = 0, per metre of the side's *own*
    travel (positive = up / bump):
    ``bump_steer`` d toe/ds, ``camber_gain`` d camber/ds [deg/m],
    ``wheel_rate`` dFz/ds [N/mm] (parallel travel); ``roll_steer``,
    ``roll_camber_gain``, ``roll_wheel_rate`` (opposite travel; the
    anti-roll bar acts).

Compliance (force) analyses
    From the design position, loads are added at both wheels in mirror image
    (the same in each side's own sense), with the vertical wheel loads held
    at Fz0 (force control). Positive senses, per side:

    ====================  =======================================  =====================
    analysis              load (per side)                          point
    ====================  =======================================  =====================
    lateral_force         Fy towards the vehicle centre (inboard)  contact patch
    traction_force        Fx forward                               wheel centre
    braking_force         Fx rearward                              contact patch
    aligning_torque       Mz turning the wheel front outboard      (pure torque)
                          (toe-out sense)
    ====================  =======================================  =====================

    The contact patch is the wheel centre minus the loaded radius R along
    vehicle z, so a force F there is the force F plus the moment
    (-R e_z) x F at the wheel centre (lateral: Mx = R Fy; braking:
    My = R |Fx|). Braking torque reaches the carrier through the locked
    brake: :func:`lock_brakes` stiffens the wheel bearing about the spin
    axis (without it the wheel would spin on its bearing).

    Metrics per side (derivatives at the design position, both wheels
    loaded): ``toe_per_*`` / ``camber_per_*`` [deg/kN; aligning torque:
    deg per 100 N m], ``lateral_compliance`` (wheel-centre displacement
    inboard per kN of lateral force) and ``longitudinal_compliance``
    (forward displacement per kN of traction force) [mm/kN],
    ``longitudinal_compliance_braking`` (rearward per kN of braking force).

Compliance matrix
    ``compliance_matrix`` (2, 6, 6): for each wheel alone, d(x, y, z, rx, ry,
    rz)/d(Fx, Fy, Fz, Mx, My, Mz) at the wheel centre at the design
    position (the other wheel's loads unchanged, all loads in force control),
    SI units: m/N, m/(N m), rad/N, rad/(N m). (rx, ry, rz) is the small
    rotation of the wheel in the vehicle frame, work-conjugate to the wheel
    torque, so the matrix is symmetric for a conservative system
    (Maxwell-Betti reciprocity).

All derivatives are exact (implicit differentiation of the equilibrium:
dr/du = -J_r^-1 J_u with J_r, J_u of method.md eq. 5 at the design
position; wheel travel through the bordered system of the height
constraint), not finite differences.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from kernels import integrate, lsrt2, metrics
from kernels.dynamics import linearise
from kernels.model import ModelError
from kernels import names
from kernels.rotations import euler_to_matrix
from kernels.statics import (FZ_UNIT, Z_UNIT, bordered_jacobian, constrained_equilibrium,
                             static_equilibrium)

DEG = 180.0 / math.pi
SIDES = names.SIDES
SIDE_SIGN = np.array([1.0, -1.0])     # +1 left, -1 right (mirror image)
DOFS = names.DIRECTIONS             # compliance-matrix rows
LOADS = names.COMPONENTS            # compliance-matrix columns, wheel loads
TRAVEL_MODES = ("parallel", "opposite")
FORCE_ANALYSES = ("lateral_force", "traction_force", "braking_force", "aligning_torque")
ANALYSES = ("wheel_travel",) + FORCE_ANALYSES
DEFAULT_LOADED_RADIUS = 0.295        # m, published static tyre radius of the double wishbone
DEFAULT_BRAKE_LOCK = 1.0e8           # N m/rad about the spin axis

# metric name -> (units, long name); the order is the cube's order
METRICS = {
    "design_wheel_load": ("N", "vertical wheel-centre force at the design position (wheel centres at design height)"),
    "design_toe": ("deg", "toe at the design position (DIN 70000, + = toe-in)"),
    "design_camber": ("deg", "camber at the design position (DIN 70000, + = top out)"),
    "bump_steer": ("deg/m", "toe change per metre of parallel wheel travel (bump > 0)"),
    "camber_gain": ("deg/m", "camber change per metre of parallel wheel travel (bump > 0)"),
    "wheel_rate": ("N/mm", "vertical wheel-centre force per mm of parallel wheel travel"),
    "roll_steer": ("deg/m", "toe change per metre of the side's own travel in opposite wheel travel"),
    "roll_camber_gain": ("deg/m", "camber change per metre of the side's own travel in opposite wheel travel"),
    "roll_wheel_rate": ("N/mm", "vertical force per mm of the side's own travel in opposite wheel travel"),
    "toe_per_lateral_force": ("deg/kN", "toe change per kN of lateral force at the contact patch, inboard > 0"),
    "camber_per_lateral_force": ("deg/kN", "camber change per kN of lateral force at the contact patch, inboard > 0"),
    "lateral_compliance": ("mm/kN", "wheel-centre displacement inboard per kN of lateral force at the contact patch"),
    "toe_per_traction_force": ("deg/kN", "toe change per kN of forward force at the wheel centre"),
    "camber_per_traction_force": ("deg/kN", "camber change per kN of forward force at the wheel centre"),
    "longitudinal_compliance": ("mm/kN", "wheel-centre displacement forward per kN of forward force at the wheel centre"),
    "toe_per_braking_force": ("deg/kN", "toe change per kN of rearward (braking) force at the contact patch"),
    "camber_per_braking_force": ("deg/kN", "camber change per kN of rearward (braking) force at the contact patch"),
    "longitudinal_compliance_braking": ("mm/kN", "wheel-centre displacement rearward per kN of braking force at the contact patch"),
    "toe_per_aligning_torque": ("deg/(100 N m)", "toe change per 100 N m of aligning torque, toe-out sense > 0"),
    "camber_per_aligning_torque": ("deg/(100 N m)", "camber change per 100 N m of aligning torque, toe-out sense > 0"),
}
COMPLIANCE_UNITS = ("SI: m/N (x,y,z per fx,fy,fz), m/(N m) (x,y,z per mx,my,mz), rad/N (rx,ry,rz per "
                    "fx,fy,fz), rad/(N m) (rx,ry,rz per mx,my,mz)")


# --------------------------------------------------------------------------- rig set-up

def brake_lock_index(model):
    """(rows, cols) of ``bu_k`` that lock the brakes: for every bushing joining a
    wheel to a body other than the chassis (the wheel bearing), the rotational
    direction of its marker-1 frame that is parallel to the wheel's spin axis
    (wheel body y) at the design position. Host-side (numpy)."""
    topo = model.topology
    m = topo.n_bodies
    R_body = np.asarray(euler_to_matrix(jnp.asarray(model.r_design[:, 3:])))
    rows, cols = [], []
    for w in np.asarray(topo.wheel_slots):
        spin = R_body[w][:, 1]
        for i, (b1, b2) in enumerate(np.asarray(topo.bushing_bodies)):
            if w not in (b1, b2) or m in (b1, b2):
                continue
            axes = R_body[b1] @ np.asarray(model.bu_rot1[i])      # marker-1 axes, vehicle frame
            cos = np.abs(axes.T @ spin)
            j = int(np.argmax(cos))
            if cos[j] > 1 - 1e-6:
                rows.append(i)
                cols.append(3 + j)
    return np.array(rows, int), np.array(cols, int)


def lock_brakes(model, stiffness, index=None):
    """Model with ``stiffness`` [N m/rad] added about the spin axis of the wheel
    bearings (brake applied: braking torque goes to the carrier)."""
    import dataclasses
    rows, cols = brake_lock_index(model) if index is None else index
    if len(rows) == 0 or stiffness == 0:
        return model
    return dataclasses.replace(model, bu_k=model.bu_k.at[rows, cols].add(stiffness))


def design_heights(model):
    """Design wheel-centre heights (2,) [m]."""
    return model.r_design[model.topology.wheel_slots, 2]


def design_position(model, tol=1e-6, max_iter=60):
    """Constrained equilibrium with the wheel centres at their design heights,
    gravity only (:class:`kernels.statics.ConstrainedEquilibrium`)."""
    return constrained_equilibrium(model, jnp.zeros((2, 6), model.r_design.dtype),
                                   design_heights(model), tol=tol, max_iter=max_iter)


def design_loads(eq):
    """Wheel-centre loads (2, 6) at the design position: only the vertical force Fz0."""
    return jnp.zeros((2, 6), eq.r.dtype).at[:, 2].set(eq.fz)


# --------------------------------------------------------------------------- output Jacobians

def _wheel_rotation_rates(angles):
    """(3, 3): columns = small rotation (vehicle frame) per unit change of each
    Euler angle: omega = vex(dR R^T)."""
    R = euler_to_matrix(angles)
    dR = jax.jacfwd(euler_to_matrix)(angles)             # (3, 3, 3): dR_ij / da_k
    W = jnp.einsum("ijk,lj->kil", dR, R)                  # (k, i, l) = (dR_k R^T)_il
    return jnp.stack([W[:, 2, 1], W[:, 0, 2], W[:, 1, 0]], axis=0)


def wheel_output_jacobian(model, r):
    """d(wheel-centre position, wheel small rotation)/dr, (12, n): rows left
    (x, y, z, rx, ry, rz), then right; translation [m], rotation [rad] in the
    vehicle frame."""
    m = model.topology.n_bodies
    Y = jnp.zeros((2, 6, m, 6), r.dtype)
    for s, w in enumerate(np.asarray(model.topology.wheel_slots)):
        Y = Y.at[s, :3, w, :3].set(jnp.eye(3, dtype=r.dtype))
        Y = Y.at[s, 3:, w, 3:].set(_wheel_rotation_rates(r[w, 3:]))
    return Y.reshape(12, 6 * m)


def toe_camber_jacobian(model, r):
    """d(toe, camber)/dr, (2, 2, n): [toe | camber][left | right] per coordinate [rad]."""
    m = model.topology.n_bodies
    J = jax.jacfwd(lambda rr: jnp.stack(metrics.toe_camber(model, rr)))(r)   # (2, 2, m, 6)
    return J.reshape(2, 2, 6 * m)


# --------------------------------------------------------------------------- load directions

def load_direction(analysis, loaded_radius):
    """Wheel-centre load (2, 6) of unit amplitude (1 N or 1 N m) of a force
    analysis on both wheels, in each side's positive sense (module doc).
    ``loaded_radius`` [m] may be traced."""
    R = jnp.asarray(loaded_radius, jnp.float64)
    s = jnp.asarray(SIDE_SIGN)
    z = jnp.zeros(2)
    if analysis == "lateral_force":       # inboard, at the contact patch: Mx = R Fy
        cols = (z, -s, z, -s * R, z, z)
    elif analysis == "traction_force":    # forward at the wheel centre
        cols = (z + 1.0, z, z, z, z, z)
    elif analysis == "braking_force":     # rearward at the contact patch: My = -R Fx
        cols = (z - 1.0, z, z, z, z + R, z)
    elif analysis == "aligning_torque":   # toe-out sense
        cols = (z, z, z, z, z, s)
    else:
        raise ModelError(f"analysis = {analysis!r} is not one of {', '.join(FORCE_ANALYSES)}")
    return jnp.stack(cols, axis=1)


# --------------------------------------------------------------------------- metrics

def kc_metrics(model, eq, loaded_radius=DEFAULT_LOADED_RADIUS):
    """All K&C metrics (module doc) at the design position ``eq``
    (:func:`design_position`). Returns {name: (2,) per side} plus
    ``compliance_matrix`` (2, 6, 6) and ``compliance_full`` (12, 12) [SI]."""
    m = model.topology.n_bodies
    r0 = eq.r
    u0 = design_loads(eq)
    lin = linearise(model, r0, jnp.zeros_like(r0), u0)
    X = -jnp.linalg.solve(lin.J_r, lin.J_u)                 # dr/du (n, 12), loads in force control
    Y = wheel_output_jacobian(model, r0)
    G = Y @ X                                                # (12, 12)
    T = toe_camber_jacobian(model, r0)                       # (2, 2, n)
    TX = jnp.einsum("abn,nk->abk", T, X)                     # d(toe, camber)/du (2, 2, 12)
    sign = jnp.asarray(SIDE_SIGN)
    out = {}
    toe0, camber0 = metrics.toe_camber(model, r0)
    out["design_wheel_load"] = eq.fz
    out["design_toe"] = toe0 * DEG
    out["design_camber"] = camber0 * DEG

    # wheel travel: bordered system, d(r, Fz)/d z_target
    Jb = bordered_jacobian(model, lin)
    rhs = jnp.zeros((6 * m + 2, 2), r0.dtype).at[-2:, :].set(jnp.eye(2) / Z_UNIT)
    dxz = jnp.linalg.solve(Jb, rhs)
    drz, dfz = dxz[:-2], dxz[-2:] * FZ_UNIT                  # (n, 2), (2, 2)
    for mode, prefix in (("parallel", ""), ("opposite", "roll_")):
        dz = jnp.array([1.0, 1.0]) if mode == "parallel" else sign
        tc = jnp.einsum("abn,n->ab", T, drz @ dz) / dz       # per own travel
        out[prefix + ("bump_steer" if mode == "parallel" else "steer")] = tc[0] * DEG
        out[prefix + "camber_gain"] = tc[1] * DEG
        out[prefix + "wheel_rate"] = (dfz @ dz) / dz / 1000.0

    R = loaded_radius
    per = {"lateral_force": 1000.0, "traction_force": 1000.0, "braking_force": 1000.0,
           "aligning_torque": 100.0}
    for analysis, name in (("lateral_force", "lateral_force"), ("traction_force", "traction_force"),
                           ("braking_force", "braking_force"), ("aligning_torque", "aligning_torque")):
        U = jnp.asarray(load_direction(analysis, R)).reshape(-1) * per[analysis]
        dtc = jnp.einsum("abk,k->ab", TX, U)
        dy = (G @ U).reshape(2, 6)
        out[f"toe_per_{name}"] = dtc[0] * DEG
        out[f"camber_per_{name}"] = dtc[1] * DEG
        if analysis == "lateral_force":
            out["lateral_compliance"] = -sign * dy[:, 1] * 1000.0      # mm, inboard
        elif analysis == "traction_force":
            out["longitudinal_compliance"] = dy[:, 0] * 1000.0         # mm, forward
        elif analysis == "braking_force":
            out["longitudinal_compliance_braking"] = -dy[:, 0] * 1000.0  # mm, rearward
    Gs = G.reshape(2, 6, 2, 6)
    out["compliance_matrix"] = jnp.stack([Gs[0, :, 0, :], Gs[1, :, 1, :]])
    out["compliance_full"] = G
    return {k: out[k] for k in (*METRICS, "compliance_matrix", "compliance_full")}


# --------------------------------------------------------------------------- nonlinear load cases

def _continuation(solve_one, amplitudes, state0):
    """Solve at each amplitude (static numpy array), marching outwards from the
    design position in both directions (first the amplitudes >= 0 upwards,
    then the negative ones downwards, restarting from ``state0``), each step
    starting from the previous converged state. One ``lax.scan`` (one trace
    of the Newton solver). ``solve_one(state, a) -> (state, outputs,
    converged)``; a failed step does not poison the next (it restarts from
    the last converged state)."""
    a = np.asarray(amplitudes, float)
    pos = np.nonzero(a >= 0)[0]
    pos = pos[np.argsort(a[pos], kind="stable")]
    neg = np.nonzero(a < 0)[0]
    neg = neg[np.argsort(-a[neg], kind="stable")]
    order = np.concatenate([pos, neg])
    reset = np.zeros(len(order), bool)
    reset[0] = True
    if len(pos) and len(neg):
        reset[len(pos)] = True

    def body(state, xs):
        ai, rs = xs
        state = jax.tree_util.tree_map(lambda s0, s: jnp.where(rs, s0, s), state0, state)
        new, out, ok = solve_one(state, ai)
        keep = jax.tree_util.tree_map(lambda n, o: jnp.where(ok, n, o), new, state)
        return keep, (out, ok)

    _, res = jax.lax.scan(body, state0, (jnp.asarray(a[order]), jnp.asarray(reset)))
    inverse = np.argsort(order)
    return jax.tree_util.tree_map(lambda x: x[inverse], res)


def _step_outputs(model, r, r0, u):
    toe, camber = metrics.toe_camber(model, r)
    return {"wheel_centre_displacement": metrics.wheel_centre_position(model, r)
            - metrics.wheel_centre_position(model, r0),
            "toe": toe, "camber": camber, "wheel_load": u}


def travel_direction(mode):
    """Height change (2,) per unit travel: parallel (1, 1), opposite (1, -1)."""
    if mode not in TRAVEL_MODES:
        raise ModelError(f"mode = {mode!r} is not one of {', '.join(TRAVEL_MODES)}")
    return np.array([1.0, 1.0]) if mode == "parallel" else SIDE_SIGN.copy()


def travel_curve(model, eq0, travel, mode="parallel", tol=1e-6, max_iter=60):
    """Wheel-travel load case: wheel-centre heights z_design + s * dz for each
    s in ``travel`` [m] (static array), dz = :func:`travel_direction` (mode)
    or a given (2,) array (so that modes can be vmapped). Returns per step:
    wheel_centre_displacement (2, 3) [m] from the design position, toe,
    camber (2,) [rad], wheel_load (2, 6) [N, N m] (the vertical force found),
    converged."""
    dz = jnp.asarray(travel_direction(mode) if isinstance(mode, str) else mode, eq0.r.dtype)
    z0 = design_heights(model)
    zero = jnp.zeros((2, 6), eq0.r.dtype)

    def solve_one(state, s):
        r, fz = state
        eq = constrained_equilibrium(model, zero, z0 + s * dz, r_start=r, fz_start=fz,
                                     tol=tol, max_iter=max_iter)
        u = zero.at[:, 2].set(eq.fz)
        return (eq.r, eq.fz), _step_outputs(model, eq.r, eq0.r, u), eq.converged

    out, ok = _continuation(solve_one, travel, (eq0.r, eq0.fz))
    return {**out, "converged": ok}


def force_curve(model, eq0, amplitudes, direction, tol=1e-6, max_iter=60):
    """Force load case: loads u = u0 + a * direction for each a in
    ``amplitudes`` (static array; N or N m), u0 = design wheel loads (vertical
    force held). ``direction`` (2, 6) from :func:`load_direction`. Returns
    per step the same fields as :func:`travel_curve`."""
    u0 = design_loads(eq0)
    D = jnp.asarray(direction, u0.dtype)

    def solve_one(r, a):
        u = u0 + a * D
        eq = static_equilibrium(model, u, r_start=r, tol=tol, max_iter=max_iter)
        return eq.r, _step_outputs(model, eq.r, eq0.r, u), eq.converged

    out, ok = _continuation(solve_one, amplitudes, eq0.r)
    return {**out, "converged": ok}


# --------------------------------------------------------------------------- time response

class Response(NamedTuple):
    t: jax.Array          # (n_steps + 1,) s
    outputs: object       # pytree with leading n_steps + 1
    r: jax.Array          # final state (flat)
    v: jax.Array


def simulate_checkpointed(system: integrate.System, r0, v0, t0, h, n_steps, output_fn, block=50,
                          method=None):
    """LSRT2 (or ``method``) with a linearisation every step whose reverse-mode
    derivative needs bounded memory: :func:`kernels.integrate.simulate` with
    ``checkpoint_block = block`` (the steps run as a scan over blocks of
    ``block`` steps, each under ``jax.checkpoint``; reverse mode stores only
    the block boundaries and recomputes one block at a time, so memory grows
    like n_steps / block + block per-step working sets). ``n_steps`` must be
    a multiple of ``block`` (both static). ``output_fn(r, v, t)`` is sampled
    at every step."""
    n_steps, block = int(n_steps), int(block)
    if block < 1 or n_steps % block:
        raise ModelError(f"n_steps = {n_steps} must be a positive multiple of block = {block}")
    traj = integrate.simulate(method or lsrt2.LSRT2, system, r0, v0, t0, h, n_steps + 1, 1, 1,
                              output_fn, checkpoint_block=block)
    return Response(traj.t, traj.outputs, traj.r, traj.v)

