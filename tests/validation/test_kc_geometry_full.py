"""The K&C geometry, full forms (on demand): the multi-link's design-position metrics, and beyond the design position of the double wishbone the rack option and cornering steer, the steering curve, the travel curve off design and the kerb load against central differences of the nonlinear model, and the toy axle's NaN metrics without steering joint or vehicle data. CI's form: the design-position geometry of the double wishbone against the same oracle (tests/kernels/test_kc_geometry_axles.py)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import kernels  # noqa: F401  (float64)
from kernels import kc
from tests.kernels.test_kc_geometry import DEG, GEOMETRY, H, R_LOADED, TOL, _design_position, _kc_metrics, _travel_curve  # noqa: F401
from tests.kernels.test_kc_geometry_axles import geometry_metrics_match_finite_differences, _contact, _metrics, _metrics_and_position, _p2p_length, _rot, _solve_batch, dw_locked, oracle  # noqa: F401

pytestmark = pytest.mark.validation


def test_travel_curve_geometry_matches_finite_differences_off_design(dw_locked):
    """The per-step geometry of a wheel-travel curve at 20 mm bump against the
    finite-difference oracle around the equilibrium there; the half-track
    change against the contact points evaluated here."""
    model = dw_locked
    curve = jax.device_get(_travel_curve(model, _design_position(model), (0.0, 0.02)))
    assert curve["converged"].all()
    ref = oracle(model, base=(0.02, 0.02))
    ref0 = oracle(model)
    for name, scale in (("caster", 1 / DEG), ("kingpin_inclination", 1 / DEG), ("caster_trail", 1e-3),
                        ("scrub_radius", 1e-3)):
        np.testing.assert_allclose(curve[name][1], ref["design_" + name] * scale, rtol=1e-5, atol=1e-6,
                                   err_msg=name)
    np.testing.assert_allclose(curve["roll_centre_height"][1], ref["design_roll_centre_height"] * 1e-3, atol=1e-6)
    half = np.array([1.0, -1.0]) * (ref["contact_point"][:, 1] - ref0["contact_point"][:, 1])
    np.testing.assert_allclose(curve["half_track_change"][1], half, atol=1e-9)
    np.testing.assert_allclose(curve["half_track_change"][0], 0.0, atol=1e-12)
    # the roll centre moves with travel (migration), and the design point equals the metric
    np.testing.assert_allclose(curve["roll_centre_height"][0] * 1e3, ref0["design_roll_centre_height"], atol=1e-3)
    assert abs(curve["roll_centre_height"][1] - curve["roll_centre_height"][0]) > 1e-3


def test_models_without_steering_joint_or_vehicle_data_give_nan_not_failure():
    """The toy trailing arm names no steering joint and no vehicle: its
    steering and anti-pitch metrics are NaN by design (kc.OPTIONAL_METRICS)
    and every other metric is finite."""
    from omegaconf import OmegaConf
    from sweep.axle.builder import model_from_config
    from sweep.core.runtime import CONFIG_DIR
    model = kc.lock_brakes(model_from_config(OmegaConf.load(f"{CONFIG_DIR}/model/toy_trailing_arm.yaml")),
                           kc.DEFAULT_BRAKE_LOCK)
    M = _metrics(model)
    for name in (*kc.METRICS, *kc.AXLE_METRICS):
        nan = name in ("design_caster", "design_kingpin_inclination", "design_caster_trail", "design_scrub_radius",
                       "toe_per_rack_travel", "anti_pitch_braking", "anti_pitch_traction")
        assert np.all(np.isnan(M[name])) == nan, name
        assert nan or np.all(np.isfinite(M[name])), name


def test_steering_curve_slope_ackermann_and_held_heights(dw_locked):
    """kc_steering on the double wishbone: the toe slope of the nonlinear
    rack-travel curve at centre (central difference, +-10 um) equals the
    toe_per_rack_travel metric (itself checked above); the wheel heights stay
    at design; the Ackermann figures at 30 mm of rack travel equal the
    textbook formula evaluated here from the curve's toe angles."""
    model = dw_locked
    rack = np.array([-H, 0.0, H, 0.03])
    eq = _design_position(model)
    curve, M, c0 = jax.device_get((jax.jit(lambda m, eq: kc.steering_curve(m, eq, rack, tol=TOL))(model, eq),
                                   _kc_metrics(model, eq, R_LOADED), kc.contact_points(model, eq.r, R_LOADED)))
    assert curve["converged"].all()
    sign = np.array([1.0, -1.0])
    # both joints move +y together; the metric is per side's own joint
    # (outboard sense): the other joint's share reaches this wheel through
    # the anti-roll bar and the struts, measured 0.07 %
    slope = np.degrees((curve["toe"][2] - curve["toe"][0]) / (2 * H)) / 1e3
    np.testing.assert_allclose(slope, sign * M["toe_per_rack_travel"], rtol=2e-3)
    assert not np.allclose(slope, sign * M["toe_per_rack_travel"], rtol=1e-5)
    np.testing.assert_allclose(curve["wheel_centre_displacement"][:, :, 2], 0.0, atol=1e-9)
    # Ackermann at 30 mm: rack left turns the left wheel toe-in (right turn): inner = right
    toe = curve["toe"][3]
    d_left, d_right = -toe[0], toe[1]
    assert d_left + d_right < 0                              # a right turn
    di, do = abs(d_right), abs(d_left)
    veh = kc.vehicle_data(model)
    track = c0[0, 1] - c0[1, 1]
    do_ack = np.arctan(1.0 / (1.0 / np.tan(di) + track / veh["wheelbase"]))
    np.testing.assert_allclose(curve["ackermann_error"][3], do - do_ack, rtol=1e-9)
    np.testing.assert_allclose(curve["percent_ackermann"][3], (di - do) / (di - do_ack) * 100, rtol=1e-9)
    assert np.isnan(curve["ackermann_error"][1])              # straight ahead: undefined


@pytest.fixture(scope="module")
def dw_rack():
    from omegaconf import OmegaConf
    from sweep.core.runtime import CONFIG_DIR
    from sweep.axle.builder import model_from_config
    cfg = OmegaConf.load(f"{CONFIG_DIR}/model/double_wishbone.yaml")
    cfg.steering_rack.enabled = True
    return kc.lock_brakes(model_from_config(cfg), kc.DEFAULT_BRAKE_LOCK)


def test_steering_rack_option_and_cornering_steer_match_finite_differences(dw_rack, dw_locked):
    """The rack option adds one body and one bushing, moves the inner tie-rod
    joints onto the rack; lateral-force and aligning-torque steer with both
    wheels loaded in the same direction (the rack carries the difference)
    against central differences of the nonlinear model, with and without
    the rack; the rack makes the aligning-torque steer softer."""
    topo = dw_rack.topology
    assert topo.n_bodies == dw_locked.topology.n_bodies + 1
    assert topo.n_force_elements == dw_locked.topology.n_force_elements + 1
    names = list(topo.bushing_names)
    rack = list(topo.body_names).index("steering_rack")
    for side in kc.SIDES:
        assert int(topo.bushing_bodies[names.index(f"tie_rod_inner_{side}"), 1]) == rack
    assert "steering rack on" in topo.tables["steering_rack"]
    R = R_LOADED
    per = {"lateral_force_steer": (np.array([0, 1.0, 0, R, 0, 0]), 1e3),
           "aligning_torque_steer": (np.array([0, 0, 0, 0, 0, 1.0]), 1e2)}
    h = 1.0

    @jax.jit
    def loaded_toe(model, eq):
        u0 = kc.design_loads(eq)
        us = jnp.stack([u0 + a * jnp.tile(U, (2, 1)) for U, _ in per.values() for a in (h, -h)])
        return jax.vmap(lambda u: kc.metrics.toe_camber(model, kc.static_equilibrium(
            model, u, r_start=eq.r, tol=TOL, max_iter=80).r)[0])(us)
    values = {}
    for label, model in (("rack", dw_rack), ("no rack", dw_locked)):
        eq = _design_position(model)
        M, toe = jax.device_get((_kc_metrics(model, eq, R), loaded_toe(model, eq)))
        for i, (name, (_, scale)) in enumerate(per.items()):
            steer = -np.array([1.0, -1.0]) * (toe[2 * i] - toe[2 * i + 1]) / (2 * h) * scale * DEG
            np.testing.assert_allclose(M[name], steer, rtol=1e-5, err_msg=f"{label}: {name}")
        values[label] = M
    assert values["rack"]["aligning_torque_steer"][0] > 2 * values["no rack"]["aligning_torque_steer"][0]


def test_kc_at_kerb_load_matches_the_design_travel_curve_there(dw_locked):
    """K&C at kerb load (loadcase.ride_load=kerb): the start position is the
    static equilibrium under the kerb wheel load (checked against a force-
    control equilibrium solved here), and its bump steer, camber gain and
    wheel rate equal the central-difference slopes of the design position's
    own parallel travel curve at that height (an independent path: the
    curve starts from the design height)."""
    model = dw_locked
    load = kc.vehicle_data(model)["kerb_wheel_load"]
    slots = np.asarray(model.topology.wheel_slots)
    h = 1e-5

    @jax.jit
    def run(model):
        eq_k = kc.ride_position(model, load, tol=TOL)
        eqf = kc.static_equilibrium(model, jnp.zeros((2, 6)).at[:, 2].set(load), tol=TOL)
        return eq_k, eqf.r
    eq_k, r_force = run(model)
    eq_d = _design_position(model)
    M = _kc_metrics(model, eq_k, R_LOADED)
    eq_k, r_force, M, eq_d = jax.device_get((eq_k, r_force, M, eq_d))
    s_k = eq_k.r[slots, 2].mean() - eq_d.r[slots, 2].mean()
    assert eq_k.converged
    np.testing.assert_allclose(eq_k.fz, load, rtol=1e-9)
    np.testing.assert_allclose(eq_k.r[slots, :3], r_force[slots, :3], atol=1e-9)
    assert s_k < -0.005           # lighter than the design load: the wheel hangs lower (rebound)
    curve = jax.device_get(_travel_curve(model, _design_position(model), (float(s_k - h), float(s_k + h))))
    assert curve["converged"].all()
    np.testing.assert_allclose(M["bump_steer"], np.degrees(np.diff(curve["toe"], axis=0)[0] / (2 * h)), rtol=1e-4)
    np.testing.assert_allclose(M["camber_gain"], np.degrees(np.diff(curve["camber"], axis=0)[0] / (2 * h)),
                               rtol=1e-4)
    np.testing.assert_allclose(M["wheel_rate"], np.diff(curve["wheel_load"][:, :, 2], axis=0)[0] / (2 * h) / 1e3,
                               rtol=1e-4)


def test_geometry_metrics_of_the_multilink_match_finite_differences(ml_model):
    geometry_metrics_match_finite_differences("multilink", kc.lock_brakes(ml_model, kc.DEFAULT_BRAKE_LOCK))

