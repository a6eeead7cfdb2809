"""The K&C geometry metrics of the double wishbone and the multi-link against central differences of the nonlinear model: design position, travel curve off design, steering curve, rack option, kerb load, and models without steering joint or vehicle data."""
import functools
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation
import kernels  # noqa: F401  (float64)
from kernels import kc, statics
from kernels.rotations import euler_to_matrix
from tests.kernels.test_kc_geometry import DEG, GEOMETRY, H, R_LOADED, TOL, _design_position, _kc_metrics, _travel_curve  # noqa: F401

pytestmark = pytest.mark.slow


def _rot(angles):
    """Body rotation matrix from z-y'-x'' Euler angles (psi, theta, phi) (scipy)."""
    return Rotation.from_euler("ZYX", np.asarray(angles)).as_matrix()


@functools.partial(jax.jit, static_argnames=("joints",))
def _solve_batch(model, z_off, rack, joints):
    """Constrained equilibria (heights z_design + z_off (B, 2)), the steering
    joints' rack-side markers moved along vehicle y by rack (B, 2) [m]."""
    z0 = kc.design_heights(model)
    zero = jnp.zeros((2, 6))
    eq0 = kc.design_position(model, tol=TOL)
    m = model.topology.n_bodies

    def one(dz, dr):
        pos2 = model.elements["bushing"]["pos2"]
        for s in range(2):
            j = joints[s]
            b2 = int(model.topology.bushing_bodies[j, 1])
            R2 = jnp.eye(3) if b2 == m else euler_to_matrix(eq0.r[b2, 3:])
            pos2 = pos2.at[j].add(dr[s] * R2[1, :])
        eq = kc.constrained_equilibrium(model.replace_elements(bushing={"pos2": pos2}), zero, z0 + dz,
                                        r_start=eq0.r, fz_start=eq0.fz, tol=TOL, max_iter=80)
        return eq.r, eq.fz, eq.converged
    return jax.vmap(one)(z_off, rack)


def _metrics_and_position(model):
    eq = _design_position(model)
    return _kc_metrics(model, eq, R_LOADED), eq.r


def _contact(wc, R):
    a = R[:, 1]
    n = np.array([0.0, 0.0, 1.0]) - a[2] * a
    return wc - R_LOADED * n / np.linalg.norm(n)


def _p2p_length(model, r, i):
    m = model.topology.n_bodies
    b1, b2 = (int(b) for b in model.topology.p2p_bodies[i])

    def point(b, pos):
        pos = np.asarray(pos)
        return pos if b == m else r[b, :3] + _rot(r[b, 3:]) @ pos
    return np.linalg.norm(point(b2, model.elements["p2p"]["pos2"][i]) - point(b1, model.elements["p2p"]["pos1"][i]))


def oracle(model, base=(0.0, 0.0)):
    """Every geometry figure by finite differences around the constrained
    equilibrium at heights z_design + base, evaluated with numpy."""
    joints = kc.steering_joints(model)
    wheels = np.asarray(model.topology.wheel_slots)
    carriers = kc.carrier_slots(model)
    names = list(model.topology.p2p_names)
    kinds = list(model.topology.p2p_kinds)
    spring = [names.index(next(n for n, k in zip(names, kinds) if k == "spring" and n.endswith(f"_{s}")))
              for s in kc.SIDES]
    damper = [names.index(next(n for n, k in zip(names, kinds) if k == "damper" and n.endswith(f"_{s}")))
              for s in kc.SIDES]
    base = np.asarray(base, float)
    # rows: base, z_left +-, z_right +-, rack_left +-, rack_right +-, parallel +-
    dz = [base, base + [H, 0], base - [H, 0], base + [0, H], base - [0, H], base, base, base, base,
          base + [H, H], base - [H, H]]
    dr = [[0, 0]] * 5 + [[H, 0], [-H, 0], [0, H], [0, -H]] + [[0, 0]] * 2
    r, fz, ok = (np.asarray(a) for a in _solve_batch(model, jnp.asarray(dz), jnp.asarray(dr, float),
                                                         tuple(int(j) for j in joints)))
    assert ok.all()
    r0 = r[0]
    sign = np.array([1.0, -1.0])

    def wheel(rr, s):
        return rr[wheels[s], :3], _rot(rr[wheels[s], 3:])

    def twist(rp, rm, slot, point):
        """(omega, velocity of `point`) of body `slot` per unit input by central differences."""
        om = Rotation.from_matrix(_rot(rp[slot, 3:]) @ _rot(rm[slot, 3:]).T).as_rotvec() / (2 * H)
        v_com = (rp[slot, :3] - rm[slot, :3]) / (2 * H)
        return om, v_com + np.cross(om, point - r0[slot, :3])

    out = {k: np.zeros(2) for k in ("design_caster", "design_kingpin_inclination", "design_caster_trail",
                                    "design_scrub_radius",
                                    "toe_per_rack_travel", "half_track_change_rate", "wheel_recession",
                                    "spring_motion_ratio", "damper_motion_ratio", "braking_path_angle",
                                    "traction_path_angle")}
    c = np.array([_contact(*wheel(r0, s)) for s in range(2)])
    dc_own = np.zeros((2, 3))
    for s in range(2):
        ip, im = 1 + 2 * s, 2 + 2 * s                  # own travel
        cp, cm = _contact(*wheel(r[ip], s)), _contact(*wheel(r[im], s))
        dc_own[s] = (cp - cm) / (2 * H)
        # rack at the side's own joint, heights held; then lock the spring
        jp, jm = 5 + 2 * s, 6 + 2 * s
        wc = r0[wheels[s], :3]
        om_r, v_r = twist(r[jp], r[jm], wheels[s], wc)
        om_z, v_z = twist(r[ip], r[im], wheels[s], wc)
        lock = (model.topology.tables.get("travel_lock") or {}).get(kc.SIDES[s])
        if lock:      # the travel-lock body's height
            b = list(model.topology.body_names).index(lock)
            a = (r[jp, b, 2] - r[jm, b, 2]) / (r[ip, b, 2] - r[im, b, 2])
        else:         # the spring's length
            dL_r = _p2p_length(model, r[jp], spring[s]) - _p2p_length(model, r[jm], spring[s])
            dL_z = _p2p_length(model, r[ip], spring[s]) - _p2p_length(model, r[im], spring[s])
            a = dL_r / dL_z
        om, v = om_r - a * om_z, v_r - a * v_z
        e = om / np.linalg.norm(om)
        e = -e if e[2] < 0 else e
        p = wc + np.cross(om, v) / (om @ om)
        g = p + (c[s, 2] - p[2]) / e[2] * e
        out["design_caster"][s] = np.degrees(np.arctan2(-e[0], e[2]))
        out["design_kingpin_inclination"][s] = np.degrees(np.arctan2(-sign[s] * e[1], e[2]))
        out["design_caster_trail"][s] = (g[0] - c[s, 0]) * 1e3
        out["design_scrub_radius"][s] = sign[s] * (c[s, 1] - g[1]) * 1e3
        # toe (DIN 70000) of the side per rack travel, heights held
        def toe(rr):
            a_ = _rot(rr[wheels[s], 3:])[:, 1]
            return np.arctan2(sign[s] * a_[0], a_[1])
        out["toe_per_rack_travel"][s] = sign[s] * np.degrees((toe(r[jp]) - toe(r[jm])) / (2 * H)) / 1e3
        # parallel travel
        pp, pm = r[9], r[10]
        c_pp, c_pm = _contact(*wheel(pp, s)), _contact(*wheel(pm, s))
        out["half_track_change_rate"][s] = sign[s] * (c_pp[1] - c_pm[1]) / (2 * H) * 1e3
        dwc = (pp[wheels[s], :3] - pm[wheels[s], :3]) / (2 * H)
        out["wheel_recession"][s] = -dwc[0] * 1e3
        out["traction_path_angle"][s] = np.degrees(np.arctan(dwc[0] / dwc[2]))
        _, vcar = twist(pp, pm, carriers[s], c[s])        # carrier-fixed point at the contact point
        out["braking_path_angle"][s] = np.degrees(np.arctan(vcar[0] / vcar[2]))
        for key, idx in (("spring_motion_ratio", spring), ("damper_motion_ratio", damper)):
            out[key][s] = -(_p2p_length(model, pp, idx[s]) - _p2p_length(model, pm, idx[s])) / (2 * H)
    # roll centre: lines through each contact point normal to its own-travel velocity (y-z plane)
    d = np.array([[dc_own[s, 2], -dc_own[s, 1]] for s in range(2)])
    t = np.linalg.solve(np.column_stack([d[0], -d[1]]), c[1, 1:] - c[0, 1:])
    rc = c[0, 1:] + t[0] * d[0]
    out["design_roll_centre_height"] = (rc[1] - c[:, 2].mean()) * 1e3
    out["design_roll_centre_lateral"] = rc[0] * 1e3
    out["contact_point"] = c
    out["r"] = r0
    return out


def _metrics(model):
    return jax.device_get(_metrics_and_position(model)[0])


@functools.partial(jax.jit, static_argnames=("slots",))
def _loaded_equilibria(model, U, slots):
    """Static equilibria under wheel-centre loads U (B, 2, 6) from the design
    position: the wheel centres' positions (B, 2, 3), converged (B,)."""
    eq0 = kc.design_position(model, tol=TOL)

    def one(u):
        eq = statics.static_equilibrium(model, u, r_start=eq0.r, tol=TOL, max_iter=80)
        return eq.r[jnp.asarray(slots), :3], eq.converged
    return jax.vmap(one)(U)


def anti_pitch_by_loading(model, force=1000.0):
    """Percent anti-pitch by its definition, the share of the pitch load
    transfer that the links react instead of the spring (Milliken &
    Milliken, Race Car Vehicle Dynamics, ch. 17): at the design position the
    axle is loaded with the longitudinal tyre forces of a small braking
    (traction) manoeuvre and with the vertical load transfer it causes,
    and anti = 100 (1 - dz / dz_transfer), dz the wheel centres' vertical
    travel under both, dz_transfer under the load transfer alone (nonlinear
    equilibria at +-force, central differences). ``force`` [N] is the
    vehicle's total longitudinal tyre force, its pitch load transfer
    force h / L (wheelbase L, centre-of-mass height h of the vehicle data).
    Braking: outboard brakes (the brakes locked), the braking force at the
    contact point, this axle's share of it from the vehicle data; traction:
    the drive force at the wheel centre, all of it on this axle."""
    veh = kc.vehicle_data(model)
    L, h = veh["wheelbase"], veh["cg_height"]
    front = veh["axle"] == "front"
    share = veh["front_brake_share"] if front else 1.0 - veh["front_brake_share"]
    wheels = tuple(int(w) for w in model.topology.wheel_slots)
    eq0 = _design_position(model)
    r0 = np.asarray(eq0.r)
    u0 = np.zeros((2, 6))
    u0[:, 2] = np.asarray(eq0.fz)
    rows = []
    for sgn in (1.0, -1.0):
        a = sgn * force
        for manoeuvre in ("braking", "traction"):
            # pitch load transfer per wheel onto the front axle (braking) or the rear (traction)
            dfz = a * h / L / 2.0 * (1.0 if (manoeuvre == "braking") == front else -1.0)
            for with_force in (False, True):
                u = u0.copy()
                for s in range(2):
                    wc, R = r0[wheels[s], :3], _rot(r0[wheels[s], 3:])
                    c = _contact(wc, R)
                    F, at = np.array([0.0, 0.0, dfz]), c
                    u[s, :3] += F
                    u[s, 3:] += np.cross(at - wc, F)
                    if with_force:
                        if manoeuvre == "braking":     # rearward at the contact point
                            F, at = np.array([-share * a / 2.0, 0.0, 0.0]), c
                        else:                          # forward at the wheel centre
                            F, at = np.array([a / 2.0, 0.0, 0.0]), wc
                        u[s, :3] += F
                        u[s, 3:] += np.cross(at - wc, F)
                rows.append(u)
    wc, ok = _loaded_equilibria(model, jnp.asarray(np.array(rows)), wheels)
    wc, ok = np.asarray(wc), np.asarray(ok)
    assert ok.all()
    z = wc[..., 2].reshape(2, 2, 2, 2)          # (+-, manoeuvre, with force, side)
    dz = z[0] - z[1]
    anti = 100.0 * (1.0 - dz[:, 1] / dz[:, 0])  # (manoeuvre, side)
    return {"anti_pitch_braking": anti[0], "anti_pitch_traction": anti[1]}


@pytest.fixture(scope="module")
def dw_locked(dw_model):
    return kc.lock_brakes(dw_model, kc.DEFAULT_BRAKE_LOCK)


def test_geometry_metrics_match_finite_differences(dw_locked):
    """Every geometry metric of the double wishbone at the design position
    against central differences of the nonlinear model (the multi-link:
    tests/validation/test_kc_geometry_full.py)."""
    geometry_metrics_match_finite_differences("double_wishbone", dw_locked)


def geometry_metrics_match_finite_differences(axle, model):
    """Every geometry metric at the design position against central
    differences of the nonlinear model (the multi-link's steering axis is a
    virtual one: no hardpoints define it)."""
    M = _metrics(model)
    ref = oracle(model)
    ref.update(anti_pitch_by_loading(model))
    for name in GEOMETRY:
        # lengths to 1 um, angles to 1e-4 deg, ratios to 1e-5
        atol = {"deg": 1e-4, "mm": 1e-3, "mm/m": 1e-2, "1": 1e-5, "%": 1e-3, "deg/mm": 1e-6}[
            (kc.METRICS.get(name) or kc.AXLE_METRICS[name])[0]]
        if name.startswith("anti_pitch_"):
            # the definition by loading (elastic axle, loads at the contact point) and the
            # kinematic path angle differ by the axle's compliance: 0.02-0.15 points seen
            # (double wishbone, multi-link); a wrong brake share, L/h or sign is tens of points
            atol = 0.5
        np.testing.assert_allclose(M[name], ref[name], rtol=1e-5, atol=atol, err_msg=f"{axle}: {name}")
    # the anti-roll bar's share of the roll wheel rate is the difference of the two rates
    np.testing.assert_allclose(M["anti_roll_bar_wheel_rate"], M["roll_wheel_rate"] - M["wheel_rate"], rtol=1e-12)


def test_double_wishbone_steering_axis_is_the_ball_joint_line_with_rigid_joints(dw_locked):
    """Rigid-joint kinematics: with every bushing's translational stiffness
    1000-fold, the steering axis (travel locked by the lower link) must pass
    through the carrier-side points of the upper and lower ball joints."""
    model = dw_locked.replace_elements(bushing={"k": dw_locked.elements["bushing"]["k"].at[:, :3].multiply(1e3)})
    M, r = jax.device_get(_metrics_and_position(model))
    names = list(model.topology.bushing_names)
    m = model.topology.n_bodies
    sign = np.array([1.0, -1.0])
    for s, side in enumerate(kc.SIDES):
        def carrier_point(bushing):
            i = names.index(f"{bushing}_{side}")
            b = int(model.topology.bushing_bodies[i, 1])
            assert b != m
            return r[b, :3] + _rot(r[b, 3:]) @ np.asarray(model.elements["bushing"]["pos2"][i])
        U, N = carrier_point("upper_ball_joint"), carrier_point("lower_link_carrier")
        e = (U - N) / np.linalg.norm(U - N)
        w = int(model.topology.wheel_slots[s])
        c = _contact(r[w, :3], _rot(r[w, 3:]))
        g = N + (c[2] - N[2]) / e[2] * e
        np.testing.assert_allclose(M["design_caster"][s], np.degrees(np.arctan2(-e[0], e[2])), atol=0.01)
        np.testing.assert_allclose(M["design_kingpin_inclination"][s], np.degrees(np.arctan2(-sign[s] * e[1], e[2])),
                                   atol=0.01)
        np.testing.assert_allclose(M["design_caster_trail"][s], (g[0] - c[0]) * 1e3, atol=0.05)
        np.testing.assert_allclose(M["design_scrub_radius"][s], sign[s] * (c[1] - g[1]) * 1e3, atol=0.05)


