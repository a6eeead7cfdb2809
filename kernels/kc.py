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
    ``longitudinal_compliance_braking`` (rearward per kN of braking force),
    ``wind_up`` (carrier pitch per kN m of braking torque on both wheel
    centres [deg/(kN m)]). For the axle as a whole (one value):
    ``axle_lateral_compliance`` (both contact patches loaded to the left)
    and ``axle_roll_steer`` (mean steer angle per body roll angle [%]) -
    the figures of a rigid axle, defined for every axle.

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
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from kernels import metrics
from kernels import linalg
from kernels.dynamics import linearise, q_fn
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
ANALYSES = ("wheel_travel",) + FORCE_ANALYSES + ("steering",)
ACKERMANN_MIN_STEER = math.radians(0.5)   # inner steer angle below which Ackermann figures are NaN
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
    "wind_up": ("deg/(kN m)", "wheel-carrier rotation about y (+ = top rearward) per kN m of braking torque "
                "(My, + = the reaction of braking a forward-rolling wheel) on BOTH wheel centres, brakes "
                "locked: a rigid axle's wind-up (axle pitch), an independent suspension's brake wind-up"),
    "toe_per_aligning_torque": ("deg/(100 N m)", "toe change per 100 N m of aligning torque, toe-out sense > 0"),
    "camber_per_aligning_torque": ("deg/(100 N m)", "camber change per 100 N m of aligning torque, toe-out sense > 0"),
    "lateral_force_steer": ("deg/kN", "steer-angle change (ISO, + = left) per kN of lateral force to the left on "
                            "BOTH wheels at the contact patches (cornering: same direction, so the rack, if "
                            "modelled, is loaded); + = steers into the turn"),
    "aligning_torque_steer": ("deg/(100 N m)", "steer-angle change (ISO, + = left) per 100 N m of aligning "
                              "torque +Mz (to the left) on BOTH wheels"),
    "design_caster": ("deg", "caster angle of the steering axis (side view, + = axis top rearward)"),
    "design_kingpin_inclination": ("deg", "kingpin (steering-axis) inclination (front view, + = axis top inboard)"),
    "design_caster_trail": ("mm", "caster trail at the ground (+ = steering-axis ground point ahead of the contact point)"),
    "design_scrub_radius": ("mm", "scrub radius at the ground (+ = steering-axis ground point inboard of the contact point)"),
    "toe_per_rack_travel": ("deg/mm", "toe change per mm of the side's own steering-joint (rack) travel "
                            "outboard (each side's own sense), wheel heights held"),
    "half_track_change_rate": ("mm/m", "contact-point movement outboard per metre of parallel wheel travel"),
    "wheel_recession": ("mm/m", "wheel-centre movement rearward per metre of parallel wheel travel"),
    "spring_motion_ratio": ("1", "main-spring compression per wheel travel (parallel travel)"),
    "damper_motion_ratio": ("1", "damper compression per wheel travel (parallel travel)"),
    "anti_roll_bar_wheel_rate": ("N/mm", "anti-roll bar's share of the roll wheel rate (opposite travel): "
                                 "roll_wheel_rate - wheel_rate (twice the bar's one-side rate at the wheel)"),
    "braking_path_angle": ("deg", "side-view path angle of the wheel-carrier point at the contact point in "
                           "parallel travel (+ = forward in bump): outboard brakes' anti-dive / anti-lift angle"),
    "traction_path_angle": ("deg", "side-view path angle of the wheel centre in parallel travel (+ = forward in "
                            "bump): anti-lift / anti-squat angle with the drive force at the wheel centre"),
    "anti_pitch_braking": ("%", "percent anti-dive (front axle) or anti-lift (rear axle) in braking, outboard "
                           "brakes, from braking_path_angle and the model's vehicle data"),
    "anti_pitch_traction": ("%", "percent anti-lift (front axle, front drive) or anti-squat (rear axle, rear "
                            "drive) in traction, from traction_path_angle and the model's vehicle data"),
}
# axle-level metrics (one value per variant), the cube's order
AXLE_METRICS = {
    "design_roll_centre_height": ("mm", "kinematic roll-centre height above the ground (contact points) at the design position"),
    "design_roll_centre_lateral": ("mm", "kinematic roll-centre lateral position (+ = left) at the design position"),
    "axle_lateral_compliance": ("mm/kN", "mean wheel-centre displacement to the left per kN of lateral force to "
                                "the left on BOTH wheels at the contact patches (cornering; the axle as a whole)"),
    "axle_roll_steer": ("%", "roll steer coefficient: mean steer angle (ISO, + = left) per body roll angle to the "
                        "right (left wheel rebound, right wheel bump; roll = travel difference / wheel-centre "
                        "track) x 100; + = steers towards the inside of a turn whose roll it is (rear axle: "
                        "roll understeer, front axle: roll oversteer)"),
}
# the axle-level metrics that are compliances (derivatives of the equilibrium,
# no geometry): computed with or without geometry
AXLE_COMPLIANCE_METRICS = ("axle_lateral_compliance", "axle_roll_steer")
# per-step geometry channels of the curves: name -> (dims after the step, units, long name)
GEOMETRY_CHANNELS = {
    "caster": (("side",), "rad", "caster angle of the steering axis (+ = axis top rearward)"),
    "kingpin_inclination": (("side",), "rad", "kingpin inclination of the steering axis (+ = axis top inboard)"),
    "caster_trail": (("side",), "m", "caster trail at the ground (+ = axis ground point ahead of the contact point)"),
    "scrub_radius": (("side",), "m", "scrub radius at the ground (+ = axis ground point inboard of the contact point)"),
    "half_track_change": (("side",), "m", "contact-point movement outboard from the design position"),
    "roll_centre_height": ((), "m", "kinematic roll-centre height above the ground (mean contact-point height)"),
    "ackermann_error": ((), "rad", "outer wheel's steer angle minus its Ackermann angle for the inner wheel's "
                        "(+ = towards parallel steer); NaN below 0.5 deg of steer, without vehicle data or on a rear axle"),
    "percent_ackermann": ((), "%", "(inner - outer steer angle) / (inner - Ackermann outer angle) x 100; "
                          "NaN as ackermann_error"),
}
COMPLIANCE_UNITS = ("SI: m/N (x,y,z per fx,fy,fz), m/(N m) (x,y,z per mx,my,mz), rad/N (rx,ry,rz per "
                    "fx,fy,fz), rad/(N m) (rx,ry,rz per mx,my,mz)")


# --------------------------------------------------------------------------- rig set-up

def brake_lock_index(model):
    """(rows, cols) of the bushings' ``k`` that lock the brakes: for every bushing joining a
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
            axes = R_body[b1] @ np.asarray(model.elements["bushing"]["rot1"][i])      # marker-1 axes, vehicle frame
            cos = np.abs(axes.T @ spin)
            j = int(np.argmax(cos))
            if cos[j] > 1 - 1e-6:
                rows.append(i)
                cols.append(3 + j)
    return np.array(rows, int), np.array(cols, int)


def lock_brakes(model, stiffness, index=None):
    """Model with ``stiffness`` [N m/rad] added about the spin axis of the wheel
    bearings (brake applied: braking torque goes to the carrier)."""
    rows, cols = brake_lock_index(model) if index is None else index
    if len(rows) == 0 or (not isinstance(stiffness, jax.core.Tracer) and stiffness == 0):
        return model
    return model.replace_elements(bushing={"k": model.elements["bushing"]["k"].at[rows, cols].add(stiffness)})


def design_heights(model):
    """Design wheel-centre heights (2,) [m]."""
    return model.r_design[model.topology.wheel_slots, 2]


def design_position(model, tol=1e-6, max_iter=60, r_start=None, fz_start=None):
    """Constrained equilibrium with the wheel centres at their design heights,
    gravity only (:class:`kernels.statics.ConstrainedEquilibrium`); the
    Newton iteration starts from ``r_start`` (default: the design geometry)
    and ``fz_start`` [N]."""
    return constrained_equilibrium(model, jnp.zeros((2, 6), model.r_design.dtype),
                                   design_heights(model), r_start=r_start, fz_start=fz_start,
                                   tol=tol, max_iter=max_iter)


def ride_position(model, wheel_load, tol=1e-6, max_iter=60):
    """K&C start position at a given vertical wheel load [N] per wheel (kerb,
    laden): the static equilibrium under that load at both wheel centres
    (force control, gravity acting), then the wheel-centre heights found
    there held as in :func:`design_position` (so every metric and curve is
    taken at that ride height, the vertical forces found equal the load)."""
    slots = model.topology.wheel_slots
    u = jnp.zeros((2, 6), model.r_design.dtype).at[:, 2].set(wheel_load)
    eqf = static_equilibrium(model, u, tol=tol, max_iter=max_iter)
    eq = constrained_equilibrium(model, jnp.zeros_like(u), eqf.r[slots, 2], r_start=eqf.r,
                                 fz_start=u[:, 2], tol=tol, max_iter=max_iter)
    return eq._replace(converged=eq.converged & eqf.converged, iterations=eq.iterations + eqf.iterations)


def design_loads(eq):
    """Wheel-centre loads (2, 6) at the design position: only the vertical force Fz0."""
    return jnp.zeros((2, 6), eq.r.dtype).at[:, 2].set(eq.fz)


# --------------------------------------------------------------------------- output Jacobians

def wheel_rotation_rates(angles):
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
        Y = Y.at[s, 3:, w, 3:].set(wheel_rotation_rates(r[w, 3:]))
    return Y.reshape(12, 6 * m)


def toe_camber_jacobian(model, r):
    """d(toe, camber)/dr, (2, 2, n): [toe | camber][left | right] per coordinate [rad]."""
    m = model.topology.n_bodies
    J = jax.jacfwd(lambda rr: jnp.stack(metrics.toe_camber(model, rr)))(r)   # (2, 2, m, 6)
    return J.reshape(2, 2, 6 * m)


# --------------------------------------------------------------------------- geometry

def steering_joints(model):
    """Bushing indices (2,) of the steering joints (left, right): the joint
    whose second marker the rack moves (model config ``steering_joint``), or
    None when the model names none. Host-side."""
    sj = model.topology.tables.get("steering_joints") or {}
    if not sj:
        return None
    names = list(model.topology.bushing_names)
    return np.array([names.index(sj[s]) for s in SIDES], int)


def travel_lock_slots(model):
    """State slots (2,) of the bodies whose height locks the suspension travel
    for the steering axis (model config ``travel_lock``), or None. Host-side."""
    tl = model.topology.tables.get("travel_lock") or {}
    if not tl:
        return None
    names = list(model.topology.body_names)
    return np.array([names.index(tl[s]) for s in SIDES], int)


def rack_direction(model, r, joints):
    """(2, nb, 3): change of the bushings' ``pos2`` (second-body frame) per metre of rack
    travel of the left / right steering joint, the marker moving along
    vehicle +y (rack travel > 0 to the left)."""
    m = model.topology.n_bodies
    nb = model.elements["bushing"]["pos2"].shape[0]
    D = jnp.zeros((2, nb, 3), r.dtype)
    for s in range(2):
        j = int(joints[s])
        b2 = int(model.topology.bushing_bodies[j, 1])
        R2 = jnp.eye(3, dtype=r.dtype) if b2 == m else euler_to_matrix(r[b2, 3:])
        D = D.at[s, j].set(R2[1, :])                      # R2^T e_y
    return D


def contact_points(model, r, loaded_radius):
    """Tyre contact points (2, 3) [m]: the lowest point of a rigid wheel of
    radius ``loaded_radius`` in the wheel plane, c = wc - R n with n the
    unit vector of the wheel plane closest to vehicle e_z (rim in the plane
    normal to the spin axis a: n = unit(e_z - (e_z . a) a))."""
    slots = model.topology.wheel_slots
    a = euler_to_matrix(r[slots, 3:])[:, :, 1]
    ez = jnp.array([0.0, 0.0, 1.0], r.dtype)
    n = ez[None, :] - a[:, 2:3] * a
    n = n / jnp.linalg.norm(n, axis=1, keepdims=True)
    return r[slots, :3] - loaded_radius * n


def carrier_slots(model):
    """State slots (2,) of the wheel carriers: the body other than the ground
    joined to each wheel by a bushing (the wheel bearing); the wheel itself
    where it hangs on the ground directly (toy axles). Host-side."""
    topo = model.topology
    out = []
    for w in np.asarray(topo.wheel_slots):
        other = [int(b2 if b1 == w else b1) for b1, b2 in np.asarray(topo.bushing_bodies)
                 if w in (b1, b2) and topo.n_bodies not in (b1, b2)]
        out.append(other[0] if other else int(w))
    return np.array(out, int)


def p2p_lengths(model, r):
    """Point-to-point element lengths (npp,) [m] at pose r."""
    from kernels.forces import marker_kinematics
    x = jnp.concatenate([jnp.concatenate([r, jnp.zeros_like(r)], 1),
                         jnp.zeros((1, 12), r.dtype)], 0)
    b = np.asarray(model.topology.p2p_bodies)
    if len(b) == 0:
        return jnp.zeros((0,), r.dtype)
    p1 = jax.vmap(lambda xx, p: marker_kinematics(xx, p)[0])(x[b[:, 0]], model.elements["p2p"]["pos1"])
    p2 = jax.vmap(lambda xx, p: marker_kinematics(xx, p)[0])(x[b[:, 1]], model.elements["p2p"]["pos2"])
    return jnp.linalg.norm(p2 - p1, axis=1)


# --------------------------------------------------------------------------- plausibility of a static state

class StaticLimits(NamedTuple):
    """How far a converged static state may lie from the design before it is
    implausible (a spring that cannot hold the load, a wrong preload or
    sign): wheel-centre offset [m], toe or camber change [rad], stop
    penetration [m] (None: a stop engaged at rest is allowed)."""
    wheel_centre_offset: float = 0.1
    alignment_change: float = math.radians(10.0)
    stop_penetration: Optional[float] = 1e-4


def static_state_measures(model, r):
    """How a static state r (m, 6) differs from the design geometry:
    wheel-centre offset (2,) [m], |toe change| (2,) and |camber change| (2,)
    [rad], and the largest stop penetration () [m] (> 0: a stop engaged; 0
    without stops)."""
    slots = model.topology.wheel_slots
    offset = jnp.linalg.norm(r[slots, :3] - model.r_design[slots, :3], axis=1)
    toe, camber = metrics.toe_camber(model, r)
    toe0, camber0 = metrics.toe_camber(model, model.r_design)
    esign = model.elements["p2p"]["engage_sign"]
    if esign.shape[0] == 0:
        pen = jnp.zeros((), r.dtype)
    else:
        L = p2p_lengths(model, r)
        pen = jnp.max(jnp.where(esign != 0, esign * (model.elements["p2p"]["engage"] - L), -jnp.inf))
        pen = jnp.maximum(pen, 0.0)
    return offset, jnp.abs(toe - toe0), jnp.abs(camber - camber0), pen


def static_state_plausible(model, r, limits: StaticLimits, held=False):
    """Whether the static state r is plausible (() bool): wheel centres
    within ``limits.wheel_centre_offset`` of the design (not checked when
    ``held``: the K&C rig holds them at design height), toe and camber
    within ``limits.alignment_change`` of the design geometry's, and no
    stop engaged beyond ``limits.stop_penetration``."""
    offset, dtoe, dcamber, pen = static_state_measures(model, r)
    ok = jnp.all(dtoe <= limits.alignment_change) & jnp.all(dcamber <= limits.alignment_change)
    if not held:
        ok = ok & jnp.all(offset <= limits.wheel_centre_offset)
    if limits.stop_penetration is not None:
        ok = ok & (pen <= limits.stop_penetration)
    return ok


def p2p_of_kind(model, kind):
    """Index (2,) of the first point-to-point element of ``kind`` ('spring',
    'damper', ...) on each side (names ending ``_left`` / ``_right``), -1 if none."""
    topo = model.topology
    out = []
    for s in SIDES:
        idx = [i for i, (nm, k) in enumerate(zip(topo.p2p_names, topo.p2p_kinds))
               if k == kind and nm.endswith(f"_{s}")]
        out.append(idx[0] if idx else -1)
    return np.array(out, int)


def screw_axis(omega, vel, point):
    """Instantaneous screw axis of a rigid body from its small rotation
    ``omega`` (3,) and the velocity ``vel`` (3,) of ``point`` (3,) (both per
    unit of the same input): unit direction e (pointing up, e_z >= 0) and the
    axis point closest to ``point``: point + omega x vel / |omega|^2."""
    w2 = jnp.sum(omega * omega)
    e = omega / jnp.sqrt(w2)
    e = jnp.where(e[2] < 0, -e, e)
    return e, point + jnp.cross(omega, vel) / w2


def steering_axis_geometry(e, p, c, side_sign):
    """Caster, kingpin inclination [rad], caster trail and scrub radius [m] of
    a steering axis (unit e pointing up, through p) against the contact point c
    (ground plane z = c_z): caster > 0 with the axis top rearward; kingpin
    inclination > 0 with the top inboard; trail > 0 with the axis' ground
    point ahead of c; scrub radius > 0 with the ground point inboard of c
    (side_sign +1 left, -1 right)."""
    caster = jnp.arctan2(-e[0], e[2])
    kpi = jnp.arctan2(-side_sign * e[1], e[2])
    t = (c[2] - p[2]) / e[2]
    g = p + t * e
    return caster, kpi, g[0] - c[0], side_sign * (c[1] - g[1])


def roll_centre(c, dc):
    """Kinematic roll centre (y, z) [m] from the contact points c (2, 3) and
    their velocities dc (2, 3) per unit of each side's own vertical travel:
    the intersection, in the y-z plane, of the lines through each contact
    point normal to its velocity (each line passes through the side's
    instantaneous centre)."""
    d = jnp.stack([dc[:, 2], -dc[:, 1]], axis=1)          # (2, 2) line directions (y, z)
    A = jnp.stack([d[0], -d[1]], axis=1)
    tu = linalg.solve(A, c[1, 1:] - c[0, 1:])
    return c[0, 1:] + tu[0] * d[0]


GEOMETRY_STEP = ("caster", "kingpin_inclination", "caster_trail", "scrub_radius")


def geometry(model, r, u, loaded_radius, joints=None, lin=None):
    """Suspension geometry at pose r (loads u (2, 6) applied at the wheel
    centres, the vertical ones included), from the exact derivatives of the
    equilibrium with the wheel-centre heights held (bordered system, as on a
    K&C rig whose wheel pads hold the height):

    * steering axis per side: the instantaneous screw axis of the wheel
      relative to the body under rack travel at the side's steering joint
      (:func:`rack_direction`) with the suspension travel locked: the rack
      column with the heights held plus the own-side travel that undoes the
      change of the locked quantity - the height (centre of mass) of the
      model's ``travel_lock`` body (a link that moves only with travel, e.g.
      the double wishbone's lower link), else the length of the side's first
      ``spring`` element; heights held if neither. This is Adams/Car's
      "instant axis" steer-axis method (it locks the vertical motion of a
      part so that the spring travel is locked). Bushing
      compliance is included, as on a rig: a compliant axle's axis differs
      from the line through its ball joints. ``caster``,
      ``kingpin_inclination`` [rad], ``caster_trail``, ``scrub_radius`` [m]
      (:func:`steering_axis_geometry`) and ``toe_per_rack`` [rad/m] (toe
      change per metre of the side's own rack travel, heights held); NaN
      without a steering joint;
    * ``contact_point`` (2, 3) [m] (:func:`contact_points`);
    * ``roll_centre`` (y, z) [m] (:func:`roll_centre`, from each side's own
      travel with the other held), ``roll_centre_height`` above the mean
      contact-point height [m];
    * per metre of parallel travel: ``d_wheel_centre``, ``d_contact_point``
      (the geometric contact point), ``d_carrier_contact_point`` (the
      wheel-carrier point at the contact point: where an outboard brake's
      reaction acts) (2, 3) and ``d_p2p_length`` (npp,) [m/m].
    """
    m = model.topology.n_bodies
    n = 6 * m
    v0 = jnp.zeros_like(r)
    if lin is None:
        lin = linearise(model, r, v0, u)
    Jb = bordered_jacobian(model, lin)
    rhs = jnp.zeros((n + 2, 4), r.dtype).at[n:, :2].set(jnp.eye(2, dtype=r.dtype) / Z_UNIT)
    if joints is not None:
        D = rack_direction(model, r, joints)
        for s in range(2):
            dq = jax.jvp(lambda p: q_fn(model.replace_elements(bushing={"pos2": p}), r, v0, u).reshape(-1),
                         (model.elements["bushing"]["pos2"],), (D[s],))[1]
            rhs = rhs.at[:n, 2 + s].set(-dq)
    dx = linalg.solve(Jb, rhs)[:n]                       # (n, 4): z_left, z_right, rack_left, rack_right
    slots = np.asarray(model.topology.wheel_slots)
    R = loaded_radius
    c = contact_points(model, r, R)
    cfun = lambda rr: contact_points(model, rr.reshape(m, 6), R)
    dc = jax.vmap(lambda t: jax.jvp(cfun, (r.reshape(-1),), (t,))[1], in_axes=1)(dx[:, :2])   # (2 cols, 2, 3)
    out = {"contact_point": c}
    own = jnp.stack([dc[0, 0], dc[1, 1]])                    # side s's contact point per own travel
    rc = roll_centre(c, own)
    out["roll_centre"] = rc
    out["roll_centre_height"] = rc[1] - jnp.mean(c[:, 2])
    par = dx[:, 0] + dx[:, 1]
    out["d_wheel_centre"] = par.reshape(m, 6)[slots, :3]
    out["d_contact_point"] = dc[0] + dc[1]
    # the carrier-fixed point at the contact point (outboard brake reaction)
    cs = carrier_slots(model)
    dcar = par.reshape(m, 6)[cs]
    wc = jax.vmap(lambda a, d: wheel_rotation_rates(a) @ d)(r[cs, 3:], dcar[:, 3:])
    out["d_carrier_contact_point"] = dcar[:, :3] + jnp.cross(wc, c - r[cs, :3])
    npp = model.elements["p2p"]["pos1"].shape[0]
    if npp:
        lfun = lambda rr: p2p_lengths(model, rr.reshape(m, 6))
        dL = jax.vmap(lambda t: jax.jvp(lfun, (r.reshape(-1),), (t,))[1], in_axes=1)(dx)   # (4, npp)
    else:
        dL = jnp.zeros((4, 0), r.dtype)
    out["d_p2p_length"] = dL[0] + dL[1]
    nan2 = jnp.full((2,), jnp.nan, r.dtype)
    if joints is None:
        for k in (*GEOMETRY_STEP, "toe_per_rack"):
            out[k] = nan2
        return out
    toe_fn = lambda rr: metrics.toe_camber(model, rr.reshape(m, 6))[0]
    springs = p2p_of_kind(model, "spring")
    locks = travel_lock_slots(model)
    geo, dtoe = [], []
    for s in range(2):
        rack = dx[:, 2 + s]
        dtoe.append(jax.jvp(toe_fn, (r.reshape(-1),), (rack,))[1][s])
        # lock the suspension travel: add the own-side travel that undoes the
        # change of the locked quantity (the travel-lock body's height, else
        # the spring length)
        if locks is not None:
            i = 6 * int(locks[s]) + 2
            rack = rack - dx[i, 2 + s] / dx[i, s] * dx[:, s]
        elif springs[s] >= 0:
            k = int(springs[s])
            rack = rack - dL[2 + s, k] / dL[s, k] * dx[:, s]
        d = rack.reshape(m, 6)[slots[s]]
        omega = wheel_rotation_rates(r[slots[s], 3:]) @ d[3:]
        e, p = screw_axis(omega, d[:3], r[slots[s], :3])
        geo.append(steering_axis_geometry(e, p, c[s], SIDE_SIGN[s]))
    for i, k in enumerate(GEOMETRY_STEP):
        out[k] = jnp.stack([geo[0][i], geo[1][i]])
    out["toe_per_rack"] = jnp.stack(dtoe)
    return out


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

GEOMETRY_METRICS = ("lateral_force_steer", "aligning_torque_steer", "design_caster", "design_kingpin_inclination", "design_caster_trail", "design_scrub_radius",
                    "toe_per_rack_travel",
                    "half_track_change_rate", "wheel_recession", "spring_motion_ratio", "damper_motion_ratio",
                    "anti_roll_bar_wheel_rate", "braking_path_angle", "traction_path_angle",
                    "anti_pitch_braking", "anti_pitch_traction")
# NaN (not a failure) when the model lacks what defines them: a steering joint,
# a spring / damper element per side, vehicle data
OPTIONAL_METRICS = ("design_caster", "design_kingpin_inclination", "design_caster_trail", "design_scrub_radius",
                    "toe_per_rack_travel",
                    "spring_motion_ratio", "damper_motion_ratio", "anti_pitch_braking", "anti_pitch_traction")


def vehicle_data(model):
    """The model's vehicle data (``vehicle`` in its config) or None:
    {axle: 'front' | 'rear', wheelbase [m], cg_height [m], front_brake_share}."""
    return model.topology.tables.get("vehicle") or None


def geometry_metrics(model, geo, wheel_rate, roll_wheel_rate):
    """Design-position metrics (engineering units) from :func:`geometry`."""
    sign = jnp.asarray(SIDE_SIGN)
    nan2 = jnp.full((2,), jnp.nan, geo["contact_point"].dtype)
    out = {"design_caster": geo["caster"] * DEG, "design_kingpin_inclination": geo["kingpin_inclination"] * DEG,
           "design_caster_trail": geo["caster_trail"] * 1000.0, "design_scrub_radius": geo["scrub_radius"] * 1000.0,
           "toe_per_rack_travel": sign * geo["toe_per_rack"] * DEG / 1000.0,     # outboard sense
           "half_track_change_rate": sign * geo["d_contact_point"][:, 1] * 1000.0,
           "wheel_recession": -geo["d_wheel_centre"][:, 0] * 1000.0}
    for kind in ("spring", "damper"):
        idx = p2p_of_kind(model, kind)
        out[f"{kind}_motion_ratio"] = (nan2 if np.any(idx < 0) else -geo["d_p2p_length"][idx])
    out["anti_roll_bar_wheel_rate"] = roll_wheel_rate - wheel_rate
    dcp, dwc = geo["d_carrier_contact_point"], geo["d_wheel_centre"]
    tb, tt = dcp[:, 0] / dcp[:, 2], dwc[:, 0] / dwc[:, 2]
    out["braking_path_angle"] = jnp.arctan(tb) * DEG
    out["traction_path_angle"] = jnp.arctan(tt) * DEG
    veh = vehicle_data(model)
    if veh is None:
        out["anti_pitch_braking"] = out["anti_pitch_traction"] = nan2
    else:
        lh = veh["wheelbase"] / veh["cg_height"]
        if veh["axle"] == "front":
            out["anti_pitch_braking"] = tb * lh * veh["front_brake_share"] * 100.0
            out["anti_pitch_traction"] = tt * lh * 100.0
        else:
            out["anti_pitch_braking"] = -tb * lh * (1.0 - veh["front_brake_share"]) * 100.0
            out["anti_pitch_traction"] = -tt * lh * 100.0
    return out


def kc_metrics(model, eq, loaded_radius=DEFAULT_LOADED_RADIUS, with_geometry=True):
    """All K&C metrics (module doc) at the design position ``eq``
    (:func:`design_position`). Returns {name: (2,) per side}, the axle-level
    :data:`AXLE_METRICS` {name: ()}, ``compliance_matrix`` (2, 6, 6) and
    ``compliance_full`` (12, 12) [SI]. ``with_geometry=False`` leaves out
    :data:`GEOMETRY_METRICS` and :data:`AXLE_METRICS` (cheaper: the tuner
    asks for them only when an objective or constraint uses one)."""
    m = model.topology.n_bodies
    r0 = eq.r
    u0 = design_loads(eq)
    lin = linearise(model, r0, jnp.zeros_like(r0), u0)
    X = -linalg.solve(lin.J_r, lin.J_u)                 # dr/du (n, 12), loads in force control
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
    dxz = linalg.solve(Jb, rhs)
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
    # cornering: both wheels loaded in the same direction (vehicle frame), as
    # Adams/Car's lateral force / aligning torque steer compliances
    for name, U2, per in (("lateral_force_steer", jnp.array([0.0, 1.0, 0.0, R, 0.0, 0.0]), 1000.0),
                          ("aligning_torque_steer", jnp.array([0.0, 0.0, 0.0, 0.0, 0.0, 1.0]), 100.0)):
        U = jnp.tile(U2, 2) * per
        out[name] = -sign * jnp.einsum("bk,k->b", TX[0], U) * DEG      # steer = -sign * toe
    # wind-up: braking torque My on both wheel centres (the brakes are locked)
    dy = (G @ jnp.tile(jnp.array([0.0, 0.0, 0.0, 0.0, 1000.0, 0.0]), 2)).reshape(2, 6)
    out["wind_up"] = dy[:, 4] * DEG
    # the axle as a whole: lateral force to the left on both contact patches; roll
    dy = (G @ (jnp.tile(jnp.array([0.0, 1.0, 0.0, R, 0.0, 0.0]), 2) * 1000.0)).reshape(2, 6)
    out["axle_lateral_compliance"] = jnp.mean(dy[:, 1]) * 1000.0
    dz = -sign                                            # body roll to the right, 1 m per side
    track = r0[model.topology.wheel_slots[0], 1] - r0[model.topology.wheel_slots[1], 1]
    steer = -sign * jnp.einsum("bn,n->b", T[0], drz @ dz)
    out["axle_roll_steer"] = jnp.mean(steer) / (2.0 / track) * 100.0
    Gs = G.reshape(2, 6, 2, 6)
    out["compliance_matrix"] = jnp.stack([Gs[0, :, 0, :], Gs[1, :, 1, :]])
    out["compliance_full"] = G
    if not with_geometry:
        return {k: out[k] for k in (*METRICS, *AXLE_COMPLIANCE_METRICS, "compliance_matrix", "compliance_full")
                if k not in GEOMETRY_METRICS}
    geo = geometry(model, r0, u0, R, steering_joints(model), lin=lin)
    out.update(geometry_metrics(model, geo, out["wheel_rate"], out["roll_wheel_rate"]))
    out["design_roll_centre_height"] = geo["roll_centre_height"] * 1000.0
    out["design_roll_centre_lateral"] = geo["roll_centre"][0] * 1000.0
    return {k: out[k] for k in (*METRICS, *AXLE_METRICS, "compliance_matrix", "compliance_full")}


# --------------------------------------------------------------------------- nonlinear load cases

@jax.tree_util.register_pytree_node_class
class Steps:
    """The load steps of a K&C curve: ``values`` (S,) (an array leaf, may be
    traced) and the marching order of :func:`_continuation` (static, from
    the values' signs and order when built): a curve's steps read at run
    time with the order compiled in."""

    def __init__(self, values, order=None, n_up=None):
        if order is None:
            a = np.asarray(values, float)
            pos = np.nonzero(a >= 0)[0]
            pos = pos[np.argsort(a[pos], kind="stable")]
            neg = np.nonzero(a < 0)[0]
            neg = neg[np.argsort(-a[neg], kind="stable")]
            order, n_up = tuple(int(i) for i in np.concatenate([pos, neg])), len(pos)
        self.values, self.order, self.n_up = values, tuple(order), int(n_up)

    def tree_flatten(self):
        return (self.values,), (self.order, self.n_up)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(children[0], *aux)

    def __len__(self):
        return len(self.order)


def _continuation(solve_one, amplitudes, state0):
    """Solve at each amplitude (a static numpy array, or :class:`Steps`),
    marching outwards from the design position in both directions (first
    the amplitudes >= 0 upwards, then the negative ones downwards,
    restarting from ``state0``), each step starting from the previous
    converged state. One ``lax.scan`` (one trace of the Newton solver).
    ``solve_one(state, a) -> (state, outputs, converged)``; a failed step
    does not poison the next (it restarts from the last converged state)."""
    steps = amplitudes if isinstance(amplitudes, Steps) else Steps(amplitudes)
    a = jnp.asarray(steps.values, jnp.float64)
    order = np.array(steps.order, int)
    reset = np.zeros(len(order), bool)
    reset[0] = True
    if 0 < steps.n_up < len(order):
        reset[steps.n_up] = True

    def body(state, xs):
        ai, rs = xs
        state = jax.tree_util.tree_map(lambda s0, s: jnp.where(rs, s0, s), state0, state)
        new, out, ok = solve_one(state, ai)
        keep = jax.tree_util.tree_map(lambda n, o: jnp.where(ok, n, o), new, state)
        return keep, (out, ok)

    _, res = jax.lax.scan(body, state0, (a[order], jnp.asarray(reset)))
    inverse = np.argsort(order)
    return jax.tree_util.tree_map(lambda x: x[inverse], res)


def _step_outputs(model, r, r0, u, loaded_radius, joints):
    toe, camber = metrics.toe_camber(model, r)
    geo = geometry(model, r, u, loaded_radius, joints)
    c0 = contact_points(model, r0, loaded_radius)
    out = {"wheel_centre_displacement": metrics.wheel_centre_position(model, r)
           - metrics.wheel_centre_position(model, r0),
           "toe": toe, "camber": camber, "wheel_load": u,
           "half_track_change": jnp.asarray(SIDE_SIGN) * (geo["contact_point"][:, 1] - c0[:, 1]),
           "roll_centre_height": geo["roll_centre_height"]}
    out.update({k: geo[k] for k in GEOMETRY_STEP})
    out.update(ackermann(model, toe, c0))
    return out


def ackermann(model, toe, c0):
    """Ackermann figures of a front axle from the toe angles (2,) [rad, DIN
    70000] and the design contact points c0 (2, 3) [m]: steer angles (ISO, +
    = left turn) delta_left = -toe_left, delta_right = +toe_right; the inner
    wheel is the one on the side of the turn; Ackermann's outer angle
    cot(d_o) = cot(d_i) + track / wheelbase (rear axle unsteered, wheelbase
    from the model's vehicle data, track between the design contact
    points). Returns ``ackermann_error`` = |d_o| - |d_o,Ackermann| [rad] and
    ``percent_ackermann`` [%]; NaN below :data:`ACKERMANN_MIN_STEER`, on a
    rear axle or without vehicle data."""
    nan = jnp.full((), jnp.nan, toe.dtype)
    veh = vehicle_data(model)
    if veh is None or veh["axle"] != "front":
        return {"ackermann_error": nan, "percent_ackermann": nan}
    delta = jnp.stack([-toe[0], toe[1]])
    left_turn = delta[0] + delta[1] > 0
    di = jnp.abs(jnp.where(left_turn, delta[0], delta[1]))
    do = jnp.abs(jnp.where(left_turn, delta[1], delta[0]))
    track = c0[0, 1] - c0[1, 1]
    ok = di > ACKERMANN_MIN_STEER
    di_safe = jnp.where(ok, di, 1.0)
    do_ack = jnp.arctan(1.0 / (1.0 / jnp.tan(di_safe) + track / veh["wheelbase"]))
    err = jnp.where(ok, do - do_ack, jnp.nan)
    pct = jnp.where(ok, (di - do) / (di_safe - do_ack) * 100.0, jnp.nan)
    return {"ackermann_error": err, "percent_ackermann": pct}


def travel_direction(mode):
    """Height change (2,) per unit travel: parallel (1, 1), opposite (1, -1)."""
    if mode not in TRAVEL_MODES:
        raise ModelError(f"mode = {mode!r} is not one of {', '.join(TRAVEL_MODES)}")
    return np.array([1.0, 1.0]) if mode == "parallel" else SIDE_SIGN.copy()


def travel_curve(model, eq0, travel, mode="parallel", tol=1e-6, max_iter=60,
                 loaded_radius=DEFAULT_LOADED_RADIUS):
    """Wheel-travel load case: wheel-centre heights z_design + s * dz for each
    s in ``travel`` [m] (static array), dz = :func:`travel_direction` (mode)
    or a given (2,) array (so that modes can be vmapped). Returns per step:
    wheel_centre_displacement (2, 3) [m] from the design position, toe,
    camber (2,) [rad], wheel_load (2, 6) [N, N m] (the vertical force found),
    the steering-axis geometry :data:`GEOMETRY_STEP` (2,) [rad, m],
    half_track_change (2,) [m, outboard > 0], roll_centre_height () [m]
    (:func:`geometry` at each step), converged."""
    dz = jnp.asarray(travel_direction(mode) if isinstance(mode, str) else mode, eq0.r.dtype)
    z0 = eq0.r[model.topology.wheel_slots, 2]     # the start position's heights
    joints = steering_joints(model)
    zero = jnp.zeros((2, 6), eq0.r.dtype)

    def solve_one(state, s):
        r, fz = state
        eq = constrained_equilibrium(model, zero, z0 + s * dz, r_start=r, fz_start=fz,
                                     tol=tol, max_iter=max_iter)
        u = zero.at[:, 2].set(eq.fz)
        return (eq.r, eq.fz), _step_outputs(model, eq.r, eq0.r, u, loaded_radius, joints), eq.converged

    out, ok = _continuation(solve_one, travel, (eq0.r, eq0.fz))
    return {**out, "converged": ok}


def rack_travel_direction(model, r, joints):
    """(nb, 3): change of the bushings' ``pos2`` per metre of rack travel (+y) of the
    whole rack: both steering joints (one, when both sides share it)."""
    D = rack_direction(model, r, joints)
    return D[0] if int(joints[0]) == int(joints[1]) else D[0] + D[1]


def steering_curve(model, eq0, rack, tol=1e-6, max_iter=60, loaded_radius=DEFAULT_LOADED_RADIUS):
    """Steering load case (K&C rig steering test): the steering joints'
    rack-side markers moved by each rack travel in ``rack`` [m] (static
    array; + = rack to the left) along vehicle y, the wheel-centre heights
    held at design (vertical forces found), no other load. Returns per step
    the fields of :func:`travel_curve` (Ackermann figures included)."""
    joints = steering_joints(model)
    if joints is None:
        raise ModelError(f"model {model.topology.name!r} names no steering_joint: no steering analysis")
    D = rack_travel_direction(model, eq0.r, joints)
    z0 = eq0.r[model.topology.wheel_slots, 2]     # the start position's heights
    zero = jnp.zeros((2, 6), eq0.r.dtype)

    def solve_one(state, a):
        r, fz = state
        ma = model.replace_elements(bushing={"pos2": model.elements["bushing"]["pos2"] + a * D})
        eq = constrained_equilibrium(ma, zero, z0, r_start=r, fz_start=fz, tol=tol, max_iter=max_iter)
        u = zero.at[:, 2].set(eq.fz)
        return (eq.r, eq.fz), _step_outputs(ma, eq.r, eq0.r, u, loaded_radius, joints), eq.converged

    out, ok = _continuation(solve_one, rack, (eq0.r, eq0.fz))
    return {**out, "converged": ok}


def force_curve(model, eq0, amplitudes, direction, tol=1e-6, max_iter=60,
                loaded_radius=DEFAULT_LOADED_RADIUS):
    """Force load case: loads u = u0 + a * direction for each a in
    ``amplitudes`` (static array; N or N m), u0 = design wheel loads (vertical
    force held). ``direction`` (2, 6) from :func:`load_direction`. Returns
    per step the same fields as :func:`travel_curve`."""
    u0 = design_loads(eq0)
    D = jnp.asarray(direction, u0.dtype)
    joints = steering_joints(model)

    def solve_one(r, a):
        u = u0 + a * D
        eq = static_equilibrium(model, u, r_start=r, tol=tol, max_iter=max_iter)
        return eq.r, _step_outputs(model, eq.r, eq0.r, u, loaded_radius, joints), eq.converged

    out, ok = _continuation(solve_one, amplitudes, eq0.r)
    return {**out, "converged": ok}

