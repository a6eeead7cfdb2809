"""Force elements, grouped by type and vectorised per group (method.md section 1).

Each element function maps the states of its own two bodies,
``x = (r(6), v(6))`` (ground: zeros), to the generalised forces on them:
``g = (F (3) in the vehicle frame [N], M (3) in the body frame [N m])``.
The same functions are differentiated element-locally (``jacfwd`` w.r.t.
the 24 states of the two bodies) to assemble J_r and J_v (eq. 5).
"""
import jax
import jax.numpy as jnp

from kernels import curves
from kernels.rotations import euler_to_matrix, mm, mtm, mtv, mv, rotation_vector


def _pose(x):
    r, v = x[:6], x[6:]
    return r[:3], euler_to_matrix(r[3:]), v[:3], v[3:]


def marker_kinematics(x, pos_local):
    """Marker position [m] and velocity [m/s] in the vehicle frame, and body R, omega."""
    p, R, vel, w = _pose(x)
    return p + mv(R, pos_local), vel + mv(R, jnp.cross(w, pos_local)), p, R, w


def _apply(F, M, at, p1, R1, p2, R2, at2=None):
    """Generalised forces of a force F / torque M (vehicle frame) on body 1 at
    point ``at`` and of the reaction (-F, -M) on body 2 at ``at2`` (default
    ``at``, so that the pair has no net moment)."""
    at2 = at if at2 is None else at2
    M1 = M + jnp.cross(at - p1, F)
    M2 = -M + jnp.cross(at2 - p2, -F)
    return (jnp.concatenate([F, mtv(R1, M1)]), jnp.concatenate([-F, mtv(R2, M2)]))


# ----------------------------------------------------------------------------- bushings

def bushing_deflection(prm, x1, x2):
    """Deflection (d, theta) and its rate of a bushing, in marker_1's frame.

    d: position of marker 2 relative to marker 1 [m]; theta: rotation vector of
    marker 2's frame relative to marker 1's [rad]; rates from the relative
    velocity and angular velocity [m/s, rad/s].
    """
    pm1, vm1, p1, R1, w1 = marker_kinematics(x1, prm["pos1"])
    pm2, vm2, p2, R2, w2 = marker_kinematics(x2, prm["pos2"])
    Rm1 = mm(R1, prm["rot1"])
    Rm2 = mm(R2, prm["rot2"])
    d = mtv(Rm1, pm2 - pm1)
    theta = rotation_vector(mtm(Rm1, Rm2))
    ddot = mtv(Rm1, vm2 - vm1)
    wrel = mtv(Rm1, mv(R2, w2) - mv(R1, w1))
    return (jnp.concatenate([d, theta]), jnp.concatenate([ddot, wrel]),
            (pm1, Rm1, p1, R1, p2, R2))


def bushing_local_force(prm, defl, rate):
    """Force/torque on body 1 in marker_1's frame [N, N m] from the characteristics."""
    e = defl - prm["offset"]
    elastic = prm["k"] * e + jax.vmap(curves.evaluate)(
        prm["kc"]["breaks"], prm["kc"]["origin"], prm["kc"]["coef"], e)
    damping = prm["c"] * rate + jax.vmap(curves.evaluate)(
        prm["cc"]["breaks"], prm["cc"]["origin"], prm["cc"]["coef"], rate)
    return prm["k_scale"] * elastic + prm["c_scale"] * damping + prm["preload"]


def bushing_element(prm, x1, x2):
    """Generalised forces (g1, g2) of one bushing on its two bodies."""
    defl, rate, (pm1, Rm1, p1, R1, p2, R2) = bushing_deflection(prm, x1, x2)
    f = bushing_local_force(prm, defl, rate)
    return _apply(mv(Rm1, f[:3]), mv(Rm1, f[3:]), pm1, p1, R1, p2, R2)


def bushing_output(prm, x1, x2):
    """Force and torque the bushing exerts on its first body, vehicle frame (6,)."""
    defl, rate, (pm1, Rm1, *_rest) = bushing_deflection(prm, x1, x2)
    f = bushing_local_force(prm, defl, rate)
    return jnp.concatenate([mv(Rm1, f[:3]), mv(Rm1, f[3:])])


def bushing_params(model):
    """Per-element parameter pytree of the bushing group (leading axis nb)."""
    return {"pos1": model.bu_pos1, "rot1": model.bu_rot1, "pos2": model.bu_pos2,
            "rot2": model.bu_rot2, "k": model.bu_k, "c": model.bu_c,
            "preload": model.bu_preload, "offset": model.bu_offset,
            "kc": model.bu_k_curve, "cc": model.bu_c_curve,
            "k_scale": model.bu_k_scale, "c_scale": model.bu_c_scale}


# ----------------------------------------------------------------------------- P2P

DAMPER_BLEND = 1e-3  # m/s, width of the compression/rebound factor blend

def p2p_tension(prm, x1, x2):
    """Tension T [N] (> 0 pulls the markers together), length L [m], rate dL/dt [m/s]."""
    pm1, vm1, p1, R1, _ = marker_kinematics(x1, prm["pos1"])
    pm2, vm2, p2, R2, _ = marker_kinematics(x2, prm["pos2"])
    delta = pm2 - pm1
    L = jnp.sqrt(jnp.sum(delta * delta))
    e = delta / L
    Ldot = jnp.sum(e * (vm2 - vm1))
    return p2p_law(prm, L, Ldot), L, Ldot, (pm1, pm2, e, p1, R1, p2, R2)


def p2p_law(prm, L, Ldot):
    """Tension T [N] from length L [m] and rate dL/dt [m/s] (spring, damper, stops)."""
    s = prm["length"] - L

    def elastic(s):
        return (prm["preload"] + prm["k"] * s
                + curves.evaluate(prm["kc"]["breaks"], prm["kc"]["origin"], prm["kc"]["coef"], s))
    push0 = elastic(jnp.zeros_like(s))
    push = push0 + prm["k_scale"] * (elastic(s) - push0)   # rate scaling keeps the force at s = 0
    damp = prm["c"] * Ldot + curves.evaluate(
        prm["cc"]["breaks"], prm["cc"]["origin"], prm["cc"]["coef"], Ldot)
    # compression / rebound factors, blended over |dL/dt| ~ DAMPER_BLEND so that
    # the force stays C1 at rest: a sharp switch would let round-off in the
    # sign of dL/dt ~ 1e-17 pick the Jacobian branch (measured: 1e-5 relative
    # run-to-run differences); the blend changes the force by < 0.1 % of the
    # force at 1 mm/s
    w = 0.5 * (1.0 + jnp.tanh(Ldot / DAMPER_BLEND))
    damp = damp * (prm["c_scale"][0] + (prm["c_scale"][1] - prm["c_scale"][0]) * w)
    return damp - push


def p2p_element(prm, x1, x2):
    """Generalised forces (g1, g2) of one point-to-point element."""
    T, _, _, (pm1, pm2, e, p1, R1, p2, R2) = p2p_tension(prm, x1, x2)
    zero = jnp.zeros(3, T.dtype)
    return _apply(T * e, zero, pm1, p1, R1, p2, R2, at2=pm2)


def p2p_params(model):
    return {"pos1": model.pp_pos1, "pos2": model.pp_pos2, "length": model.pp_length,
            "k": model.pp_k, "preload": model.pp_preload, "c": model.pp_c,
            "kc": model.pp_k_curve, "cc": model.pp_c_curve,
            "k_scale": model.pp_k_scale, "c_scale": model.pp_c_scale}


# ----------------------------------------------------------------------------- analytic bushing Jacobian
def _skew(w):
    z = jnp.zeros_like(w[0])
    return jnp.stack([jnp.stack([z, -w[2], w[1]]), jnp.stack([w[2], z, -w[0]]),
                      jnp.stack([-w[1], w[0], z])])


def _angle_map(angles):
    """E with (body-frame rotation increment) = E @ (increment of z-y'-x'' angles); E = H^-1 of eq. (1a)."""
    ay, ax = angles[1], angles[2]
    cy, sy, cx, sx = jnp.cos(ay), jnp.sin(ay), jnp.cos(ax), jnp.sin(ax)
    z, o = jnp.zeros_like(ay), jnp.ones_like(ay)
    return jnp.stack([jnp.stack([-sy, z, o]), jnp.stack([cy * sx, cx, z]), jnp.stack([cy * cx, -sx, z])])


def bushing_element_jacobian(prm, x1, x2):
    """Generalised forces (g1, g2) of one bushing and their derivatives in closed form.

    Returns ((g1, g2), ((dg1/dx1, dg2/dx1), (dg1/dx2, dg2/dx2))), each
    derivative (6, 12) over x = (r, v) of that body. Derivation (method.md
    eq. 5, element-local): a body's orientation is perturbed by a body-frame
    increment dphi = E(angles) d(angles); marker kinematics, the deflection
    (d, theta), its rate and the reaction map are differentiated by hand; the
    derivative of the rotation-vector map and the slopes of the (diagonal)
    characteristics come from forward-mode autodiff of their small functions.
    Equal to ``jacfwd`` of :func:`bushing_element` (tested), at a fraction of
    the cost.
    """
    p1, R1, v1, w1 = _pose(x1)
    p2, R2, v2, w2 = _pose(x2)
    A1, A2, s1, s2 = prm["rot1"], prm["rot2"], prm["pos1"], prm["pos2"]
    Rm1, Rm2 = mm(R1, A1), mm(R2, A2)
    pm1, pm2 = p1 + mv(R1, s1), p2 + mv(R2, s2)
    ws1, ws2 = jnp.cross(w1, s1), jnp.cross(w2, s2)
    vm1, vm2 = v1 + mv(R1, ws1), v2 + mv(R2, ws2)
    Delta, Dv = pm2 - pm1, vm2 - vm1
    Rrel = mtm(Rm1, Rm2)
    Q21 = mtm(R1, R2)                      # R1^T R2
    R2w2 = mv(Q21, w2)                     # omega_2 in body-1 frame
    defl = jnp.concatenate([mtv(Rm1, Delta), rotation_vector(Rrel)])
    rate = jnp.concatenate([mtv(Rm1, Dv), mtv(A1, R2w2 - w1)])
    # characteristics: value and diagonal slopes
    f, kd = jax.jvp(lambda d: bushing_local_force(prm, d, rate), (defl,), (jnp.ones_like(defl),))
    cd = jax.jvp(lambda r_: bushing_local_force(prm, defl, r_), (rate,), (jnp.ones_like(rate),))[1]
    ft, fr = f[:3], f[3:]
    # derivative of the rotation-vector map for right / left increments
    eye = jnp.eye(3, dtype=Rrel.dtype)
    Jr_inv = jax.jacfwd(lambda xi: rotation_vector(mm(Rrel, eye + _skew(xi))))(jnp.zeros(3, Rrel.dtype))
    Jl_inv = jax.jacfwd(lambda et: rotation_vector(mm(eye + _skew(et), Rrel)))(jnp.zeros(3, Rrel.dtype))
    Z = jnp.zeros((3, 3), Rrel.dtype)
    A1T, Rm1T = A1.T, Rm1.T
    Rm1TR2 = mtm(Rm1, R2)
    R1TD = mtv(R1, Delta)
    R1TDv = mtv(R1, Dv)
    # D: d(defl)/d(dp1, dphi1, dp2, dphi2) (6, 12); Dr: d(rate)/d(dp1, dphi1, v1, w1, dp2, dphi2, v2, w2)
    d_p1, d_f1 = -Rm1T, mm(A1T, _skew(R1TD + s1))
    d_p2, d_f2 = Rm1T, -mm(Rm1TR2, _skew(s2))
    t_f1 = -mm(Jl_inv, A1T)
    t_f2 = mm(Jr_inv, A2.T)
    dd_f1 = mm(A1T, _skew(R1TDv + ws1))
    dd_f2 = -mm(Rm1TR2, _skew(ws2))
    dd_v1, dd_w1 = -Rm1T, mm(A1T, _skew(s1))
    dd_v2, dd_w2 = Rm1T, -mm(Rm1TR2, _skew(s2))
    wr_f1 = mm(A1T, _skew(R2w2))
    wr_f2 = -mm(Rm1TR2, _skew(w2))
    wr_w1, wr_w2 = -A1T, Rm1TR2
    # df/d(body-1 and body-2 states), (6, 12) each, with dphi columns
    kd_, cd_ = kd[:, None], cd[:, None]
    df1 = jnp.concatenate([
        jnp.concatenate([kd_[:3] * d_p1, kd_[:3] * d_f1 + cd_[:3] * dd_f1, cd_[:3] * dd_v1, cd_[:3] * dd_w1], 1),
        jnp.concatenate([Z, kd_[3:] * t_f1 + cd_[3:] * wr_f1, Z, cd_[3:] * wr_w1], 1)])
    df2 = jnp.concatenate([
        jnp.concatenate([kd_[:3] * d_p2, kd_[:3] * d_f2 + cd_[:3] * dd_f2, cd_[:3] * dd_v2, cd_[:3] * dd_w2], 1),
        jnp.concatenate([Z, kd_[3:] * t_f2 + cd_[3:] * wr_f2, Z, cd_[3:] * wr_w2], 1)])
    # reaction map g(f, poses): g1 = (R1 u_t, u_r + s1 x u_t), u = A1 f (body-1 frame)
    u_t, u_r = mv(A1, ft), mv(A1, fr)
    F = mv(R1, u_t)
    c = mtv(R2, pm1 - p2)                  # marker 1 seen from body 2, body-2 frame
    Qut, Qur = mtv(R2, F), mv(Q21.T, u_r)  # R2^T R1 u_t, R2^T R1 u_r
    g1 = jnp.concatenate([F, u_r + jnp.cross(s1, u_t)])
    g2 = jnp.concatenate([-F, -Qur - jnp.cross(c, Qut)])
    T1 = jnp.concatenate([jnp.concatenate([Rm1, Z], 1), jnp.concatenate([mm(_skew(s1), A1), A1], 1)])
    Q12Rm = mtm(R2, Rm1)                   # R2^T Rm1
    T2 = jnp.concatenate([jnp.concatenate([-Rm1, Z], 1),
                          jnp.concatenate([-mm(_skew(c), Q12Rm), -Q12Rm], 1)])
    # pose derivatives of g at fixed f
    Q12 = Q21.T
    P1_1 = jnp.zeros((6, 12), F.dtype).at[:3, 3:6].set(-mm(R1, _skew(u_t)))          # dg1/d(body 1)
    P2_1 = jnp.zeros((6, 12), F.dtype).at[:3, 3:6].set(mm(R1, _skew(u_t)))           # dg2/d(body 1)
    P2_1 = P2_1.at[3:, :3].set(mm(_skew(Qut), R2.T))
    P2_1 = P2_1.at[3:, 3:6].set(mm(Q12, _skew(u_r)) + mm(mm(_skew(c), Q12), _skew(u_t))
                                - mm(mm(_skew(Qut), Q12), _skew(s1)))
    P2_2 = jnp.zeros((6, 12), F.dtype).at[3:, :3].set(-mm(_skew(Qut), R2.T))          # dg2/d(body 2)
    P2_2 = P2_2.at[3:, 3:6].set(-_skew(Qur) - mm(_skew(c), _skew(Qut)) + mm(_skew(Qut), _skew(c)))
    dg1_1 = mm(T1, df1) + P1_1
    dg2_1 = mm(T2, df1) + P2_1
    dg1_2 = mm(T1, df2)
    dg2_2 = mm(T2, df2) + P2_2
    # dphi -> d(angles): right-multiply the rotation columns by E
    E1, E2 = _angle_map(x1[3:6]), _angle_map(x2[3:6])

    def to_angles(J, E):
        return J.at[:, 3:6].set(mm(J[:, 3:6], E))
    return (g1, g2), ((to_angles(dg1_1, E1), to_angles(dg2_1, E1)),
                      (to_angles(dg1_2, E2), to_angles(dg2_2, E2)))


def p2p_element_jacobian(prm, x1, x2):
    """Generalised forces (g1, g2) of one P2P element and their derivatives in
    closed form, in the layout of :func:`bushing_element_jacobian`.

    F = T(L, dL/dt) e on body 1 at marker 1, -F on body 2 at marker 2, with
    e = (pm2 - pm1) / L; dT/dL and dT/d(dL/dt) by forward-mode autodiff of
    the scalar law, the kinematics by hand (body-frame rotation increments)."""
    p1, R1, v1, w1 = _pose(x1)
    p2, R2, v2, w2 = _pose(x2)
    s1, s2 = prm["pos1"], prm["pos2"]
    ws1, ws2 = jnp.cross(w1, s1), jnp.cross(w2, s2)
    pm1, pm2 = p1 + mv(R1, s1), p2 + mv(R2, s2)
    vm1, vm2 = v1 + mv(R1, ws1), v2 + mv(R2, ws2)
    Delta, Dv = pm2 - pm1, vm2 - vm1
    L = jnp.sqrt(jnp.sum(Delta * Delta))
    e = Delta / L
    Ldot = jnp.sum(e * Dv)
    T, dT_dL = jax.jvp(lambda l_: p2p_law(prm, l_, Ldot), (L,), (jnp.ones_like(L),))
    dT_dLd = jax.jvp(lambda ld: p2p_law(prm, L, ld), (Ldot,), (jnp.ones_like(Ldot),))[1]
    F = T * e
    eye = jnp.eye(3, dtype=F.dtype)
    P = (eye - e[:, None] * e[None, :]) / L          # de/dDelta
    # d(Delta)/d(dp_b, dphi_b) and d(Dv)/d(dphi_b, v_b, w_b); sign +1 for body 2, -1 for body 1
    Z = jnp.zeros((3, 3), F.dtype)

    def kin(R, s_, ws, sign):
        dD = jnp.concatenate([eye, -mm(R, _skew(s_))], 1) * sign                              # (3, 6)
        dDv = jnp.concatenate([Z, -mm(R, _skew(ws)), eye, -mm(R, _skew(s_))], 1) * sign       # (3, 12)
        return dD, dDv
    out = []
    for R, s_, ws, sign in ((R1, s1, ws1, -1.0), (R2, s2, ws2, 1.0)):
        dD, dDv = kin(R, s_, ws, sign)
        dD12 = jnp.concatenate([dD, jnp.zeros((3, 6), F.dtype)], 1)                          # over (r, v)
        de = mm(P, dD12)                                                                       # (3, 12)
        dL = mtv(dD12, e)                                                                      # e^T dDelta, (12,)
        dLd = mtv(de, Dv) + mtv(dDv, e)                                                        # (12,)
        dT = dT_dL * dL + dT_dLd * dLd
        dF = e[:, None] * dT[None, :] + T * de                                                 # (3, 12)
        out.append(dF)
    dF1, dF2 = out
    # g1 = (F, s1 x R1^T F), g2 = (-F, -s2 x R2^T F)
    R1TF, R2TF = mtv(R1, F), mtv(R2, F)

    def torque(R, s_, dF, own):
        d = mm(_skew(s_), mm(R.T, dF))
        if own:   # d(R^T F)/dphi of the body's own rotation: [R^T F]x
            d = d.at[:, 3:6].add(mm(_skew(s_), _skew(mtv(R, F))))
        return d
    g1 = jnp.concatenate([F, jnp.cross(s1, R1TF)])
    g2 = jnp.concatenate([-F, -jnp.cross(s2, R2TF)])
    E1, E2 = _angle_map(x1[3:6]), _angle_map(x2[3:6])

    def to_angles(J, E):
        return J.at[:, 3:6].set(mm(J[:, 3:6], E))
    d1 = (jnp.concatenate([dF1, torque(R1, s1, dF1, True)]), -jnp.concatenate([dF1, torque(R2, s2, dF1, False)]))
    d2 = (jnp.concatenate([dF2, torque(R1, s1, dF2, False)]), -jnp.concatenate([dF2, torque(R2, s2, dF2, True)]))
    return (g1, g2), ((to_angles(d1[0], E1), to_angles(d1[1], E1)), (to_angles(d2[0], E2), to_angles(d2[1], E2)))


GROUPS = (
    # (name, element function, parameter getter, topology attribute with body
    #  slots, closed-form element Jacobian or None for forward-mode autodiff)
    ("bushing", bushing_element, bushing_params, "bushing_bodies", bushing_element_jacobian),
    ("p2p", p2p_element, p2p_params, "p2p_bodies", p2p_element_jacobian),
)
