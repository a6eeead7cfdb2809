"""Force elements, grouped by type and vectorised per group (method.md section 1).

Each element function maps the states of its own two bodies,
``x = (r(6), v(6))`` (ground: zeros), to the generalised forces on them:
``g = (F (3) in the vehicle frame [N], M (3) in the body frame [N m])``.
The same functions are differentiated element-locally (``jacfwd`` w.r.t.
the 24 states of the two bodies) to assemble J_r and J_v (eq. 5).

Element types are :class:`ElementGroup` objects (built in: ``bushing``,
``p2p``); a new type is one group that a model names (a model file's
``elements:``, or ``tables["element_groups"]``; :class:`ElementRegistry`).
"""
import contextlib
import contextvars
import dataclasses
from typing import Any, Callable, Mapping, Optional

import jax
import jax.numpy as jnp

import numpy as np

from kernels import curves, tables
from kernels.names import DIRECTIONS
from kernels.tables import STOP_LAWS, ModelError
from kernels.rotations import (euler_to_matrix, left_jacobian_inv_T_apply, mm, mtm, mtv, mv,
                               rotation_vector)

# groups of at least this many elements are traced as a loop over the elements
# (0: never); set only while a code generator traces (:func:`element_loops`)
_ELEMENT_LOOPS = contextvars.ContextVar("element_loops", default=0)


@contextlib.contextmanager
def element_loops(min_elements=16):
    """While tracing under this context, :func:`map_elements` maps a group of at
    least ``min_elements`` elements with ``lax.map`` (a ``scan`` over the
    elements) instead of ``vmap``. The values are the same; the jaxpr keeps
    one copy of the element function in a loop instead of array operations
    over the group. For code generators that translate a per-variant jaxpr
    scalar by scalar (the generated backend, sweep.codegen): the loop keeps
    their code about the group size smaller. XLA is faster with ``vmap``, so
    the default is ``vmap``. The mode is read while tracing: a function JAX
    has traced (and cached) before keeps the trace it had."""
    token = _ELEMENT_LOOPS.set(int(min_elements))
    try:
        yield
    finally:
        _ELEMENT_LOOPS.reset(token)


def map_elements(fn, *args, weight=1):
    """``jax.vmap(fn)(*args)`` over the elements of a group (leading axis of
    every leaf of ``args``); a ``lax.map`` under :func:`element_loops` when
    the group is large enough: ``weight`` x elements >= ``min_elements``.
    ``weight``: the element code's size relative to one element's forces
    (4 for the four Jacobian blocks of an element between two free bodies).
    Below that, the unrolled elements keep their constants folded (a
    stop's law, an empty characteristic), which paid more than the loop on
    the twist beam's eight P2P elements (BENCHMARKS.md, "Generated backend,
    third session")."""
    k = _ELEMENT_LOOPS.get()
    leaves = jax.tree_util.tree_leaves(args)
    if k and leaves and leaves[0].shape[0] * weight >= k:
        return jax.lax.map(lambda a: fn(*a), args)
    return jax.vmap(fn)(*args)


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
#
# Bushing law (method.md section 1: a 6-direction bushing between two markers
# with per-direction characteristics). Deflection in marker 1's frame:
#     d = Rm1^T (pm2 - pm1),   theta = log(Rm1^T Rm2)  (rotation vector)
# Elastic part and preload: the diagonal characteristics f_e,i(e_i) are the
# derivatives of a potential V(d, theta) = sum_i int f_e,i, and the
# generalised forces are exactly -grad V. With body-frame rotation increments
# alpha (marker-1 frame) and beta (marker-2 frame):
#     delta d     = Rm1^T (delta pm2 - delta pm1) - alpha x d
#     delta theta = Jr^-1(theta) beta - Jl^-1(theta) alpha
# so body 1 gets F = Rm1 f_t applied at marker 2's POSITION pm2 and the
# torque M = Rm1 Jl^-T(theta) f_r; body 2 gets -F at pm2 and -M
# (Jl^-T = Rrel Jr^-T). The pair exerts no net force or moment.
# Damping part: rates rho_t = d(d)/dt = Rm1^T (vm2 - vm1 - omega_1 x (pm2 - pm1))
# (the velocity of marker 2 relative to body 1's material point at pm2, in
# marker-1 axes; zero for a rigid motion of the pair) and
# rho_r = Rm1^T (omega_2 - omega_1); the damping force acts like the elastic
# one (F_d = Rm1 f_d,t at pm2) and the damping torque is Rm1 f_d,r (no
# Jl^-T). The power of the pair of damping loads is then exactly
# -(f_d,t . rho_t + f_d,r . rho_r) <= 0 for characteristics with
# f_d,i(rho) rho >= 0: damping never adds energy (tests/kernels/test_energy.py).


def bushing_deflection(prm, x1, x2):
    """Deflection (d, theta) and its rates (rho_t, rho_r) of a bushing, marker-1 frame.

    d: position of marker 2 relative to marker 1 [m]; theta: rotation vector of
    marker 2's frame relative to marker 1's [rad]; rho_t: time derivative of d
    [m/s] (includes -omega_1 x d); rho_r: relative angular velocity [rad/s].
    Also returns the kinematics (pm1, pm2, Rm1, p1, R1, p2, R2).
    """
    pm1, vm1, p1, R1, w1 = marker_kinematics(x1, prm["pos1"])
    pm2, vm2, p2, R2, w2 = marker_kinematics(x2, prm["pos2"])
    Rm1 = mm(R1, prm["rot1"])
    Rm2 = mm(R2, prm["rot2"])
    delta = pm2 - pm1
    w1v = mv(R1, w1)
    d = mtv(Rm1, delta)
    theta = rotation_vector(mtm(Rm1, Rm2))
    ddot = mtv(Rm1, vm2 - vm1 - jnp.cross(w1v, delta))
    wrel = mtv(Rm1, mv(R2, w2) - w1v)
    return (jnp.concatenate([d, theta]), jnp.concatenate([ddot, wrel]),
            (pm1, pm2, Rm1, p1, R1, p2, R2))


def bushing_local_forces(prm, defl, rate):
    """Elastic force incl. preload and damping force, marker-1 frame [N, N m]: (f_e, f_d).

    f_e = k_scale (k e + curve_k(e)) + preload with e = defl - offset (the
    derivative of the bushing's potential w.r.t. (d, theta));
    f_d = c_scale (c rate + curve_c(rate)).
    """
    e = play_deflection(prm, defl - prm["offset"])
    elastic = prm["k"] * e + jax.vmap(curves.evaluate)(
        prm["kc"]["breaks"], prm["kc"]["origin"], prm["kc"]["coef"], e)
    damping = prm["c"] * rate + jax.vmap(curves.evaluate)(
        prm["cc"]["breaks"], prm["cc"]["origin"], prm["cc"]["coef"], rate)
    return prm["k_scale"] * elastic + prm["preload"], prm["c_scale"] * damping


def play_deflection(prm, e):
    """The deflection [m | rad] that the elastic law of a bushing with
    ``play`` (a dead band of +-play per direction, kernels.model) sees:
    PLAY_AUTO (the built state, smooth law) e - clip(e, -play, play) by
    the sign of e; the switching law's modes: 0 free (0), +1 / -1 engaged
    on that side (e -+ play, continued linearly through the band edge).
    Directions without play get e itself (exact derivative at e = 0)."""
    play, mode = prm["play"], prm["play_mode"]
    band = e - jnp.clip(e, -play, play)
    switched = jnp.where(mode == 0.0, 0.0, e - mode * play)
    return jnp.where(play > 0, jnp.where(mode == PLAY_AUTO, band, switched), e)


def bushing_play_root(prm, e):
    """Root functions of a bushing's play (6,), for the switching law:
    |e| - play while free, play - mode e while engaged (< 0 while the mode
    fits; directions without play -1)."""
    play, mode = prm["play"], prm["play_mode"]
    phi = jnp.where(mode == 0.0, jnp.abs(e) - play, play - mode * e)
    return jnp.where(play > 0, phi, -1.0)


def bushing_play_switch(prm, e, fired):
    """Modes after the fired play roots: free -> engaged on the side of e,
    engaged -> free."""
    mode = prm["play_mode"]
    new = jnp.where(mode == 0.0, jnp.sign(e), 0.0)
    return jnp.where(fired, new, mode)


def bushing_play_mode0(prm, e):
    """Modes that fit a deflection: engaged beyond the band, else free."""
    return jnp.where(jnp.abs(e) > prm["play"], jnp.sign(e), 0.0)


def bushing_local_force(prm, defl, rate):
    """Characteristic forces f_e + f_d in marker-1 frame [N, N m] (see :func:`bushing_local_forces`)."""
    fe, fd = bushing_local_forces(prm, defl, rate)
    return fe + fd


def _bushing_loads(prm, x1, x2):
    """Force F [N] (applied at pm2) and torque M [N m] on body 1, vehicle frame, and kinematics."""
    defl, rate, kin = bushing_deflection(prm, x1, x2)
    fe, fd = bushing_local_forces(prm, defl, rate)
    Rm1 = kin[2]
    F = mv(Rm1, fe[:3] + fd[:3])
    M = mv(Rm1, left_jacobian_inv_T_apply(defl[3:], fe[3:]) + fd[3:])
    return F, M, kin


def bushing_element(prm, x1, x2):
    """Generalised forces (g1, g2) of one bushing on its two bodies (method.md section 1).

    Body 1: F = Rm1 (f_e,t + f_d,t) at marker 2's position pm2 and the torque
    M = Rm1 (Jl^-T(theta) f_e,r + f_d,r); body 2: -F at pm2 and -M. The
    elastic part and preload are the exact negative gradient of the
    bushing's potential (conservative; symmetric stiffness at equilibrium);
    the damping part dissipates (see the comment above
    :func:`bushing_deflection`).
    """
    F, M, (pm1, pm2, Rm1, p1, R1, p2, R2) = _bushing_loads(prm, x1, x2)
    return _apply(F, M, pm2, p1, R1, p2, R2)


def bushing_output(prm, x1, x2):
    """Force and torque the bushing exerts on its first body, vehicle frame (6,).

    The torque is taken about marker 1's position pm1 (the attachment point on
    body 1): ``M + (pm2 - pm1) x F``, with F acting at pm2 (see
    :func:`bushing_element`). For coincident markers this is M.
    """
    F, M, (pm1, pm2, *_rest) = _bushing_loads(prm, x1, x2)
    return jnp.concatenate([F, M + jnp.cross(pm2 - pm1, F)])


BUSHING_PARAMS = {
    "pos1": "(nb, 3) marker 1 in body 1's frame [m]", "rot1": "(nb, 3, 3) marker 1's axes in body 1's frame",
    "pos2": "(nb, 3) marker 2 in body 2's frame [m]", "rot2": "(nb, 3, 3) marker 2's axes in body 2's frame",
    "k": "(nb, 6) linear stiffness [N/m | N m/rad]", "c": "(nb, 6) linear damping [N s/m | N m s/rad]",
    "preload": "(nb, 6) [N | N m]", "offset": "(nb, 6) [m | rad]",
    "kc": "stiffness curve tables, leading (nb, 6)", "cc": "damping curve tables, leading (nb, 6)",
    "k_scale": "(nb, 6) factor on the elastic force (linear and curve)",
    "c_scale": "(nb, 6) factor on the damping force",
    "play": "(nb, 6) dead band [m | rad] (0: none)",
    "play_mode": "(nb, 6) the play's discrete state: PLAY_AUTO (built), 0 free, +-1 engaged",
}
"""The bushing group's parameter table (``Model.elements["bushing"]``): key -> shape, meaning [unit]."""


# ----------------------------------------------------------------------------- bushing table
# The model table's ``bushings`` rows (kernels.model's module docstring): the
# group's checks and builder, called by kernels.model for every group alike.

def check_bushing(e, w):
    """A bushing row's fields (:class:`ElementGroup` ``validate``)."""
    for fld in ("stiffness", "damping"):
        tables.non_negative(tables.vector(e, fld, 6, w), f"{w}.{fld}")
    for fld in ("preload", "offset"):
        tables.vector(e, fld, 6, w, default=[0] * 6)
    play = tables.vector(e, "play", 6, w, default=[0] * 6)
    bad = np.nonzero(play < 0)[0]
    if len(bad):
        raise ModelError(f"{w}.play = {play.tolist()}: {DIRECTIONS[int(bad[0])]} = "
                         f"{play[int(bad[0])]} must be >= 0")
    if e.get("play_law", "smooth") not in STOP_LAWS:
        raise ModelError(f"{w}.play_law = {e['play_law']!r} is not one of {', '.join(STOP_LAWS)}")
    for fld in ("stiffness_curves", "damping_curves"):
        for d, c in (e.get(fld) or {}).items():
            if d not in DIRECTIONS:
                raise ModelError(f"{w}.{fld}: unknown direction {d!r} "
                                 f"(expected one of {DIRECTIONS})")
            x, y = tables.check_curve(c, f"{w}.{fld}.{d}")
            if not np.any((np.asarray(x) == 0) & (np.asarray(y) == 0)):
                raise ModelError(
                    f"{w}.{fld}.{d} must pass through (0, 0): at zero deflection (rate) the "
                    "bushing pushes nothing but its `preload` (a knot x = 0 with y = 0)")


def _row_play(e):
    return np.asarray(e.get("play") or np.zeros(6), float)


def describe_bushings(rows):
    """The bushings' structure: ``events``, True where the play has the
    switching law (state events, kernels.system)."""
    return {"events": tuple(bool(e.get("play_law") == "switching" and np.any(_row_play(e) > 0)) for e in rows)}


def build_bushings(rows, ends):
    """The bushing group's parameter table (:data:`BUSHING_PARAMS`) from its rows."""
    nb = len(rows)
    k = np.zeros((nb, 6)); c = np.zeros((nb, 6))
    pre = np.zeros((nb, 6)); off = np.zeros((nb, 6)); play = np.zeros((nb, 6))
    kspec = [[None] * 6 for _ in range(nb)]
    cspec = [[None] * 6 for _ in range(nb)]
    for i, e in enumerate(rows):
        k[i] = e["stiffness"]; c[i] = e["damping"]
        pre[i] = e.get("preload") or np.zeros(6)
        off[i] = e.get("offset") or np.zeros(6)
        play[i] = _row_play(e)
        for spec, coef, key in ((kspec, k, "stiffness_curves"), (cspec, c, "damping_curves")):
            for d, cv in (e.get(key) or {}).items():
                j = DIRECTIONS.index(d)
                spec[i][j] = (np.asarray(cv["x"], float), np.asarray(cv["y"], float),
                              ("linear", "linear"), cv.get("interpolation", "pchip"))
                coef[i, j] = 0.0
    n_knots = max([2] + [len(s[0]) for row in kspec + cspec for s in row if s is not None])

    def curve_table(spec):
        flat = tables.curve_tables([s for row in spec for s in row], n_knots)
        return {kk: v.reshape((nb, 6) + v.shape[1:]) for kk, v in flat.items()}
    return {"pos1": ends["pos1"], "rot1": ends["rot1"], "pos2": ends["pos2"], "rot2": ends["rot2"],
            "k": k, "c": c, "preload": pre, "offset": off, "kc": curve_table(kspec), "cc": curve_table(cspec),
            "k_scale": np.ones((nb, 6)), "c_scale": np.ones((nb, 6)),
            "play": play, "play_mode": np.full((nb, 6), PLAY_AUTO)}


# ----------------------------------------------------------------------------- P2P

DAMPER_BLEND = 1e-3  # m/s, width of the compression/rebound factor blend
# the discrete state of the switching laws as built (kernels.model): every
# analysis without state events (statics, K&C, modes) sees a stop's smooth
# law (force by the sign of the penetration) and no friction force
CONTACT_AUTO = -1.0
SLIP_OFF = 2.0
PLAY_AUTO = -2.0      # a bushing's play by the sign of its deflection (the smooth law)
STICK_VELOCITY = 1e-6  # m/s: a damper with friction slower than this at the start is stuck

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
    # a stop's switching law (kernels.forces.p2p_law_parameters): in contact the curve
    # continued linearly through engagement, free 0, AUTO (< 0) by the sign
    pen = stop_penetration(prm, L)
    push_contact = push + prm["engage_sign"] * prm["k_scale"] * prm["k0"] * jnp.minimum(pen, 0.0)
    contact = prm["contact"]
    push = jnp.where(contact < 0, push, contact * push_contact)
    return damp - push + friction_tension(prm, L, Ldot)


def stop_penetration(prm, L):
    """Penetration of a stop beyond its clearance [m] (> 0: engaged): L_e - L
    for a bump stop, L - L_e for a rebound stop (0 for other kinds)."""
    return prm["engage_sign"] * (prm["engage"] - L)


def stick_tension(prm, L, Ldot):
    """Tension [N] of a stuck damper's elastic stick: k_s (L - anchor) + c_s dL/dt."""
    return prm["friction_k"] * (L - prm["anchor"]) + prm["friction_c"] * Ldot


def friction_tension(prm, L, Ldot):
    """Coulomb friction of a damper as a tension [N] (kernels.forces.p2p_friction_parameters):
    sliding F_c * slip, stuck k_s (L - anchor) + c_s dL/dt, SLIP_OFF 0;
    the regularised law F_c tanh(dL/dt / v_reg) whatever the mode."""
    slip = prm["slip"]
    stick = stick_tension(prm, L, Ldot)
    # F_c = 0 (a swept friction force at the end of its range) is no friction:
    # no stick either, whatever the mode
    off = (slip == SLIP_OFF) | (prm["friction"] <= 0.0)
    switching = jnp.where(off, 0.0, jnp.where(slip == 0.0, stick, prm["friction"] * slip))
    v_reg = prm["friction_v"]
    regular = prm["friction"] * jnp.tanh(Ldot / jnp.where(v_reg > 0, v_reg, 1.0))
    return jnp.where(v_reg > 0, regular, switching)


def p2p_root(prm, L, Ldot, contact_event):
    """Root function of a switching P2P law (kernels.integrate, "State
    events"): < 0 while the mode fits, > 0 once it does not. A stop
    (``contact_event``): the penetration while free, minus it in contact.
    Friction: -slip * dL/dt while sliding (the sliding velocity reverses),
    |stick tension| - F_c while stuck; -1 (never) where F_c = 0."""
    pen = stop_penetration(prm, L)
    contact = jnp.where(prm["contact"] == 1.0, -pen, pen)
    slip = prm["slip"]
    stick = stick_tension(prm, L, Ldot)
    friction = jnp.where(slip == 0.0, jnp.abs(stick) - prm["friction"], -slip * Ldot)
    friction = jnp.where(prm["friction"] > 0.0, friction, -1.0)    # F_c = 0: no law, never fires
    return jnp.where(contact_event, contact, friction)


def p2p_switch(prm, L, Ldot, contact_event, fired):
    """The discrete state (contact, slip, anchor) of one switching P2P law
    after its root has crossed (``fired``): a stop engages / releases; a
    sliding damper sticks, relaxed at the current length (anchor = L); a
    stuck one slides in the direction of its stick tension."""
    contact, slip, anchor = prm["contact"], prm["slip"], prm["anchor"]
    stick = stick_tension(prm, L, Ldot)
    new_contact = jnp.where(contact_event, 1.0 - contact, contact)
    new_slip = jnp.where(contact_event, slip, jnp.where(slip == 0.0, jnp.sign(stick), 0.0))
    new_anchor = jnp.where(contact_event | (slip == 0.0), anchor, L)
    return (jnp.where(fired, new_contact, contact), jnp.where(fired, new_slip, slip),
            jnp.where(fired, new_anchor, anchor))


def p2p_mode0(prm, L, Ldot, contact_event):
    """The discrete state that fits a state (L, dL/dt): a stop engaged where
    it penetrates; a damper with friction sliding with sign(dL/dt) where it
    moves, else stuck and relaxed (anchor = L)."""
    contact = jnp.where(stop_penetration(prm, L) > 0, 1.0, 0.0)
    slip = jnp.where(jnp.abs(Ldot) > STICK_VELOCITY, jnp.sign(Ldot), 0.0)
    return (jnp.where(contact_event, contact, prm["contact"]),
            jnp.where(contact_event, prm["slip"], slip), L)


def p2p_element(prm, x1, x2):
    """Generalised forces (g1, g2) of one point-to-point element."""
    T, _, _, (pm1, pm2, e, p1, R1, p2, R2) = p2p_tension(prm, x1, x2)
    zero = jnp.zeros(3, T.dtype)
    return _apply(T * e, zero, pm1, p1, R1, p2, R2, at2=pm2)


P2P_PARAMS = {
    "pos1": "(npp, 3) marker 1 in body 1's frame [m]", "pos2": "(npp, 3) marker 2 in body 2's frame [m]",
    "length": "(npp,) reference length [m]", "k": "(npp,) [N/m]", "preload": "(npp,) push at the reference length [N]",
    "c": "(npp,) [N s/m]", "kc": "push force vs compression travel s = L_ref - L (curve tables)",
    "cc": "tension force vs extension rate dL/dt (curve tables)",
    "k_scale": "(npp,) factor on the elastic force change from s = 0 (rate)",
    "c_scale": "(npp, 2) factor on the damping force in compression, rebound",
    "engage": "(npp,) length at which a stop engages [m]",
    "engage_sign": "(npp,) +1 bump stop (engaged for L < engage), -1 rebound stop, 0 other",
    "k0": "(npp,) stop curve slope at engagement [N/m] (contact-mode continuation)",
    "friction": "(npp,) Coulomb friction force [N] (0: none)",
    "friction_k": "(npp,) stick stiffness [N/m] (switching law)",
    "friction_c": "(npp,) stick damping [N s/m] (switching law)",
    "friction_v": "(npp,) regularisation velocity [m/s] (regularised law; 0: switching)",
    "contact": "(npp,) the stop's discrete state: 1 contact, 0 free, CONTACT_AUTO by the penetration's sign",
    "slip": "(npp,) +1 / -1 sliding (sign of dL/dt), 0 stuck, SLIP_OFF no friction force",
    "anchor": "(npp,) length at which the stuck friction element is relaxed [m]",
}
"""The P2P group's parameter table (``Model.elements["p2p"]``): key -> shape, meaning [unit].
The discrete states (``contact``, ``slip``, ``anchor``, and the bushing's
``play_mode``) are set by the time loop (kernels.integrate, "State
events"); every other analysis uses the built values."""


# ----------------------------------------------------------------------------- P2P table
# The model table's ``p2p`` rows: the group's checks and builder.

P2P_KINDS = ("spring", "damper", "bump_stop", "rebound_stop")
FRICTION_LAWS = ("switching", "regularised")
FRICTION_KEYS = ("force", "law", "stiffness", "damping", "velocity")


# keys of a P2P row that its kind does not use, and why (a key given where it
# would be ignored, or act where it should not, is an error)
P2P_NOT_FOR = {"spring": ("clearance",),
               "damper": ("stiffness", "clearance", "seat_offset"),
               "bump_stop": ("stiffness", "preload", "damping", "seat_offset"),
               "rebound_stop": ("stiffness", "preload", "damping", "seat_offset")}
P2P_WHY = {"clearance": "only stops engage after a clearance",
           "stiffness": "its force is its own law; a spring-damper is a `spring` with `damping`",
           "preload": "a stop pushes only when engaged",
           "damping": "it would act at every length, engaged or not; give the damping to the damper",
           "seat_offset": "a seat offset sets a spring's ride height"}


def check_p2p(e, w):
    """A P2P row's fields (:class:`ElementGroup` ``validate``; the markers, and
    that they are apart, are checked for every group)."""
    kind = e.get("kind")
    if kind not in P2P_KINDS:
        raise ModelError(f"{w}.kind = {kind!r} is not one of {P2P_KINDS}")
    for fld in ("stiffness", "damping", "preload", "clearance", "length", "seat_offset"):
        if fld in e and e[fld] is not None:
            tables.finite(e[fld], f"{w}.{fld}")
    if e.get("clearance") is not None and e["clearance"] < 0:
        raise ModelError(f"{w}.clearance = {e['clearance']} must be >= 0")
    if e.get("length") is not None and not e["length"] > 0:
        raise ModelError(f"{w}.length = {e['length']} must be > 0 [m] (leave it out for the design distance)")
    for fld in P2P_NOT_FOR.get(kind, ()):
        if e.get(fld) is not None:
            raise ModelError(f"{w}.{fld}: a {kind} has no {fld} ({P2P_WHY[fld]})")
    if kind in ("bump_stop", "rebound_stop"):
        if "curve" not in e:
            raise ModelError(f"{w}: a {kind} needs a 'curve' (penetration -> force)")
        x, y = tables.check_curve(e["curve"], f"{w}.curve")
        if x[0] != 0 or y[0] != 0:
            raise ModelError(f"{w}.curve must start at (0, 0) so that the force is "
                             f"continuous at engagement (got ({x[0]}, {y[0]}))")
    if "curve" in e and kind in ("spring", "damper"):
        x, y = tables.check_curve(e["curve"], f"{w}.curve")
        if kind == "damper" and not np.any((np.asarray(x) == 0) & (np.asarray(y) == 0)):
            raise ModelError(f"{w}.curve must pass through (0, 0): a damper pushes nothing at rest "
                             "(a gas force is the damper's `preload`)")
    if "law" in e:
        if kind not in ("bump_stop", "rebound_stop"):
            raise ModelError(f"{w}.law = {e['law']!r}: only a bump_stop or rebound_stop has a law "
                             f"({' | '.join(STOP_LAWS)})")
        if e["law"] not in STOP_LAWS:
            raise ModelError(f"{w}.law = {e['law']!r} is not one of {', '.join(STOP_LAWS)}")
    fr = e.get("friction")
    if fr is not None:
        if kind != "damper":
            raise ModelError(f"{w}.friction: only a damper has friction (kind is {kind!r})")
        if not isinstance(fr, dict):
            raise ModelError(f"{w}.friction = {fr!r} must be a mapping with 'force' [N]")
        unknown = sorted(set(fr) - set(FRICTION_KEYS))
        if unknown:
            raise ModelError(f"{w}.friction: unknown key {unknown[0]!r} (known: {', '.join(FRICTION_KEYS)})")
        law = fr.get("law", "switching")
        if law not in FRICTION_LAWS:
            raise ModelError(f"{w}.friction.law = {law!r} is not one of {', '.join(FRICTION_LAWS)}")
        for key in ("force", "stiffness", "damping", "velocity"):
            if key in fr:
                val = float(tables.finite(fr[key], f"{w}.friction.{key}"))
                if val < 0 or (key in ("stiffness", "velocity") and val == 0):
                    raise ModelError(f"{w}.friction.{key} = {fr[key]} must be "
                                     f"{'> 0' if key in ('stiffness', 'velocity') else '>= 0'}")
        if "force" not in fr:
            raise ModelError(f"{w}.friction: missing field 'force' (Coulomb force [N])")


def p2p_law_parameters(e, length_design):
    """Translate a P2P row into (L_ref, k, preload, c, elastic curve, damping curve).

    Laws (tension T > 0 pulls the bodies together; compression travel
    ``s = L_ref - L``; extension rate ``dL/dt``):
      spring:       push = preload + stiffness * s, or push = curve(s)
                    (curve: compression travel [m] -> force [N], preload included)
      damper:       T = damping * dL/dt, or T = curve(dL/dt)
                    (curve: rebound/extension velocity [m/s] -> force [N])
      bump_stop:    push = curve(s - clearance) for s > clearance, else 0
      rebound_stop: T = curve(-s - clearance) for -s > clearance, else 0
    A stop's ``law``: ``smooth`` (default) evaluates this by the sign of the
    penetration in every evaluation (the force has a kink at engagement
    that a fixed step may straddle); ``switching`` makes engagement and
    release state events: the time loop locates them (root function: the
    penetration) and integrates each side with its own smooth law (in
    contact the curve continued linearly through engagement, free: 0).
    ``length`` (default: design distance of the markers) is L_ref;
    ``seat_offset`` [m] (spring seat / packer adjustment, + = compressed
    further at the design position) adds to it. Curves carry their
    ``interpolation`` (default pchip), bump/rebound stop curves are pchip
    unless stated.
    """
    kind = e["kind"]
    L = float(e.get("length") or length_design) + float(e.get("seat_offset") or 0.0)
    k = float(e.get("stiffness") or 0.0)
    f0 = float(e.get("preload") or 0.0)
    c = float(e.get("damping") or 0.0)
    kcurve = ccurve = None
    interp = (e.get("curve") or {}).get("interpolation", "pchip")
    if kind == "spring" and "curve" in e:
        kcurve = (np.asarray(e["curve"]["x"], float), np.asarray(e["curve"]["y"], float),
                  ("linear", "linear"), interp)
        k = f0 = 0.0
    elif kind == "damper" and "curve" in e:
        ccurve = (np.asarray(e["curve"]["x"], float), np.asarray(e["curve"]["y"], float),
                  ("linear", "linear"), interp)
        c = 0.0
    elif kind == "bump_stop":
        cl = float(e.get("clearance") or 0.0)
        kcurve = (np.asarray(e["curve"]["x"], float) + cl, np.asarray(e["curve"]["y"], float),
                  ("constant", "linear"), interp)
        k = f0 = 0.0
    elif kind == "rebound_stop":
        cl = float(e.get("clearance") or 0.0)
        x = np.asarray(e["curve"]["x"], float)
        y = np.asarray(e["curve"]["y"], float)
        kcurve = (-(x + cl)[::-1], -y[::-1], ("linear", "constant"), interp)
        k = f0 = 0.0
    return L, k, f0, c, kcurve, ccurve


# defaults of the switching friction law [added]: the stuck damper is a stiff
# spring-damper that holds the rod against the tube (elastic stick, the
# rod guide and seal compliance): 1e6 N/m (1 mm under 1 kN), damping 2000 N s/m
# (critically damps 1 kg of rod against that stiffness); regularised law: 1 mm/s
FRICTION_DEFAULTS = {"stiffness": 1.0e6, "damping": 2.0e3, "velocity": 1.0e-3}


def p2p_friction_parameters(e):
    """(force, stick stiffness, stick damping, regularisation velocity, event)
    of a P2P row's ``friction`` (dampers only):

      friction: {force: F_c [N], law: switching | regularised,
                 stiffness: [N/m], damping: [N s/m], velocity: [m/s]}

    switching (default): while sliding the tension is F_c sign(dL/dt) (the
    sign held as the mode of the law); when dL/dt crosses zero the damper
    sticks: a spring-damper (``stiffness``, ``damping``) anchored at the
    length where it stuck, until its force reaches F_c and it slides again
    in that direction - both switches are state events (root functions),
    located by the time loop. regularised: F_c tanh((dL/dt) / velocity),
    smooth, no events (the stiffness of the law grows as F_c / velocity).
    Defaults: :data:`FRICTION_DEFAULTS`."""
    fr = e.get("friction")
    if not fr:
        return 0.0, 0.0, 0.0, 0.0, ""
    get = lambda key: float(fr.get(key, FRICTION_DEFAULTS[key]))  # noqa: E731
    if fr.get("law", "switching") == "regularised":
        return float(fr["force"]), 0.0, 0.0, get("velocity"), ""
    return float(fr["force"]), get("stiffness"), get("damping"), 0.0, "friction"


def _p2p_event(e):
    """A P2P row's state event: "contact" (a stop with the switching law),
    "friction" (a damper with switching Coulomb friction) or ""."""
    if e["kind"] in ("bump_stop", "rebound_stop") and e.get("law", "smooth") == "switching":
        return "contact"
    return p2p_friction_parameters(e)[-1]


def describe_p2p(rows):
    """The P2P elements' structure: ``kinds`` (:data:`P2P_KINDS`) and ``events``
    (:func:`_p2p_event`: the elements with a root function, kernels.system)."""
    return {"kinds": tuple(e["kind"] for e in rows), "events": tuple(_p2p_event(e) for e in rows)}


def build_p2p(rows, ends):
    """The P2P group's parameter table (:data:`P2P_PARAMS`) from its rows."""
    npp = len(rows)
    L = np.zeros(npp); pk = np.zeros(npp); pf = np.zeros(npp); pc = np.zeros(npp)
    pkspec, pcspec = [], []
    engage = np.zeros(npp); esign = np.zeros(npp); k0 = np.zeros(npp)
    fric = np.zeros((npp, 4))
    for i, e in enumerate(rows):
        Ld = np.linalg.norm(np.subtract(ends["point2"][i], ends["point1"][i]))
        L[i], pk[i], pf[i], pc[i], kc, cc = p2p_law_parameters(e, Ld)
        if e["kind"] in ("bump_stop", "rebound_stop"):
            cl = float(e.get("clearance") or 0.0)
            esign[i] = 1.0 if e["kind"] == "bump_stop" else -1.0
            engage[i] = L[i] - esign[i] * cl
            cv = e["curve"]
            k0[i] = curves.hermite_table(cv["x"], cv["y"], interpolation=cv.get(
                "interpolation", "pchip"))["coef"][1][1]
        *fric[i], _ = p2p_friction_parameters(e)
        pkspec.append(kc); pcspec.append(cc)
    n_knots = max([2] + [len(s[0]) for s in pkspec + pcspec if s is not None])
    return {"pos1": ends["pos1"], "pos2": ends["pos2"], "length": L, "k": pk, "preload": pf, "c": pc,
            "kc": tables.curve_tables(pkspec, n_knots), "cc": tables.curve_tables(pcspec, n_knots),
            "k_scale": np.ones(npp), "c_scale": np.ones((npp, 2)),
            "engage": engage, "engage_sign": esign, "k0": k0,
            "friction": fric[:, 0], "friction_k": fric[:, 1], "friction_c": fric[:, 2], "friction_v": fric[:, 3],
            "contact": np.full(npp, CONTACT_AUTO), "slip": np.full(npp, SLIP_OFF), "anchor": L.copy()}


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
    section 1 and eq. 5, element-local): a body's orientation is perturbed by
    a body-frame increment dphi = E(angles) d(angles); marker kinematics, the
    deflection (d, theta), its rates (rho_t, rho_r) and the load map of
    :func:`bushing_element` (F at pm2, torque Rm1 (Jl^-T f_e,r + f_d,r)) are
    differentiated by hand; the derivatives of the rotation-vector map, of
    theta -> Jl^-T(theta) f_e,r(theta) (3 x 3) and the slopes of the
    (diagonal) characteristics come from forward-mode autodiff of those small
    functions. Equal to ``jacfwd`` of :func:`bushing_element` (tested), at a
    fraction of the cost.
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
    a1 = mtv(A1, w1)                       # omega_1 in marker-1 frame
    d = mtv(Rm1, Delta)
    theta = rotation_vector(Rrel)
    defl = jnp.concatenate([d, theta])
    rate = jnp.concatenate([mtv(Rm1, Dv) - jnp.cross(a1, d), mtv(A1, R2w2 - w1)])
    # characteristics: values and diagonal slopes
    (fe, fd), (ke, kd) = jax.jvp(lambda de, ra: bushing_local_forces(prm, de, ra), (defl, rate),
                                 (jnp.ones_like(defl), jnp.zeros_like(rate)))
    kd = jax.jvp(lambda ra: bushing_local_forces(prm, defl, ra)[1], (rate,), (jnp.ones_like(rate),))[1]
    ft = fe[:3] + fd[:3]

    def torque_el(th):
        return left_jacobian_inv_T_apply(th, bushing_local_forces(prm, jnp.concatenate([d, th]), rate)[0][3:])
    tr_el, H = torque_el(theta), jax.jacfwd(torque_el)(theta)
    tr = tr_el + fd[3:]
    # derivative of the rotation-vector map for right / left increments
    eye = jnp.eye(3, dtype=Rrel.dtype)
    Jr_inv = jax.jacfwd(lambda xi: rotation_vector(mm(Rrel, eye + _skew(xi))))(jnp.zeros(3, Rrel.dtype))
    Jl_inv = jax.jacfwd(lambda et: rotation_vector(mm(eye + _skew(et), Rrel)))(jnp.zeros(3, Rrel.dtype))
    Z = jnp.zeros((3, 3), Rrel.dtype)
    A1T, Rm1T = A1.T, Rm1.T
    Rm1TR2 = mtm(Rm1, R2)
    R1TD = mtv(R1, Delta)
    R1TDv = mtv(R1, Dv)
    Sa, Sd = _skew(a1), _skew(d)
    # deflection d over (dp1, dphi1, dp2, dphi2); theta over (dphi1, dphi2)
    d_p1, d_f1 = -Rm1T, mm(A1T, _skew(R1TD + s1))
    d_p2, d_f2 = Rm1T, -mm(Rm1TR2, _skew(s2))
    t_f1 = -mm(Jl_inv, A1T)
    t_f2 = mm(Jr_inv, A2.T)
    # rho_t = Rm1^T Dv - a1 x d over (dp, dphi, v, w) of both bodies
    rt_p1, rt_p2 = -mm(Sa, d_p1), -mm(Sa, d_p2)
    rt_f1 = mm(A1T, _skew(R1TDv + ws1)) - mm(Sa, d_f1)
    rt_f2 = -mm(Rm1TR2, _skew(ws2)) - mm(Sa, d_f2)
    rt_v1, rt_w1 = -Rm1T, mm(A1T, _skew(s1)) + mm(Sd, A1T)
    rt_v2, rt_w2 = Rm1T, -mm(Rm1TR2, _skew(s2))
    # rho_r
    wr_f1 = mm(A1T, _skew(R2w2))
    wr_f2 = -mm(Rm1TR2, _skew(w2))
    wr_w1, wr_w2 = -A1T, Rm1TR2
    # d(ft, tr)/d(body-1 and body-2 states), (6, 12) each, with dphi columns
    ke_, kd_ = ke[:3, None], kd[:, None]
    df1 = jnp.concatenate([
        jnp.concatenate([ke_ * d_p1 + kd_[:3] * rt_p1, ke_ * d_f1 + kd_[:3] * rt_f1,
                         kd_[:3] * rt_v1, kd_[:3] * rt_w1], 1),
        jnp.concatenate([Z, mm(H, t_f1) + kd_[3:] * wr_f1, Z, kd_[3:] * wr_w1], 1)])
    df2 = jnp.concatenate([
        jnp.concatenate([ke_ * d_p2 + kd_[:3] * rt_p2, ke_ * d_f2 + kd_[:3] * rt_f2,
                         kd_[:3] * rt_v2, kd_[:3] * rt_w2], 1),
        jnp.concatenate([Z, mm(H, t_f2) + kd_[3:] * wr_f2, Z, kd_[3:] * wr_w2], 1)])
    # load map: u_t = A1 ft, Ur = A1 tr (body-1 frame), c1 = R1^T (pm2 - p1);
    # g1 = (R1 u_t, Ur + c1 x u_t), g2 = (-R1 u_t, -Q12 Ur - s2 x Q12 u_t)
    u_t, Ur = mv(A1, ft), mv(A1, tr)
    c1 = R1TD + s1
    F = mv(R1, u_t)
    Q12 = Q21.T
    Qut, QUr = mv(Q12, u_t), mv(Q12, Ur)
    g1 = jnp.concatenate([F, Ur + jnp.cross(c1, u_t)])
    g2 = jnp.concatenate([-F, -QUr - jnp.cross(s2, Qut)])
    R2TRm1 = mtm(R2, Rm1)
    T1 = jnp.concatenate([jnp.concatenate([Rm1, Z], 1), jnp.concatenate([mm(_skew(c1), A1), A1], 1)])
    T2 = jnp.concatenate([jnp.concatenate([-Rm1, Z], 1),
                          jnp.concatenate([-mm(_skew(s2), R2TRm1), -R2TRm1], 1)])
    # pose derivatives of g at fixed (ft, tr)
    Sut = _skew(u_t)
    R1T = R1.T
    P1_1 = jnp.zeros((6, 12), F.dtype).at[:3, 3:6].set(-mm(R1, Sut))            # dg1/d(body 1)
    P1_1 = P1_1.at[3:, :3].set(mm(Sut, R1T)).at[3:, 3:6].set(-mm(Sut, _skew(c1)))
    P1_2 = jnp.zeros((6, 12), F.dtype).at[3:, :3].set(-mm(Sut, R1T))            # dg1/d(body 2)
    P1_2 = P1_2.at[3:, 3:6].set(mm(mm(Sut, Q21), _skew(s2)))
    P2_1 = jnp.zeros((6, 12), F.dtype).at[:3, 3:6].set(mm(R1, Sut))             # dg2/d(body 1)
    P2_1 = P2_1.at[3:, 3:6].set(mm(Q12, _skew(Ur)) + mm(mm(_skew(s2), Q12), Sut))
    P2_2 = jnp.zeros((6, 12), F.dtype).at[3:, 3:6].set(                          # dg2/d(body 2)
        -_skew(QUr) - mm(_skew(s2), _skew(Qut)))
    dg1_1 = mm(T1, df1) + P1_1
    dg2_1 = mm(T2, df1) + P2_1
    dg1_2 = mm(T1, df2) + P1_2
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


# ----------------------------------------------------------------------------- element groups
#
# Force-element types. A group is one kind of element between two bodies
# (method.md section 1: "force elements, grouped by type and vectorised per
# group"); everything that walks the force elements (the generalised forces
# and their element-local Jacobians, eq. 5, in kernels.dynamics; the block
# pattern in kernels.blocks; the chassis reaction in kernels.metrics; the
# topology hash) walks the groups of a model's topology
# (``Topology.element_groups``: the built-in groups, then the groups the
# model's tables added), so a new element type is one ``ElementGroup`` named
# by the model (``ElementRegistry``).

RESERVED_TABLE_KEYS = ("name", "gravity", "bodies", "markers", "wheels", "reference_bushings",
                       "steering_joints", "travel_lock", "vehicle",
                       "steering_rack", "tyres", "sprung_body", "element_groups", "hardpoints",
                       "flexible_bodies")


# --------------------------------------------------------------------------- model-file rows
# A group's ``row`` turns one element of the model file's section into a row
# of its table, through a placement (``sweep.axle.builder.Placement``: the
# element's name and model-file path, its side, and the builder's hardpoints,
# bodies, frames, markers and bushing types). Errors name ``place.what``.

def placed_row(spec, place) -> dict:
    """The row of an element with ``bodies: [A, B]`` and either ``at`` (both
    markers at one point, axes from ``axis`` [default z] and ``x_hint``) or
    ``from`` / ``to`` (one marker at each point, vehicle-frame axes); every
    other key of ``spec`` is passed to the row unchanged (the group's
    ``validate`` checks it). The row of a group without its own ``row``."""
    b1, b2 = place.bodies(spec)
    if "at" in spec:
        p1 = p2 = place.point(spec["at"], "at")
        R = place.frame(spec)
    elif "from" in spec and "to" in spec:
        p1, p2 = place.point(spec["from"], "from"), place.point(spec["to"], "to")
        R = np.eye(3)
    else:
        raise ModelError(f"{place.what}: give 'at' or 'from' and 'to'")
    row = {"marker_1": place.marker("/1", b1, p1, R), "marker_2": place.marker("/2", b2, p2, R)}
    row.update({k: v for k, v in spec.items() if k not in ("bodies", "at", "axis", "x_hint", "from", "to")})
    return row


def bushing_row(spec, place) -> dict:
    """A bushing of the model file: ``bodies``, ``at``, ``axis`` / ``x_hint``,
    a ``type`` (the model's ``bushing_types``) and/or its own
    characteristics, and an optional ``adjust: {body, direction, distance}``
    (that body's marker moved by ``distance`` [m] along the axis spec: static
    alignment). Preload and offset are given for the left side; the right
    side's frame is the mirror image with local y reversed, so their values
    there are (x, -y, z, -rx, ry, -rz) of the left side's (rotations are
    axial vectors; ``place.mirrored6``)."""
    what = place.what
    b1, b2 = place.bodies(spec)
    at = place.point(spec.get("at"), "at")
    R = place.frame(spec)
    ch = place.characteristics(spec)
    at1, at2 = at, at
    adj = spec.get("adjust")
    if adj is not None:
        if not isinstance(adj, dict) or set(adj) - {"body", "direction", "distance"}:
            raise ModelError(f"{what}.adjust = {adj!r} must be a mapping with keys "
                             "body, direction, distance")
        try:
            dist = float(adj.get("distance"))
        except (TypeError, ValueError):
            raise ModelError(f"{what}.adjust.distance = {adj.get('distance')!r} "
                             "is not a number [m]") from None
        if not np.isfinite(dist):
            raise ModelError(f"{what}.adjust.distance = {dist!r} is not finite")
        shift = dist * place.axis(adj.get("direction"), "adjust.direction")
        if not isinstance(adj.get("body"), str):
            raise ModelError(f"{what}.adjust.body = {adj.get('body')!r} must name a body")
        ab = place.body(adj.get("body"), "adjust.body")
        if ab == b1:
            at1 = at + shift
        elif ab == b2:
            at2 = at + shift
        else:
            raise ModelError(f"{what}.adjust.body = {adj.get('body')!r} is not one of "
                             f"the bushing's bodies {spec.get('bodies')}")
    row = {"marker_1": place.marker("/1", b1, at1, R),
           "marker_2": place.marker("/2", b2, at2, R),
           "stiffness": list(map(float, ch["stiffness"])),
           "damping": list(map(float, ch["damping"])),
           "preload": place.mirrored6(ch.get("preload", [0] * 6)),
           "offset": place.mirrored6(ch.get("offset", [0] * 6))}
    for key in ("play", "play_law"):
        if key in ch:
            row[key] = ch[key]
    for key in ("stiffness_curves", "damping_curves"):
        if ch.get(key):
            for d in ch[key]:
                if d not in DIRECTIONS:
                    raise ModelError(f"{what}.{key}: unknown direction {d!r}")
            row[key] = ch[key]
    return row


P2P_ROW_KEYS = ("kind", "stiffness", "preload", "damping", "clearance", "length", "curve",
                "seat_offset", "law", "friction")


def p2p_row(spec, place) -> dict:
    """A P2P element of the model file: ``bodies``, ``from``, ``to`` and the
    law's keys (:data:`P2P_ROW_KEYS`); a stop without its own ``law`` takes
    the model's ``stop_law`` (``place.stop_law``, None: the default)."""
    b1, b2 = place.bodies(spec)
    p1, p2 = place.point(spec.get("from"), "from"), place.point(spec.get("to"), "to")
    row = {"marker_1": place.marker("/1", b1, p1, np.eye(3)),
           "marker_2": place.marker("/2", b2, p2, np.eye(3))}
    row.update({key: spec[key] for key in P2P_ROW_KEYS if key in spec})
    if row.get("kind") in ("bump_stop", "rebound_stop") and "law" not in row and place.stop_law is not None:
        row["law"] = place.stop_law      # the model's default law of its stops (model.stop_law)
    return row


@dataclasses.dataclass(frozen=True)
class Events:
    """State events of an element group (kernels.integrate, "State events";
    assembled by :func:`kernels.system.switching_laws`): a switching law
    whose discrete state lives in entries of the group's parameter table,
    with root functions that say when the state no longer fits.

    state   the parameter-table entries that hold the discrete state (set by
            the time loop; every other analysis uses the built values)
    n_roots root functions per element with events
    mode0   ``(prm, x1, x2, flag) -> {entry: value}``: the state that fits one
            element's bodies' states x = (r (6), v (6))
    root    ``(prm, x1, x2, flag) -> (n_roots,)``: < 0 while the state fits,
            > 0 once it does not (a sign change is the event)
    switch  ``(prm, x1, x2, flag, fired (n_roots,) bool) -> {entry: value}``:
            the state after the fired roots
    flag    optional ``topology -> (n,)`` array: a per-element constant the
            functions receive (e.g. which P2P events are contacts); None: 0

    Which elements have events: the truthy entries of the group's
    ``describe(rows)["events"]`` (``Topology.group_static``).
    """
    state: tuple
    n_roots: int
    mode0: Callable
    root: Callable
    switch: Callable
    flag: Optional[Callable] = None


@dataclasses.dataclass(frozen=True)
class Target:
    """A sweep and tuning target of an element group (``sweep.parameters``,
    ``sweep.axle.params``): which entry of the group's parameter table a
    parameter changes.

    key         the table entry a factor multiplies (``mode: scale``)
    column      one column of that entry (e.g. a P2P damper's compression 0 /
                rebound 1 factor); None: every column
    kind        only the group's elements of this kind (``ElementGroup.kinds``)
    directions  True: the entry's columns are the six bushing directions, chosen
                by the parameter's ``directions`` (:data:`kernels.names.DIRECTIONS`)
    value_key   the entry ``mode: value`` sets (an absolute coefficient in SI
                units); None: the target takes factors only
    value_units the unit of ``mode: value``'s values (needed with ``value_key``):
                a string, or (translational, rotational) for a target with
                ``directions``
    value_curve the curve-table entry that must be empty where ``mode: value``
                sets a linear coefficient (a curve would ignore it; a target
                with ``directions``)
    requires    optional ``(model, row) -> None | reason``: why an element the
                pattern matched cannot take the target (an error naming it)
    """
    key: str
    column: Optional[int] = None
    kind: Optional[str] = None
    directions: bool = False
    value_key: Optional[str] = None
    value_units: Any = None
    value_curve: Optional[str] = None
    requires: Optional[Callable] = None

    def __post_init__(self):
        if self.value_key is not None and self.value_units is None:
            raise ValueError(f"Target({self.key!r}): a value_key needs its value_units")
        if self.value_curve is not None and not self.directions:
            raise ValueError(f"Target({self.key!r}): value_curve is for a target with directions")


NUMBER_KINDS = ("any", "non_negative", "positive")
"""What ``ElementGroup.numbers`` may say of a number key."""


def _unset(*_args):  # placeholder getter of a group that has not been completed
    raise AssertionError("ElementGroup getter not set")


@dataclasses.dataclass(frozen=True, eq=False)
class ElementGroup:
    """One type of force element between two bodies (compared and hashed by identity).

    name       group name (registry key; ``Model.elements`` / ``Topology.group_*`` key).
    table_key  the section of the model tables (and of the model YAML's
               ``per_side`` / ``shared``) that lists the elements, e.g. "bushings".
    element    ``(prm, x1, x2) -> (g1, g2)``: generalised forces of one element on
               its two bodies from their states x = (r (6), v (6)) (ground: zeros);
               g = (F (3) vehicle frame [N], M (3) body frame [N m]). prm is one
               element's slice of the group's parameter pytree. Must be
               differentiable (forward mode) when ``jacobian`` is None.
    jacobian   optional closed form ``(prm, x1, x2) -> ((g1, g2), ((dg1/dx1,
               dg2/dx1), (dg1/dx2, dg2/dx2)))``, each (6, 12) over (r, v) of that
               body (layout of :func:`bushing_element_jacobian`); None: forward-mode
               autodiff of ``element`` (kernels.dynamics, eq. 5).
    build      ``(rows, ends) -> params``: the validated table rows (plain
               dicts with index, name, marker_1, marker_2, ...) and ``ends`` =
               {"pos1", "pos2": (n, 3) marker positions in their body frames
               [m], "rot1", "rot2": (n, 3, 3) marker axes in their body frames,
               "point1", "point2": (n, 3) marker positions in the vehicle frame
               at the design position [m]} -> a pytree of arrays with leading
               axis n (floats become float64): ``model.elements[name]``. Body
               slots and names are taken from the rows by
               :func:`kernels.model.build_model`.
    validate   optional ``(row, where) -> None`` raising
               :class:`kernels.tables.ModelError` naming ``where.field`` and the
               value; index, name and the two markers (known, on different
               bodies) are checked for every group.
    describe   optional ``rows -> {key: tuple with one hashable entry per
               element}``: what of the rows is structure, not value (e.g. the
               P2P elements' kinds and which have state events); kept on the
               topology (``Topology.group_static[name]``), part of its identity.
    min_length optional: the two markers at least this far apart at the design
               position [m] (a law along the line between them); 0: no check.
    events     optional :class:`Events`: the group's switching laws (state
               events), for its elements whose ``describe`` entry ``events``
               is truthy.
    targets    sweep and tuning targets (``sweep.axle.params``): {target:
               :class:`Target` or (parameter key, column or None)}; the config
               target is ``"<name>.<target>"``, or the key itself for a target
               of one ``kind`` (``"<kind>.<target>"``, e.g. ``spring.rate``); a
               factor scales ``params[key][rows(, column)]``.
    params, bodies, names
               getters model -> parameter pytree, topology -> (n, 2) body slots
               (slot n_bodies = ground), topology -> element names; default
               ``model.elements[name]``, ``topology.group_bodies[name]``,
               ``topology.group_names[name]``.
    kinds      optional getter topology -> the kind of each element (tuple of
               str), for targets of one kind; None: the group has no kinds.
    input      optional ``(prm, t) -> (k,)``: the element's time-varying input
               at time t [s] (e.g. the road height [m] and its rate [m/s]
               under a tyre), smooth in t (its rate is taken by forward-mode
               autodiff). The group's parameter table then has an entry
               ``"input"`` (n, k): the input at rest, which every analysis
               without a time axis (statics, K&C, modes, FRF) and a time
               response's static equilibrium see; in a time response the
               law reads the input at the stage's time from
               ``prm["input"]``, and the linear-implicit methods take its
               rate through the input Jacobian (method.md eq. 4, the
               ``J_u du/dt`` term; :func:`kernels.dynamics.group_inputs`),
               so the law must be forward-differentiable in ``prm["input"]``
               (a closed-form ``jacobian`` reads it from ``prm`` as well).
               Build the entry as the input at the start (e.g. a road's mean
               height): the time response's static equilibrium sees it. Not
               with state ``events``, nor at a flexible body's interface.
    output     optional ``(prm, x1, x2) -> (6,)``: the force (3) [N] and torque
               (3) [N m] the element exerts on its first body, vehicle
               frame (:func:`kernels.metrics.element_forces`): the result
               channel ``<name>_force`` of a time response (the bushing's is
               ``bushing_force``; computed with the group's input at the
               sample's time, its switching state as built); None: no force
               channel.
    numbers    the keys of the group's model-file entries that hold numbers
               (one or a list, wherever they occur in an entry, e.g. a
               curve's ``x``), each ``"any"``, ``"non_negative"`` or
               ``"positive"``: checked with the model config's other numbers,
               a wrong one an error naming its config path and value
               (``sweep.core.config.check_model``; an added group's when the
               model is built).
    row        optional ``(spec, place) -> row``: one element of the model
               file's section (``per_side`` / ``shared``, key ``table_key``)
               -> its table row without index and name (the builder adds
               them), markers made by ``place.marker``; None:
               :func:`placed_row` (``at`` or ``from``/``to``, other keys as
               given). ``place``: ``sweep.axle.builder.Placement``.
    builtin    True for the bushing and P2P groups: in every model (with or
               without rows), first; their tables are :data:`BUSHING_PARAMS` /
               :data:`P2P_PARAMS`.
    """
    name: str
    table_key: str
    element: Callable
    jacobian: Optional[Callable] = None
    build: Optional[Callable] = None
    validate: Optional[Callable] = None
    describe: Optional[Callable] = None
    min_length: float = 0.0
    events: Optional[Events] = None
    targets: Mapping = dataclasses.field(default_factory=dict)
    params: Optional[Callable] = None
    bodies: Optional[Callable] = None
    names: Optional[Callable] = None
    kinds: Optional[Callable] = None
    input: Optional[Callable] = None
    output: Optional[Callable] = None
    numbers: Mapping = dataclasses.field(default_factory=dict)
    row: Optional[Callable] = None
    builtin: bool = False

    def __post_init__(self):
        name = self.name
        targets = {t: v if isinstance(v, Target) else Target(*v) for t, v in dict(self.targets).items()}
        for t, v in targets.items():
            if v.kind is not None and self.kinds is None:
                raise ValueError(f"element group {name!r}: target {t!r} has a kind but the group no 'kinds'")
            if v.kind is not None and not t.startswith(v.kind + "."):
                raise ValueError(f"element group {name!r}: target {t!r} of kind {v.kind!r} must be "
                                 f"named '{v.kind}.<target>'")
        object.__setattr__(self, "targets", targets)
        bad = {k: v for k, v in dict(self.numbers).items() if v not in NUMBER_KINDS}
        if bad:
            raise ValueError(f"element group {name!r}: numbers {bad!r} must each be one of {NUMBER_KINDS}")
        if self.params is None:
            object.__setattr__(self, "params", lambda model: model.elements[name])
        if self.bodies is None:
            object.__setattr__(self, "bodies", lambda topo: topo.group_bodies[name])
        if self.names is None:
            object.__setattr__(self, "names", lambda topo: topo.group_names[name])

    def __copy__(self):          # a group is compared by identity: a copy of tables keeps it
        return self

    def __deepcopy__(self, memo):
        return self


def _p2p_lengths(prm, x1, x2):
    _, L, Ldot, _ = p2p_tension(prm, x1, x2)
    return L, Ldot


def _p2p_mode0(prm, x1, x2, contact_event):
    return dict(zip(("contact", "slip", "anchor"), p2p_mode0(prm, *_p2p_lengths(prm, x1, x2), contact_event)))


def _p2p_root(prm, x1, x2, contact_event):
    return p2p_root(prm, *_p2p_lengths(prm, x1, x2), contact_event)[None]


def _p2p_switch(prm, x1, x2, contact_event, fired):
    new = p2p_switch(prm, *_p2p_lengths(prm, x1, x2), contact_event, fired[0])
    return dict(zip(("contact", "slip", "anchor"), new))


P2P_EVENTS = Events(("contact", "slip", "anchor"), 1, _p2p_mode0, _p2p_root, _p2p_switch,
                    flag=lambda topo: np.array([ev == "contact" for ev in topo.p2p_events], bool))
"""A stop's contact (law ``switching``) and a damper's switching friction: one
root each (:func:`p2p_root`, :func:`p2p_switch`, :func:`p2p_mode0`)."""


def _play_deflection(prm, x1, x2):
    defl, _, _ = bushing_deflection(prm, x1, x2)
    return defl - prm["offset"]


BUSHING_EVENTS = Events(
    ("play_mode",), 6,
    lambda prm, x1, x2, _flag: {"play_mode": bushing_play_mode0(prm, _play_deflection(prm, x1, x2))},
    lambda prm, x1, x2, _flag: bushing_play_root(prm, _play_deflection(prm, x1, x2)),
    lambda prm, x1, x2, _flag, fired: {"play_mode": bushing_play_switch(prm, _play_deflection(prm, x1, x2), fired)})
"""A bushing's play with the switching law: six roots, one per direction
(:func:`bushing_play_root`, -1 for a direction without play)."""


def _friction_law(model, row):
    """Why a damper cannot take ``damper.friction``: it has no friction law."""
    prm = model.elements["p2p"]
    if model.topology.p2p_events[row] != "friction" and float(prm["friction_v"][row]) == 0.0:
        return ("has no friction law - give it 'friction: {force: ...}' in the model file "
                "(kernels.forces.p2p_friction_parameters)")
    return None


BUSHING = ElementGroup(
    "bushing", "bushings", bushing_element, jacobian=bushing_element_jacobian,
    build=build_bushings, validate=check_bushing, describe=describe_bushings, events=BUSHING_EVENTS,
    row=bushing_row, output=bushing_output, builtin=True,
    numbers={"stiffness": "non_negative", "damping": "non_negative", "loss_factor": "non_negative",
             "loss_frequency": "positive", "preload": "any", "offset": "any", "x": "any", "y": "any"},
    targets={"stiffness": Target("k_scale", directions=True, value_key="k", value_units=("N/m", "N m/rad"),
                                 value_curve="kc"),
             "damping": Target("c_scale", directions=True, value_key="c", value_units=("N s/m", "N m s/rad"),
                               value_curve="cc")})
P2P = ElementGroup(
    "p2p", "p2p", p2p_element, jacobian=p2p_element_jacobian,
    build=build_p2p, validate=check_p2p, describe=describe_p2p, min_length=1e-6, events=P2P_EVENTS,
    kinds=lambda topo: topo.group_static["p2p"]["kinds"], row=p2p_row, builtin=True,
    numbers={k: "any" for k in ("stiffness", "damping", "preload", "clearance", "length", "seat_offset",
                                "x", "y")},
    targets={"spring.rate": Target("k_scale", kind="spring"),
             "damper.compression": Target("c_scale", 0, kind="damper"),
             "damper.rebound": Target("c_scale", 1, kind="damper"),
             "damper.friction": Target("friction", kind="damper", value_key="friction", value_units="N",
                                       requires=_friction_law),
             "bump_stop.force": Target("k_scale", kind="bump_stop"),
             "rebound_stop.force": Target("k_scale", kind="rebound_stop")})
BUILTIN_GROUPS = (BUSHING, P2P)

# the tyres' entry of the event state (kernels.system) and the time-response
# cube's dimensions (a group's elements are the dimension of its force channel)
RESERVED_GROUP_NAMES = ("tyre_contact", "variant", "time", "side", "axis", "component", "component_units",
                        "chunk")


class ElementRegistry:
    """An explicit, immutable set of force-element groups: the built-in groups
    (:data:`BUILTIN_GROUPS`, in every model) first, then the added ones in
    order. There is no module-level registry: a model's tables name the
    groups they add (``tables["element_groups"]``, which
    :func:`sweep.axle.builder.build_tables` fills from the model file's
    ``elements:`` and its ``groups`` argument), and
    :func:`kernels.model.build_model` builds from them.

    Adding a group checks it: an :class:`ElementGroup` with ``build``, not
    built in, a name and table key no other group has (ValueError naming
    the clash). Adding the same group object again keeps the one entry."""
    __slots__ = ("groups",)

    def __init__(self, groups=()):
        out = list(BUILTIN_GROUPS)
        for g in groups:
            if any(g is h for h in out):
                continue
            _check_new(g, out)
            out.append(g)
        self.groups = tuple(out)

    def add(self, *groups) -> "ElementRegistry":
        """A new registry with ``groups`` added after these."""
        return ElementRegistry(self.extra + tuple(groups))

    @property
    def extra(self) -> tuple:
        """The added (not built-in) groups, in order."""
        return tuple(g for g in self.groups if not g.builtin)

    def __iter__(self):
        return iter(self.groups)

    def __len__(self):
        return len(self.groups)

    def __contains__(self, name):
        return any(g.name == name for g in self.groups)

    def __getitem__(self, name) -> ElementGroup:
        for g in self.groups:
            if g.name == name:
                return g
        raise KeyError(f"no element group {name!r} (known: {', '.join(g.name for g in self.groups)})")

    def get(self, name, default=None):
        return self[name] if name in self else default

    def names(self) -> list:
        return [g.name for g in self.groups]

    def of_tables(self, tables) -> list:
        """The groups a model of these tables has: the built-in groups (with or
        without rows), then every added group whose section has rows."""
        return [g for g in self.groups if g.builtin or tables.get(g.table_key)]

    def __repr__(self):
        return f"ElementRegistry({', '.join(self.names())})"


def _check_new(group, groups):
    """ValueError/TypeError unless ``group`` can join ``groups``."""
    if not isinstance(group, ElementGroup):
        raise TypeError(f"{group!r} is not a kernels.forces.ElementGroup")
    if group.builtin or group.build is None:
        raise ValueError(f"element group {group.name!r}: an added group needs 'build' "
                         "(and is not builtin)")
    if any(g.name == group.name for g in groups) or group.name in RESERVED_GROUP_NAMES:
        raise ValueError(f"element group {group.name!r}: the name is already taken")
    if group.table_key in RESERVED_TABLE_KEYS or any(g.table_key == group.table_key for g in groups):
        raise ValueError(f"element group {group.name!r}: table key {group.table_key!r} is "
                         "reserved or used by another group")


BUILTIN = ElementRegistry()
"""The registry of the built-in groups alone (``bushing``, ``p2p``)."""
