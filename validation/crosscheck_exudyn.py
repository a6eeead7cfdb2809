"""Independent cross-check of the engine against the multibody code Exudyn.

The same axle (bodies, masses, inertias, marker frames, bushings, P2P
elements, gravity and wheel-centre loads) is generated in Exudyn **from the
kernels' model pytree** (:class:`kernels.model.Model`, built from the tables
of :func:`sweep.axle.builder.build_tables`), so that the two models cannot
drift apart. Exudyn then solves the static equilibrium, integrates the load
case with its own implicit integrator (generalized-alpha) and computes the
eigenvalues of its own linearisation. This module builds and runs the
Exudyn side (:func:`build_exudyn`, :func:`solve_static`, :func:`simulate`,
:func:`exudyn_state_matrix`) and provides the kernels' state matrix and the
eigenvalue matching (:func:`our_state_matrix`, :func:`match_eigenvalues`);
``tests/validation/test_exudyn.py`` puts the results next to the kernels' (Newton
equilibrium, LSRT2 / Radau, eigenvalues of the state matrix from J_r, J_v,
K) and ``docs/crosscheck.md`` reports the agreement and explains the
tolerances.

Mapping (what is identical and what is not):

- Bodies: ``ObjectRigidBody`` on ``NodeRigidBodyRxyz`` nodes (Tait-Bryan
  x-y'-z'' angles; ours are z-y'-x''): same mass, inertia about the centre of
  mass in the body frame, body frame origin = centre of mass, same design
  pose. No constraints: every body is free, as in the kernels.
- Bushings: ``ObjectConnectorRigidBodySpringDamper`` (non-intrinsic
  formulation) between two ``MarkerBodyRigid`` at the bushing's marker
  points, ``rotationMarker0/1`` = the marker frames. ``native``: diagonal
  stiffness and damping = the per-direction coefficients (a tabulated
  characteristic is linearised at zero deflection: value -> preload, slope
  -> stiffness). Differences by formulation, both of second order in the
  deflection: Exudyn measures the relative rotation by Tait-Bryan xyz angles
  and uses its torque directly (ours: the rotation vector theta and the
  torque Jl^-T(theta) f_r, the gradient of the bushing potential), and it
  applies the force on body 1 at marker 1 and the reaction on body 2 at
  marker 2 (ours: both at marker 2's position, so that the pair has no net
  moment and the elastic part is conservative, method.md section 1).
  ``matched``: a user function with the kernels' law plus an auxiliary
  moment connector (see :func:`build_exudyn`).
- P2P elements: ``ObjectConnectorSpringDamper`` with a Python
  ``springForceUserFunction`` that evaluates exactly the kernels' law
  (:func:`kernels.forces.p2p_law_parameters`, the Hermite tables of
  :mod:`kernels.curves`, the compression/rebound blend of
  :mod:`kernels.forces`) from the Model's arrays; the line of action and the
  application points (the two marker points) are the same as ours.
- Loads: gravity on every body (``LoadMassProportional``) and the
  wheel-centre forces/torques u(t) of the excitation (``LoadForceVector`` /
  ``LoadTorqueVector`` at the wheel body origin, vehicle frame).

Units: SI throughout (m, kg, s, N, N m, rad). ``exudyn`` is imported lazily
inside the functions, so this module imports without it.

This is validation code, not part of the installed packages (``kernels``,
``sweep``): it lives in ``validation/`` of the repository and is run by
``tests/validation/test_exudyn.py``. It uses only public names of ``kernels`` (the
Model fields, :func:`kernels.dynamics.linearise`) and two module constants
of its numerics, :data:`kernels.forces.DAMPER_BLEND` (compression/rebound
blend width) and :data:`kernels.loads.STEP_TOL` (when a step counts as
switched); the P2P law it re-implements is the one of the private
:func:`kernels.forces.p2p_law_parameters`, read back from the Model's arrays (not
imported).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
VERBOSE = 0
NEWTON_RTOL = 1e-6
NEWTON_ATOL = 1e-2
SYSTEM_WIDE = False

from kernels.model import DIRECTIONS, Model  # noqa: F401  (DIRECTIONS: documentation)

# ------------------------------------------------------------------ small numpy helpers


def euler_zyx_to_matrix(a):
    """Rotation matrix (body -> vehicle) of our z-y'-x'' angles ``(a_z, a_y', a_x'')`` [rad]."""
    az, ay, ax = a
    cz, sz, cy, sy, cx, sx = np.cos(az), np.sin(az), np.cos(ay), np.sin(ay), np.cos(ax), np.sin(ax)
    Rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    Ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    Rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    return Rz @ Ry @ Rx


def matrix_to_euler_zyx(R):
    """Inverse of :func:`euler_zyx_to_matrix` for |a_y'| < pi/2 [rad]."""
    return np.array([np.arctan2(R[1, 0], R[0, 0]), np.arcsin(np.clip(-R[2, 0], -1, 1)),
                     np.arctan2(R[2, 1], R[2, 2])])


def toe_camber_from_matrix(R, side):
    """Toe and camber [rad], DIN 70000 signs, of a wheel with rotation matrix R.

    Written out independently of :func:`kernels.metrics.toe_camber` (same
    definition): spin axis a = R e_y; left: toe = atan2(a_x, a_y),
    camber = -asin(a_z); right: toe = atan2(-a_x, a_y), camber = asin(a_z).
    """
    a = np.asarray(R)[:, 1]
    s = 1.0 if side == "left" else -1.0
    return np.arctan2(s * a[0], a[1]), np.arcsin(np.clip(-s * a[2], -1, 1))


def _curve_eval(table, i, x):
    """Value of the kernels' Hermite table ``i`` (numpy arrays) at scalar x."""
    br = table["breaks"][i]
    j = int(np.sum(x >= br))
    t = x - table["origin"][i][j]
    c = table["coef"][i][j]
    return c[0] + t * (c[1] + t * (c[2] + t * c[3]))


def _curve_slope(table, i, x):
    br = table["breaks"][i]
    j = int(np.sum(x >= br))
    t = x - table["origin"][i][j]
    c = table["coef"][i][j]
    return c[1] + t * (2 * c[2] + t * 3 * c[3])


def rotxyz_to_matrix(a):
    """Rotation matrix of Tait-Bryan angles x-y'-z'' (Exudyn's Rxyz): Rx(a0) Ry(a1) Rz(a2)."""
    c0, s0, c1, s1, c2, s2 = np.cos(a[0]), np.sin(a[0]), np.cos(a[1]), np.sin(a[1]), np.cos(a[2]), np.sin(a[2])
    Rx = np.array([[1, 0, 0], [0, c0, -s0], [0, s0, c0]])
    Ry = np.array([[c1, 0, s1], [0, 1, 0], [-s1, 0, c1]])
    Rz = np.array([[c2, -s2, 0], [s2, c2, 0], [0, 0, 1]])
    return Rx @ Ry @ Rz


def matrix_to_rotation_vector(R):
    """Rotation vector [rad] (axis * angle, angle < pi) of a rotation matrix (numpy)."""
    s = 0.5 * np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    c = 0.5 * (np.trace(R) - 1.0)
    ns = np.linalg.norm(s)
    if ns < 1e-12:
        return s * (1.0 + ns * ns / 6.0)
    return s * (np.arctan2(ns, c) / ns)


def _rotation_vector_of_rxyz(a0, a1, a2):
    """Rotation vector [rad] of the rotation Rx(a0) Ry(a1) Rz(a2) (Exudyn's Tait-Bryan
    angles), written with scalar math for speed (called in user functions)."""
    c0, s0, c1, s1, c2, s2 = (math.cos(a0), math.sin(a0), math.cos(a1), math.sin(a1),
                              math.cos(a2), math.sin(a2))
    # R = Rx Ry Rz
    r00, r01, r02 = c1 * c2, -c1 * s2, s1
    r10, r11, r12 = c0 * s2 + s0 * s1 * c2, c0 * c2 - s0 * s1 * s2, -s0 * c1
    r20, r21, r22 = s0 * s2 - c0 * s1 * c2, s0 * c2 + c0 * s1 * s2, c0 * c1
    sx, sy, sz = 0.5 * (r21 - r12), 0.5 * (r02 - r20), 0.5 * (r10 - r01)
    c = 0.5 * (r00 + r11 + r22 - 1.0)
    ns = math.sqrt(sx * sx + sy * sy + sz * sz)
    f = 1.0 + ns * ns / 6.0 if ns < 1e-12 else math.atan2(ns, c) / ns
    return sx * f, sy * f, sz * f


def _dexp_gamma(t2):
    """(1 - (theta/2) cot(theta/2)) / theta^2 of t2 = theta^2 (series below 1e-2),
    written independently of kernels.rotations for the user functions."""
    if t2 < 1e-2:
        return 1.0 / 12.0 + t2 * (1.0 / 720.0 + t2 * (1.0 / 30240.0 + t2 * (1.0 / 1209600.0
                                                                          + t2 / 47900160.0)))
    h = 0.5 * math.sqrt(t2)
    return (1.0 - h / math.tan(h)) / t2


def _jl_inv_T_apply(th, f):
    """Jl^{-T}(theta) f = f + theta x f / 2 + gamma theta x (theta x f) (plain floats)."""
    g = _dexp_gamma(th[0] * th[0] + th[1] * th[1] + th[2] * th[2])
    t = (th[1] * f[2] - th[2] * f[1], th[2] * f[0] - th[0] * f[2], th[0] * f[1] - th[1] * f[0])
    tt = (th[1] * t[2] - th[2] * t[1], th[2] * t[0] - th[0] * t[2], th[0] * t[1] - th[1] * t[0])
    return [f[j] + 0.5 * t[j] + g * tt[j] for j in range(3)]


def _bushing_force_function(model, i, cache, node1=None):
    """Exudyn springForceTorqueUserFunction with the kernels' bushing law (bushing i).

    Exudyn passes, in marker 1's frame (its joint-0 frame), the relative
    displacement d [m], Tait-Bryan xyz angles of the relative rotation [rad],
    the relative velocity Rm1^T (vm2 - vm1) [m/s] and angular velocity
    [rad/s]; Exudyn applies the returned force on body 1 at marker 1 (and its
    negative on body 2 at marker 2) and the returned torque on body 1 (its
    negative on body 2), both in that frame [N, N m]. The kernels' law
    (kernels.forces.bushing_element, method.md section 1):
    ``f_e = k_scale (k e + curve_k(e)) + preload``, ``e = (d, theta) - offset``
    with theta the rotation vector, ``f_d = c_scale (c rho + curve_c(rho))``
    with rho_t = velocity - a1 x d (a1: body 1's angular velocity in marker-1
    axes, from Exudyn's node ``node1``; None = ground) and rho_r the angular
    velocity; force f_t = f_e,t + f_d,t acting at marker 2's position and
    torque Jl^-T(theta) f_e,r + f_d,r. Returned: f_t and the torque about
    marker 1, ``Jl^-T f_e,r + f_d,r + d x f_t``; body 2 then gets -f_t at
    marker 2 (as ours) but the torque -(... + d x f_t): the auxiliary
    connector of :func:`_reaction_moment_function` gives it back d x F.
    ``cache[i]`` receives (d, force) for that connector.
    """
    import exudyn as exu
    OT = exu.OutputVariableType
    k = [float(x) for x in np.asarray(model.elements["bushing"]["k"][i]) * np.asarray(model.elements["bushing"]["k_scale"][i])]
    c = [float(x) for x in np.asarray(model.elements["bushing"]["c"][i]) * np.asarray(model.elements["bushing"]["c_scale"][i])]
    ks = np.asarray(model.elements["bushing"]["k_scale"][i], float)
    cs = np.asarray(model.elements["bushing"]["c_scale"][i], float)
    pre = [float(x) for x in np.asarray(model.elements["bushing"]["preload"][i])]
    off = [float(x) for x in np.asarray(model.elements["bushing"]["offset"][i])]
    kc = {kk: np.asarray(v)[i] for kk, v in model.elements["bushing"]["kc"].items()}
    cc = {kk: np.asarray(v)[i] for kk, v in model.elements["bushing"]["cc"].items()}
    kdirs = [j for j in range(6) if np.any(kc["coef"][j] != 0)]
    cdirs = [j for j in range(6) if np.any(cc["coef"][j] != 0)]
    rot1T = np.asarray(model.elements["bushing"]["rot1"][i], float).T

    def uf(mbs, t, itemNumber, displacement, rotation, velocity, angularVelocity,
           stiffness, damping, rotJ0, rotJ1, offset):
        d = [displacement[0], displacement[1], displacement[2]]
        th = _rotation_vector_of_rxyz(rotation[0], rotation[1], rotation[2])
        e = [d[0] - off[0], d[1] - off[1], d[2] - off[2],
             th[0] - off[3], th[1] - off[4], th[2] - off[5]]
        if node1 is None:
            a = (0.0, 0.0, 0.0)
        else:
            a = rot1T @ np.asarray(mbs.GetNodeOutput(node1, OT.AngularVelocityLocal))
        rate = [velocity[0] - (a[1] * d[2] - a[2] * d[1]),
                velocity[1] - (a[2] * d[0] - a[0] * d[2]),
                velocity[2] - (a[0] * d[1] - a[1] * d[0]),
                angularVelocity[0], angularVelocity[1], angularVelocity[2]]
        fe = [k[j] * e[j] + pre[j] for j in range(6)]
        fd = [c[j] * rate[j] for j in range(6)]
        for j in kdirs:
            fe[j] += ks[j] * _curve_eval(kc, j, e[j])
        for j in cdirs:
            fd[j] += cs[j] * _curve_eval(cc, j, rate[j])
        ft = [fe[j] + fd[j] for j in range(3)]
        tr = _jl_inv_T_apply(th, fe[3:])
        f = ft + [tr[0] + fd[3] + d[1] * ft[2] - d[2] * ft[1],
                  tr[1] + fd[4] + d[2] * ft[0] - d[0] * ft[2],
                  tr[2] + fd[5] + d[0] * ft[1] - d[1] * ft[0]]
        cache[i] = (displacement, f)
        return f
    return uf


def _reaction_moment_function(i, cache, node1, rot1):
    """User function of the auxiliary connector ground -> body 2 of matched bushing i.

    Returns the torque (joint-0 = vehicle frame) whose reaction on body 2 is
    d x F [N m]: d = pm2 - pm1 and F = the main bushing's force on body 1.
    Both come from ``cache[i]``, written by the main connector's user function
    in the same residual evaluation (Exudyn evaluates the connectors in the
    order they were added; the main bushings come first). Exudyn's numerical
    Jacobian of this connector misses the dependence on the main bushing's
    coordinates (used only for Newton iteration matrices, not for results).
    """
    import exudyn as exu
    OT = exu.OutputVariableType

    def uf(mbs, t, itemNumber, displacement, rotation, velocity, angularVelocity,
           stiffness, damping, rotJ0, rotJ1, offset):
        d, F = cache[i]
        Rm = rot1 if node1 is None else (
            np.asarray(mbs.GetNodeOutput(node1, OT.RotationMatrix)).reshape(3, 3) @ rot1)
        return [0.0, 0.0, 0.0] + (-(Rm @ np.cross(d, F[:3]))).tolist()
    return uf

def _np_tree(d):
    return {k: np.asarray(v) for k, v in d.items()}


# --------------------------------------------------------------------------- the axle


@dataclasses.dataclass
class ExudynAxle:
    """An Exudyn system built from a :class:`kernels.model.Model`."""
    SC: Any
    mbs: Any
    model: Model
    bodies: list            # ObjectIndex per body slot
    nodes: list             # NodeIndex per body slot
    bushings: list          # ObjectIndex per bushing
    bushing_rot1: np.ndarray  # (nb, 3, 3) marker-1 frame in body-1 frame
    bushing_slot1: np.ndarray  # (nb,) body slot of marker 1 (n_bodies = ground)
    p2p: list
    loads: dict             # per side: (force LoadIndex, torque LoadIndex)
    load_time: dict         # {"static": t or None}: time at which u is frozen in a static solve
    formulation: str = "matched"
    exc: Any = None
    sensors: dict = dataclasses.field(default_factory=dict)
    newton_iterations: int = 0
    sensors: dict = dataclasses.field(default_factory=dict)


def _p2p_force_function(prm):
    """Exudyn spring-force user function for one P2P element with the kernels' law.

    Exudyn passes deltaL = L - L_ref [m] and deltaL_t = dL/dt [m/s] and wants
    the tension T [N] (> 0 pulls the markers together), the sign convention
    of :func:`kernels.forces.p2p_tension`.
    """
    from kernels.forces import DAMPER_BLEND
    kc, cc = prm["kc"], prm["cc"]

    def elastic(s):
        return prm["preload"] + prm["k"] * s + _curve_eval(kc, 0, s)

    push0 = elastic(0.0)
    cs0, cs1 = prm["c_scale"]

    def uf(mbs, t, itemNumber, deltaL, deltaL_t, stiffness, damping, force):
        s = -deltaL
        push = push0 + prm["k_scale"] * (elastic(s) - push0)
        damp = prm["c"] * deltaL_t + _curve_eval(cc, 0, deltaL_t)
        w = 0.5 * (1.0 + np.tanh(deltaL_t / DAMPER_BLEND))
        return float(damp * (cs0 + (cs1 - cs0) * w) - push)
    return uf


def _bushing_linear(model, i):
    """Per-direction linear stiffness, damping and offset of bushing i (6,) each.

    Linear coefficients times their scale factors; a tabulated direction is
    linearised at zero deflection (slope -> stiffness, value -> preload);
    the preload is expressed as an Exudyn offset ``f = k (x - offset)``.
    """
    k = np.asarray(model.elements["bushing"]["k"][i]) * np.asarray(model.elements["bushing"]["k_scale"][i])
    c = np.asarray(model.elements["bushing"]["c"][i]) * np.asarray(model.elements["bushing"]["c_scale"][i])
    pre = np.asarray(model.elements["bushing"]["preload"][i]).copy()
    off = np.asarray(model.elements["bushing"]["offset"][i]).copy()
    kc = {kk: np.asarray(v)[i] for kk, v in model.elements["bushing"]["kc"].items()}
    cc = {kk: np.asarray(v)[i] for kk, v in model.elements["bushing"]["cc"].items()}
    for j in range(6):
        if np.any(kc["coef"][j] != 0):
            s = np.asarray(model.elements["bushing"]["k_scale"][i])[j]
            pre[j] += s * (_curve_eval(kc, j, 0.0) - _curve_slope(kc, j, 0.0) * 0.0)
            k[j] += s * _curve_slope(kc, j, 0.0)
        if np.any(cc["coef"][j] != 0):
            s = np.asarray(model.elements["bushing"]["c_scale"][i])[j]
            pre[j] += s * _curve_eval(cc, j, 0.0)
            c[j] += s * _curve_slope(cc, j, 0.0)
    # force on body 1 = k (x - off) + pre  ==  k (x - (off - pre / k))
    for j in range(6):
        if pre[j] != 0.0:
            if k[j] == 0.0:
                raise NotImplementedError(f"bushing {model.topology.bushing_names[i]}: "
                                          f"preload without stiffness in direction {DIRECTIONS[j]}")
            off[j] -= pre[j] / k[j]
    return k, c, off


def build_exudyn(model: Model, exc=None, t_static=0.0, formulation="matched") -> ExudynAxle:
    """Generate the Exudyn system of ``model`` (and the loads of ``exc``).

    Args:
      model: the kernels' Model (one variant; no leading batch axis).
      exc: a :class:`kernels.loads.Excitation`; u(t) [N, N m] at the wheel
        centres, vehicle frame. None: no wheel loads.
      t_static: time [s] at which u is frozen while a static solve runs.
      formulation: bushing law. ``"native"``: Exudyn's own
        RigidBodySpringDamper (diagonal stiffness/damping; Tait-Bryan xyz
        angles as rotation measure; reaction on body 2 at marker 2).
        ``"matched"``: the same connector with a Python
        ``springForceTorqueUserFunction`` that evaluates the kernels' law
        (rotation vector as rotation measure, torque Jl^-T(theta) f_r,
        rates of d, tabulated curves exactly; torque returned about marker 1),
        plus an auxiliary moment d x F on body 2, so that both bodies get
        the loads of :func:`kernels.forces.bushing_element` (force at marker
        2's position). Everything else (rigid
        bodies, marker kinematics, assembly, solvers) is Exudyn's.
    """
    import exudyn as exu
    import exudyn.itemInterface as ei
    from exudyn.rigidBodyUtilities import RigidBodyInertia

    topo = model.topology
    m = topo.n_bodies
    SC = exu.SystemContainer()
    mbs = SC.AddSystem()
    g = np.asarray(model.gravity, float)
    r0 = np.asarray(model.r_design, float)
    mass = np.asarray(model.mass, float)
    inertia = np.asarray(model.inertia, float)

    ground = mbs.AddObject(ei.ObjectGround(referencePosition=[0.0, 0.0, 0.0]))
    bodies, nodes = [], []
    for b in range(m):
        R = euler_zyx_to_matrix(r0[b, 3:])
        obj = mbs.CreateRigidBody(
            name=topo.body_names[b], referencePosition=r0[b, :3].tolist(),
            referenceRotationMatrix=R,
            inertia=RigidBodyInertia(mass[b], inertia[b], [0.0, 0.0, 0.0], inertiaTensorAtCOM=True),
            gravity=g.tolist(), nodeType=exu.NodeType.RotationRxyz, show=False)
        bodies.append(obj)
        nodes.append(mbs.GetObject(obj)["nodeNumber"])
    body_of = bodies + [ground]

    def marker(slot, pos):
        return mbs.AddMarker(ei.MarkerBodyRigid(bodyNumber=body_of[slot],
                                                localPosition=np.asarray(pos, float).tolist()))

    bu = []
    nb = len(topo.bushing_names)
    markers_bu = []
    cache = [None] * nb
    for i in range(nb):
        s1, s2 = (int(x) for x in topo.bushing_bodies[i])
        mk0 = marker(s1, model.elements["bushing"]["pos1"][i])
        mk1 = marker(s2, model.elements["bushing"]["pos2"][i])
        markers_bu.append((mk0, mk1))
        common = dict(name=topo.bushing_names[i], markerNumbers=[mk0, mk1],
                      rotationMarker0=np.asarray(model.elements["bushing"]["rot1"][i], float),
                      rotationMarker1=np.asarray(model.elements["bushing"]["rot2"][i], float))
        if formulation == "native":
            k, c, off = _bushing_linear(model, i)
            bu.append(mbs.AddObject(ei.ObjectConnectorRigidBodySpringDamper(
                stiffness=np.diag(k), damping=np.diag(c), offset=off.tolist(), **common)))
        elif formulation == "matched":
            bu.append(mbs.AddObject(ei.ObjectConnectorRigidBodySpringDamper(
                springForceTorqueUserFunction=_bushing_force_function(
                    model, i, cache, None if s1 == m else nodes[s1]), **common)))
        else:
            raise ValueError(f"formulation = {formulation!r} is not 'native' or 'matched'")
    if formulation == "matched":
        # the main connector returns the torque about marker 1 (body 1's force
        # acts at pm2 in the kernels' law) and Exudyn applies its negative to
        # body 2, whose force -F acts at pm2 already: body 2 needs d x F back,
        # d = pm2 - pm1, F = force on body 1 (vehicle frame); an auxiliary
        # connector to the ground carries it (its reaction on the fixed ground
        # is irrelevant)
        for i in range(nb):
            s1, s2 = (int(x) for x in topo.bushing_bodies[i])
            if s2 == m:
                continue
            g0 = marker(m, [0.0, 0.0, 0.0])
            b2 = marker(s2, [0.0, 0.0, 0.0])
            mbs.AddObject(ei.ObjectConnectorRigidBodySpringDamper(
                name=topo.bushing_names[i] + "/moment", markerNumbers=[g0, b2],
                springForceTorqueUserFunction=_reaction_moment_function(
                    i, cache, None if s1 == m else nodes[s1], np.asarray(model.elements["bushing"]["rot1"][i], float))))

    pp = []
    npp = len(topo.p2p_names)
    kc_all, cc_all = _np_tree(model.elements["p2p"]["kc"]), _np_tree(model.elements["p2p"]["cc"])
    for i in range(npp):
        s1, s2 = (int(x) for x in topo.p2p_bodies[i])
        prm = {"preload": float(model.elements["p2p"]["preload"][i]), "k": float(model.elements["p2p"]["k"][i]),
               "c": float(model.elements["p2p"]["c"][i]), "k_scale": float(model.elements["p2p"]["k_scale"][i]),
               "c_scale": np.asarray(model.elements["p2p"]["c_scale"][i], float),
               "kc": {kk: v[i:i + 1] for kk, v in kc_all.items()},
               "cc": {kk: v[i:i + 1] for kk, v in cc_all.items()}}
        mk0 = mbs.AddMarker(ei.MarkerBodyPosition(bodyNumber=body_of[s1],
                                                  localPosition=np.asarray(model.elements["p2p"]["pos1"][i], float).tolist()))
        mk1 = mbs.AddMarker(ei.MarkerBodyPosition(bodyNumber=body_of[s2],
                                                  localPosition=np.asarray(model.elements["p2p"]["pos2"][i], float).tolist()))
        pp.append(mbs.AddObject(ei.ObjectConnectorSpringDamper(
            name=topo.p2p_names[i], markerNumbers=[mk0, mk1],
            referenceLength=float(model.elements["p2p"]["length"][i]),
            springForceUserFunction=_p2p_force_function(prm))))

    load_time = {"static": float(t_static)}
    loads_idx = {}
    if exc is not None:
        base = np.asarray(exc.base, float)
        times = np.asarray(exc.times, float)
        durs = np.asarray(exc.durations, float)
        amps = np.asarray(exc.amplitudes, float)
        from kernels.loads import STEP_TOL

        def u_np(t):
            """u(t) (2, 6), the same ramps and inclusive steps as kernels.loads.u_at."""
            u = base.copy()
            for tj, dj, aj in zip(times, durs, amps):
                w = (float(np.clip((t - tj) / dj, 0, 1)) if dj > 0
                     else float(t >= tj - STEP_TOL))
                u = u + w * aj
            return u

        for si, side in enumerate(("left", "right")):
            slot = int(topo.wheel_slots[si])
            mkw = mbs.AddMarker(ei.MarkerBodyRigid(bodyNumber=bodies[slot], localPosition=[0.0, 0.0, 0.0]))

            def uf_force(mbs_, t, lv, si=si):
                ts = load_time["static"]
                return u_np(t if ts is None else ts)[si, :3].tolist()

            def uf_torque(mbs_, t, lv, si=si):
                ts = load_time["static"]
                return u_np(t if ts is None else ts)[si, 3:].tolist()
            lf = mbs.AddLoad(ei.LoadForceVector(markerNumber=mkw, loadVector=[0.0, 0.0, 0.0],
                                                bodyFixed=False, loadVectorUserFunction=uf_force))
            lt = mbs.AddLoad(ei.LoadTorqueVector(markerNumber=mkw, loadVector=[0.0, 0.0, 0.0],
                                                 bodyFixed=False, loadVectorUserFunction=uf_torque))
            loads_idx[side] = (lf, lt)

    # sensors for time integration: wheel poses and the body-1 frames of the
    # reference bushings (the bushing force is rotated to the vehicle frame)
    import exudyn as exu_
    OT = exu_.OutputVariableType
    sensors = {}
    for si, side in enumerate(("left", "right")):
        n = nodes[int(topo.wheel_slots[si])]
        sensors[("wheel_position", side)] = mbs.AddSensor(ei.SensorNode(
            nodeNumber=n, outputVariableType=OT.Position, storeInternal=True, writeToFile=False))
        sensors[("wheel_rotation", side)] = mbs.AddSensor(ei.SensorNode(
            nodeNumber=n, outputVariableType=OT.RotationMatrix, storeInternal=True, writeToFile=False))
    for side, name in (topo.tables.get("reference_bushings") or {}).items():
        i = topo.bushing_names.index(name)
        s1 = int(topo.bushing_bodies[i, 0])
        sensors[("bushing_force", side)] = mbs.AddSensor(ei.SensorObject(
            objectNumber=bu[i], outputVariableType=OT.ForceLocal, storeInternal=True,
            writeToFile=False))
        if s1 < m:
            sensors[("bushing_body_rotation", side)] = mbs.AddSensor(ei.SensorNode(
                nodeNumber=nodes[s1], outputVariableType=OT.RotationMatrix, storeInternal=True,
                writeToFile=False))

    mbs.Assemble()
    return ExudynAxle(SC, mbs, model, bodies, nodes, bu,
                      np.asarray(model.elements["bushing"]["rot1"], float), np.asarray(topo.bushing_bodies[:, 0]),
                      pp, loads_idx, load_time, formulation, exc, sensors)


# --------------------------------------------------------------------------- state access


def body_poses(axle: ExudynAxle, configuration=None):
    """Positions (m, 3) [m] and rotation matrices (m, 3, 3) of all bodies."""
    import exudyn as exu
    cfg = exu.ConfigurationType.Current if configuration is None else configuration
    P = np.array([axle.mbs.GetNodeOutput(n, exu.OutputVariableType.Position, configuration=cfg)
                  for n in axle.nodes])
    R = np.array([np.asarray(axle.mbs.GetNodeOutput(n, exu.OutputVariableType.RotationMatrix,
                                                     configuration=cfg)).reshape(3, 3)
                  for n in axle.nodes])
    return P, R


def state_as_r(axle: ExudynAxle, configuration=None):
    """Current Exudyn configuration in our coordinates r (m, 6): position, z-y'-x'' angles."""
    P, R = body_poses(axle, configuration)
    return np.hstack([P, np.array([matrix_to_euler_zyx(Ri) for Ri in R])])


def set_state_from_r(axle: ExudynAxle, r, configuration=None):
    """Set Exudyn's ODE2 coordinates (zero velocities) to the pose of our r (m, 6)."""
    import exudyn as exu
    from exudyn.rigidBodyUtilities import RotationMatrix2RotXYZ
    cfg = exu.ConfigurationType.Current if configuration is None else configuration
    mbs = axle.mbs
    q = np.array(mbs.systemData.GetODE2Coordinates(configuration=cfg))
    for b, n in enumerate(axle.nodes):
        ref = np.asarray(mbs.GetNodeParameter(n, "referenceCoordinates"), float)
        new = np.concatenate([r[b, :3], RotationMatrix2RotXYZ(euler_zyx_to_matrix(r[b, 3:]))])
        lti = mbs.GetNodeODE2Index(n)
        q[lti:lti + 6] = new - ref
    mbs.systemData.SetODE2Coordinates(q.tolist(), configuration=cfg)
    mbs.systemData.SetODE2Coordinates_t(np.zeros_like(q).tolist(), configuration=cfg)


def bushing_forces(axle: ExudynAxle, configuration=None):
    """Force and torque (nb, 6) [N, N m] each bushing exerts on its first body, vehicle frame.

    From Exudyn's connector outputs ForceLocal / TorqueLocal (joint-0 frame)
    rotated by the current frame of marker 1 (Exudyn's marker 0).
    """
    import exudyn as exu
    cfg = exu.ConfigurationType.Current if configuration is None else configuration
    mbs = axle.mbs
    _, R = body_poses(axle, cfg)
    m = len(axle.nodes)
    out = np.zeros((len(axle.bushings), 6))
    for i, obj in enumerate(axle.bushings):
        s = axle.bushing_slot1[i]
        Rb = np.eye(3) if s == m else R[s]
        Rm = Rb @ axle.bushing_rot1[i]
        f = np.asarray(mbs.GetObjectOutput(obj, exu.OutputVariableType.ForceLocal, configuration=cfg))
        t = np.asarray(mbs.GetObjectOutput(obj, exu.OutputVariableType.TorqueLocal, configuration=cfg))
        out[i] = np.concatenate([Rm @ f, Rm @ t])
    return out


# --------------------------------------------------------------------------- static equilibrium


class _Residual:
    """Exudyn's ODE2 right-hand side (generalised forces [N, N m] conjugate to its
    coordinates: positions and Rxyz angles) as a function of the coordinates q
    and their rates, evaluated by Exudyn at a state that we set."""

    def __init__(self, axle: ExudynAxle):
        import exudyn as exu
        self.exu = exu
        self.mbs = axle.mbs
        self.solver = exu.MainSolverStatic()
        s = exu.SimulationSettings()
        s.solutionSettings.writeSolutionToFile = False
        s.staticSolver.verboseMode = 0
        s.linearSolverType = exu.LinearSolverType.EXUdense
        self.solver.InitializeSolver(self.mbs, s)

    def __call__(self, q, q_t=None):
        cur = self.exu.ConfigurationType.Current
        self.mbs.systemData.SetODE2Coordinates(np.asarray(q, float).tolist(), configuration=cur)
        qt = np.zeros(len(q)) if q_t is None else np.asarray(q_t, float)
        self.mbs.systemData.SetODE2Coordinates_t(qt.tolist(), configuration=cur)
        self.solver.ComputeODE2RHS(self.mbs)
        return np.array(self.solver.GetSystemResidual())[:len(q)]

    def mass_matrix(self):
        self.solver.ComputeMassMatrix(self.mbs)
        return np.array(self.solver.GetSystemMassMatrix())

    def jacobian(self, q, q_t=None, wrt="q", eps=None):
        """Central-difference Jacobian of the residual w.r.t. q or q_t."""
        q = np.asarray(q, float)
        qt = np.zeros_like(q) if q_t is None else np.asarray(q_t, float)
        n = len(q)
        J = np.zeros((n, n))
        for j in range(n):
            h = (1e-7 if wrt == "q" else 1e-6) if eps is None else eps
            dq = np.zeros(n)
            dq[j] = h
            if wrt == "q":
                J[:, j] = (self(q + dq, qt) - self(q - dq, qt)) / (2 * h)
            else:
                J[:, j] = (self(q, qt + dq) - self(q, qt - dq)) / (2 * h)
        return J


def solve_static(axle: ExudynAxle, t_static=None, r_start=None, tol=1e-7, max_iter=30):
    """Static equilibrium of the Exudyn model under gravity and u(t_static); returns r (m, 6).

    Exudyn's own SolveStatic (Newton with Exudyn's Jacobian) from the design
    position (or ``r_start``). The Jacobian Exudyn assembles for the
    auxiliary reaction-moment connectors of the ``matched`` formulation
    misses their dependence on the main bushing (Exudyn differentiates a
    connector w.r.t. its own markers only) and its Newton then stalls; for
    that case the Newton iteration is ours, on Exudyn's residual with a
    central-difference Jacobian, started from the solution of the
    ``native`` model. ``tol``: largest residual [N, N m] at convergence.
    The converged state is copied to Exudyn's initial state, so that a
    later time integration or linearisation starts from it.
    """
    import exudyn as exu
    mbs = axle.mbs
    if t_static is not None:
        axle.load_time["static"] = float(t_static)
    Init, Cur = exu.ConfigurationType.Initial, exu.ConfigurationType.Current
    if axle.formulation == "native" and r_start is None:
        s = exu.SimulationSettings()
        s.solutionSettings.writeSolutionToFile = False
        s.solutionSettings.sensorsWritePeriod = 1e9
        s.staticSolver.newton.absoluteTolerance = 1e-10
        # 1e-12: the relative error stagnates at round-off (~1e-13 on the
        # 2026-11-24 double wishbone), which 1e-14 never reached
        s.staticSolver.newton.relativeTolerance = 1e-12
        s.staticSolver.newton.maxIterations = 50
        s.staticSolver.numberOfLoadSteps = 1
        s.staticSolver.useLoadFactor = False
        s.staticSolver.verboseMode = 0
        s.linearSolverType = exu.LinearSolverType.EXUdense
        if not mbs.SolveStatic(s):
            raise RuntimeError("Exudyn static solver did not converge")
        q = np.array(mbs.systemData.GetODE2Coordinates(configuration=Cur))
    else:
        if r_start is None:
            native = build_exudyn(axle.model, axle.exc, axle.load_time["static"], "native")
            r_start = solve_static(native)
        set_state_from_r(axle, np.asarray(r_start), Init)
        q = np.array(mbs.systemData.GetODE2Coordinates(configuration=Init))
        res = _Residual(axle)
        for it in range(max_iter):
            f = res(q)
            if np.max(np.abs(f)) <= tol:
                break
            q = q - np.linalg.solve(res.jacobian(q), f)
        else:
            raise RuntimeError(f"Newton on Exudyn's residual did not converge "
                               f"(residual {np.max(np.abs(f)):.3g})")
        axle.newton_iterations = it
        mbs.systemData.SetODE2Coordinates(q.tolist(), configuration=Cur)
    mbs.systemData.SetODE2Coordinates(q.tolist(), configuration=Init)
    mbs.systemData.SetODE2Coordinates_t([0.0] * len(q), configuration=Init)
    mbs.systemData.SetODE2Coordinates_t([0.0] * len(q), configuration=Cur)
    return state_as_r(axle)


# --------------------------------------------------------------------------- time integration


def simulate(axle: ExudynAxle, t0, t1, h, spectral_radius=0.9, sample=1e-3):
    """Integrate from rest at Exudyn's initial state (the static equilibrium of
    :func:`solve_static`) with Exudyn's generalized-alpha integrator, fixed step h [s].

    Returns a dict of samples on ``t = t0 + k * sample`` [s]:
    ``wheel_centre`` (nt, 2, 3) [m], ``toe``, ``camber`` (nt, 2) [rad] and,
    if the model names reference bushings, ``bushing_force`` (nt, 2, 3) [N]
    (force on the bushing's first body, vehicle frame).
    """
    import exudyn as exu
    mbs = axle.mbs
    axle.load_time["static"] = None
    n_steps = int(round((t1 - t0) / h))
    s = exu.SimulationSettings()
    s.solutionSettings.writeSolutionToFile = False
    s.solutionSettings.sensorsWritePeriod = h
    s.timeIntegration.startTime = t0
    s.timeIntegration.endTime = t1
    s.timeIntegration.numberOfSteps = n_steps
    s.timeIntegration.verboseMode = VERBOSE
    s.timeIntegration.generalizedAlpha.spectralRadius = spectral_radius
    s.timeIntegration.generalizedAlpha.computeInitialAccelerations = True
    s.timeIntegration.newton.useModifiedNewton = True
    s.timeIntegration.newton.relativeTolerance = NEWTON_RTOL
    s.timeIntegration.newton.absoluteTolerance = NEWTON_ATOL
    s.timeIntegration.newton.maxIterations = 30
    s.timeIntegration.adaptiveStep = False
    if axle.formulation == "matched":
        # the auxiliary reaction-moment connectors depend on the main bushings'
        # coordinates: only a system-wide difference Jacobian sees that
        s.timeIntegration.newton.numericalDifferentiation.doSystemWideDifferentiation = SYSTEM_WIDE
    s.linearSolverType = exu.LinearSolverType.EXUdense
    s.displayStatistics = False
    mbs.SolveDynamic(s, storeSolver=True)

    t_out = t0 + sample * np.arange(int(round((t1 - t0) / sample)) + 1)

    def series(key):
        data = np.asarray(mbs.GetSensorStoredData(axle.sensors[key]))
        # one row per step (plus the initial state); exact times t0 + k h
        k = np.round((data[:, 0] - t0) / h).astype(int)
        idx = np.searchsorted(k, np.round((t_out - t0) / h).astype(int))
        return data[np.minimum(idx, len(k) - 1), 1:]

    out = {"time": t_out}
    sides = ("left", "right")
    out["wheel_centre"] = np.stack([series(("wheel_position", sd)) for sd in sides], 1)
    Rw = np.stack([series(("wheel_rotation", sd)).reshape(-1, 3, 3) for sd in sides], 1)
    tc = np.array([[toe_camber_from_matrix(Rw[i, j], sd) for j, sd in enumerate(sides)]
                   for i in range(len(t_out))])
    out["toe"], out["camber"] = tc[..., 0], tc[..., 1]
    names = axle.model.topology.bushing_names
    ref = axle.model.topology.tables.get("reference_bushings") or {}
    if ref:
        forces = []
        for sd in sides:
            i = names.index(ref[sd])
            f = series(("bushing_force", sd))
            rot1 = axle.bushing_rot1[i]
            if ("bushing_body_rotation", sd) in axle.sensors:
                R = series(("bushing_body_rotation", sd)).reshape(-1, 3, 3)
                forces.append(np.einsum("nij,jk,nk->ni", R, rot1, f))
            else:
                forces.append(f @ rot1.T)
        out["bushing_force"] = np.stack(forces, 1)
    return out


# --------------------------------------------------------------------------- linearisation


def exudyn_state_matrix(axle: ExudynAxle, own_jacobian=None):
    """State matrix (2n, 2n) of Exudyn's linearisation at its initial state (the
    static equilibrium after :func:`solve_static`), in Exudyn's coordinates.

    ``own_jacobian``: True -> Exudyn's own ``ComputeLinearizedSystem`` (M, K, D
    from Exudyn's Jacobian); False -> Exudyn's mass matrix and central
    differences of Exudyn's residual w.r.t. coordinates and rates. Default:
    own for ``native``; differences for ``matched`` (Exudyn's connector-wise
    Jacobian misses the auxiliary moments' cross terms). Units 1/s.
    """
    import exudyn as exu
    mbs = axle.mbs
    if own_jacobian is None:
        own_jacobian = axle.formulation == "native"
    Init, Cur = exu.ConfigurationType.Initial, exu.ConfigurationType.Current
    q0 = np.array(mbs.systemData.GetODE2Coordinates(configuration=Init))
    n = len(q0)
    if own_jacobian:
        axle.load_time["static"] = axle.load_time["static"] if axle.load_time["static"] is not None else 0.0
        M, K, D = mbs.ComputeLinearizedSystem()
        M, K, D = (np.asarray(x) for x in (M, K, D))
        Minv = np.linalg.inv(M)
        return np.block([[np.zeros((n, n)), np.eye(n)], [-Minv @ K, -Minv @ D]])
    res = _Residual(axle)
    Kq = res.jacobian(q0)
    Dq = res.jacobian(q0, wrt="q_t")
    mbs.systemData.SetODE2Coordinates(q0.tolist(), configuration=Cur)
    M = res.mass_matrix()
    Minv = np.linalg.inv(M)
    return np.block([[np.zeros((n, n)), np.eye(n)], [Minv @ Kq, Minv @ Dq]])


def _jit_linearise():
    import jax
    from kernels.dynamics import linearise
    global _LINEARISE
    if _LINEARISE is None:
        _LINEARISE = jax.jit(linearise)
    return _LINEARISE


_LINEARISE = None


def our_state_matrix(model, r_eq, u):
    """State matrix (12 m, 12 m) of the kernels' linearisation at rest at r_eq:
    [[0, K], [J_r, J_v]] (d(K v)/dr = 0 at v = 0), units 1/s."""
    import jax.numpy as jnp
    import scipy.linalg
    m = model.topology.n_bodies
    r = jnp.asarray(r_eq)
    lin = _jit_linearise()(model, r, jnp.zeros_like(r), jnp.asarray(u))
    K = scipy.linalg.block_diag(*np.asarray(lin.K))
    n = 6 * m
    return np.block([[np.zeros((n, n)), K], [np.asarray(lin.J_r), np.asarray(lin.J_v)]])


def oscillatory_eigenvalues(A, f_max=100.0):
    """Eigenvalues with Im > 0 and |lambda| < 2 pi f_max, sorted by |lambda| [1/s]."""
    lam = np.linalg.eigvals(A)
    sel = (lam.imag > 1e-9 * np.abs(lam)) & (np.abs(lam) < 2 * np.pi * f_max)
    lam = lam[sel]
    return lam[np.argsort(np.abs(lam))]


def match_eigenvalues(ours, theirs):
    """For each of our eigenvalues the nearest of theirs: (theirs_matched, rel. distance)."""
    theirs = np.asarray(theirs)
    idx = [int(np.argmin(np.abs(theirs - lam))) for lam in ours]
    matched = theirs[idx]
    return matched, np.abs(matched - ours) / np.abs(ours)


def assign_eigenvalues(ours, theirs):
    """One-to-one assignment of eigenvalues (scipy.optimize.linear_sum_assignment
    on the relative distances |lambda_o - lambda_t| / |lambda_o|): no eigenvalue
    of theirs serves two of ours. Needs len(theirs) >= len(ours).

    Returns (theirs_assigned in the order of ours, relative distance,
    damping-ratio difference zeta_t - zeta_o); zeta = -Re(lambda) / |lambda|."""
    from scipy.optimize import linear_sum_assignment
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    if len(theirs) < len(ours):
        raise ValueError(f"{len(theirs)} eigenvalues to assign to {len(ours)}")
    cost = np.abs(ours[:, None] - theirs[None, :]) / np.abs(ours)[:, None]
    row, col = linear_sum_assignment(cost)
    assigned = theirs[col[np.argsort(row)]]
    rel = np.abs(assigned - ours) / np.abs(ours)
    return assigned, rel, damping_ratio(assigned) - damping_ratio(ours)


def damping_ratio(lam):
    """Modal damping ratio zeta = -Re(lambda) / |lambda| (dimensionless)."""
    lam = np.asarray(lam)
    return -lam.real / np.abs(lam)
