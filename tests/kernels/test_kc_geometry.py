"""K&C geometry (kernels/kc.py: steering axis, caster, kingpin, trail, scrub,
half-track change, roll centre, motion ratios, path angles, anti-dive /
anti-lift / anti-squat) against independent computations:

* finite differences of the full nonlinear model: the constrained
  equilibrium (wheel-centre heights prescribed) re-solved with the wheel
  heights and the steering joints' rack-side markers moved by +-h; poses,
  contact points, element lengths, screw axes and roll centres evaluated
  here with numpy / scipy (scipy's z-y'-x'' rotations, not the kernels');
* for the double wishbone, the rigid-joint kinematic steering axis: with the
  translational stiffness of every bushing raised 1000-fold the joints are
  ideal, and the steering axis must be the line through the carrier-side
  ball-joint points (upper ball joint, lower ball joint).
"""
import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import kernels  # noqa: F401  (float64)
from kernels import kc
from kernels.rotations import euler_to_matrix

DEG = 180.0 / np.pi
H = 1e-5          # m, wheel travel and rack travel of the finite differences
R_LOADED = kc.DEFAULT_LOADED_RADIUS


TOL = 1e-7       # N, N m: Newton limit (the residual's round-off floor is ~2e-8)


# One compiled function per stage, shared by the tests of this file (a K&C
# evaluation of the double wishbone is a compilation of a minute or more on
# 2 cores; a jit per test compiled it once per test): the design position,
# the K&C metrics at an equilibrium, a two-point parallel travel curve
_design_position = jax.jit(lambda model: kc.design_position(model, tol=TOL))
_kc_metrics = jax.jit(kc.kc_metrics)
_travel_curve = jax.jit(lambda model, eq, travel: kc.travel_curve(model, eq, np.array(travel), "parallel", tol=TOL),
                        static_argnums=2)     # the travel steps (a tuple) are static: the continuation's order


# the cornering steer metrics have their own finite-difference test (the rack test below)
GEOMETRY = [k for k in kc.GEOMETRY_METRICS if k not in ("anti_roll_bar_wheel_rate", "lateral_force_steer",
                                                         "aligning_torque_steer")] + \
    [k for k in kc.AXLE_METRICS if k not in kc.AXLE_COMPLIANCE_METRICS]


def test_vehicle_and_steering_joint_config_errors_name_the_field():
    from sweep.axle.builder import ModelError, vehicle_table
    with pytest.raises(ModelError, match=r"model.vehicle.axle = 'middle'"):
        vehicle_table({"axle": "middle", "wheelbase": 2.7, "cg_height": 0.5, "front_brake_share": 0.7})
    with pytest.raises(ModelError, match=r"model.vehicle.cg_height = -0.5"):
        vehicle_table({"axle": "front", "wheelbase": 2.7, "cg_height": -0.5, "front_brake_share": 0.7})
    with pytest.raises(ModelError, match=r"model.vehicle: missing front_brake_share"):
        vehicle_table({"axle": "front", "wheelbase": 2.7, "cg_height": 0.5})
    with pytest.raises(ModelError, match=r"model.vehicle.track: unknown key"):
        vehicle_table({"axle": "front", "wheelbase": 2.7, "cg_height": 0.5, "front_brake_share": 0.7,
                       "track": 1.5})
    from omegaconf import OmegaConf
    from sweep.core.runtime import CONFIG_DIR
    from sweep.axle.builder import build_tables
    cfg = OmegaConf.to_container(OmegaConf.load(f"{CONFIG_DIR}/model/double_wishbone.yaml"))
    cfg["steering_joint"] = "rack_joint"
    with pytest.raises(ModelError, match=r"model.steering_joint = 'rack_joint': no bushing rack_joint_left"):
        build_tables(cfg)


def test_steering_load_case_needs_a_steering_joint():
    from sweep.kinds.kinematics_compliance import KIND
    prepare_kc = KIND.plan
    from sweep.core.config import ConfigError
    from tests.jobs import cfg_of
    with pytest.raises(ConfigError, match="names no steering_joint"):
        prepare_kc(cfg_of("model=toy_trailing_arm", "loadcase=kc_steering"))
    with pytest.raises(ConfigError, match=r"loadcase.rack = \[0.05, -0.05\]|loadcase.rack"):
        prepare_kc(cfg_of("loadcase=kc_steering", "loadcase.rack=[0.05,-0.05]"))
    with pytest.raises(ConfigError, match=r"loadcase.ride_load = kerb: model 'toy_trailing_arm' has no "
                                          r"vehicle.kerb_wheel_load"):
        prepare_kc(cfg_of("model=toy_trailing_arm", "loadcase=kc_wheel_travel", "loadcase.ride_load=kerb"))
    with pytest.raises(ConfigError, match=r"loadcase.ride_load = -5"):
        prepare_kc(cfg_of("loadcase=kc_wheel_travel", "loadcase.ride_load=-5"))
    job = prepare_kc(cfg_of("loadcase=kc_wheel_travel", "loadcase.ride_load=laden"))
    assert job.case["ride_wheel_load"] == 5400.0


