"""Every K&C metric of the double wishbone against central differences of its nonlinear model loaded at +-1 N (full form, on demand). CI's form: the toy axle's metrics in both travel modes and its compliance against the same kind of oracle (tests/kernels/test_kc_finite_differences.py, tests/kernels/test_kc.py)."""
import jax
import numpy as np
import pytest
import kernels  # noqa: F401  (float64)
from kernels import kc
from tests.kernels.test_kc import DEG, G, SPRING_LINKS, _kc_cfg, _wheel, toy_spring_axle  # noqa: F401

pytestmark = pytest.mark.validation


@pytest.fixture(scope="module")
def dw_kc(dw_model):
    """The double wishbone with brakes locked: design position, metrics, and
    the nonlinear load cases at +-small amplitudes (one compiled function;
    the four force analyses and the two travel modes vmapped)."""
    model = kc.lock_brakes(dw_model, kc.DEFAULT_BRAKE_LOCK)
    R = kc.DEFAULT_LOADED_RADIUS
    dirs = np.stack([kc.load_direction(an, R) for an in kc.FORCE_ANALYSES])
    dzs = np.stack([kc.travel_direction(mode) for mode in kc.TRAVEL_MODES])

    @jax.jit
    def run(model):
        eq = kc.design_position(model)
        forces = jax.vmap(lambda D: kc.force_curve(model, eq, np.array([-1.0, 1.0]), D))(dirs)
        travel = jax.vmap(lambda dz: kc.travel_curve(model, eq, np.array([-1e-4, 1e-4]), dz))(dzs)
        return {"metrics": kc.kc_metrics(model, eq, R), "eq": eq, "forces": forces, "travel": travel}
    out = jax.device_get(run(model))
    for i, an in enumerate(kc.FORCE_ANALYSES):
        out[an] = jax.tree_util.tree_map(lambda a: a[i], out["forces"])
    for i, mode in enumerate(kc.TRAVEL_MODES):
        out[mode] = jax.tree_util.tree_map(lambda a: a[i], out["travel"])
    return model, out


def test_double_wishbone_metrics_match_finite_difference_loading(dw_kc):
    """Every metric (derivative at the design position) against central
    differences of the full nonlinear model loaded at +-1 N (+-1 N m for the
    aligning torque; +-0.1 mm of wheel travel), both sides."""
    model, out = dw_kc
    M = out["metrics"]
    assert bool(out["eq"].converged)
    sign = kc.SIDE_SIGN

    def fd(o, key, h):
        assert np.all(o["converged"])
        return (o[key][1] - o[key][0]) / (2 * h)
    checks = {}
    for an, per in (("lateral_force", 1e3), ("traction_force", 1e3), ("braking_force", 1e3),
                    ("aligning_torque", 1e2)):
        o = out[an]
        checks[f"toe_per_{an}"] = fd(o, "toe", 1.0) * per * DEG
        checks[f"camber_per_{an}"] = fd(o, "camber", 1.0) * per * DEG
        w = fd(o, "wheel_centre_displacement", 1.0) * per * 1e3
        if an == "lateral_force":
            checks["lateral_compliance"] = -sign * w[:, 1]
        elif an == "traction_force":
            checks["longitudinal_compliance"] = w[:, 0]
        elif an == "braking_force":
            checks["longitudinal_compliance_braking"] = -w[:, 0]
    for mode, pre in (("parallel", ""), ("opposite", "roll_")):
        o = out[mode]
        own = np.ones(2) if mode == "parallel" else sign
        checks[pre + ("bump_steer" if mode == "parallel" else "steer")] = fd(o, "toe", 1e-4) / own * DEG
        checks[pre + "camber_gain"] = fd(o, "camber", 1e-4) / own * DEG
        checks[pre + "wheel_rate"] = fd(o, "wheel_load", 1e-4)[:, 2] / own / 1e3
    # the geometry metrics have their own oracles (tests/kernels/test_kc_geometry.py);
    # the wind-up is checked by hand above and against the leaf-spring axle's beam model
    assert set(checks) == set(kc.METRICS) - {"design_wheel_load", "design_toe", "design_camber", "wind_up"} \
        - set(kc.GEOMETRY_METRICS)
    for name, value in checks.items():
        np.testing.assert_allclose(M[name], value, rtol=1e-5, err_msg=name)
    # a symmetric axle gives the same value on both sides (sign conventions per side)
    for name in kc.METRICS:
        np.testing.assert_allclose(M[name][0], M[name][1], rtol=1e-6, atol=1e-12, err_msg=name)
    # the design position: wheel centres at design height
    wc = np.asarray(out["eq"].r)[np.asarray(model.topology.wheel_slots), 2]
    np.testing.assert_allclose(wc, np.asarray(model.r_design)[np.asarray(model.topology.wheel_slots), 2],
                               atol=1e-12)
