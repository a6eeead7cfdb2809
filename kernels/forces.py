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
    return damp - push, L, Ldot, (pm1, pm2, e, p1, R1, p2, R2)


def p2p_element(prm, x1, x2):
    """Generalised forces (g1, g2) of one point-to-point element."""
    T, _, _, (pm1, pm2, e, p1, R1, p2, R2) = p2p_tension(prm, x1, x2)
    zero = jnp.zeros(3)
    return _apply(T * e, zero, pm1, p1, R1, p2, R2, at2=pm2)


def p2p_params(model):
    return {"pos1": model.pp_pos1, "pos2": model.pp_pos2, "length": model.pp_length,
            "k": model.pp_k, "preload": model.pp_preload, "c": model.pp_c,
            "kc": model.pp_k_curve, "cc": model.pp_c_curve,
            "k_scale": model.pp_k_scale, "c_scale": model.pp_c_scale}


GROUPS = (
    # (name, element function, parameter getter, topology attribute with body slots)
    ("bushing", bushing_element, bushing_params, "bushing_bodies"),
    ("p2p", p2p_element, p2p_params, "p2p_bodies"),
)
