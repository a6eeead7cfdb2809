"""The "K&C sheet" PNG of a K&C cube (sweep.results.plots.kc_sheet), on small
synthetic cubes with the dims / attrs of a real one (no K&C job: compiling
one is slow), with NaN for a failed variant, a failed load step and
channels a model cannot define (caster, kingpin inclination)."""
import matplotlib.image
import numpy as np
import pytest
import xarray as xr

from sweep.results.plots import kc_variants, kc_sheet

# the slow tier: seven full K&C sheets drawn (17 s on a slow day); the K&C jobs
# of the e2e tier draw the sheet of a real cube as well
pytestmark = pytest.mark.slow

SIDES = ["left", "right"]
STEP = {"wheel_travel": ("travel", "m", (-0.08, 0.08)), "lateral_force": ("force", "N", (-2000.0, 2000.0)),
        "aligning_torque": ("torque", "N m", (-200.0, 200.0)), "steering": ("rack_travel", "m", (-0.05, 0.05))}
METRIC_UNITS = {"design_wheel_load": "N", "design_toe": "deg", "design_camber": "deg", "bump_steer": "deg/m",
                "camber_gain": "deg/m", "wheel_rate": "N/mm", "roll_steer": "deg/m",
                "toe_per_lateral_force": "deg/kN", "lateral_compliance": "mm/kN",
                "toe_per_aligning_torque": "deg/(100 N m)", "camber_per_aligning_torque": "deg/(100 N m)",
                "design_caster": "deg", "design_kingpin_inclination": "deg", "toe_per_rack_travel": "deg/mm",
                "design_scrub_radius": "mm"}


def synthetic_cube(analysis="wheel_travel", n=6, steps=5, mode="parallel", failed=(2,), step_failed=(3,),
                   steering=False, seed=0):
    """A K&C cube like the K&C job kind (sweep.kinds.kinematics_compliance) writes: variant ``failed`` all NaN (status 1),
    variant ``step_failed`` NaN at its last step (status 3), caster / kingpin
    inclination all NaN unless ``steering``."""
    rng = np.random.default_rng(seed)
    dim, units, (lo, hi) = STEP[analysis]
    amp = np.linspace(lo, hi, steps)
    u = amp / np.abs(amp).max()                                   # -1 .. 1
    k = 1.0 + 0.3 * rng.random(n)                                  # variant spread
    side = np.array([1.0, 1.0])
    vs = (n, steps, 2)

    def curve(a, b=0.0, c=0.0):                                    # (variant, step, side)
        return (a * k[:, None, None] * u[None, :, None] + b * u[None, :, None] ** 2 + c) * side + np.zeros(vs)

    wcd = np.stack([curve(0.004), curve(0.01) * np.array([1.0, -1.0]), curve(0.08 if dim == "travel" else 0.002)],
                   axis=-1)
    load = np.zeros(vs + (6,))
    load[..., 2] = curve(1500.0, 200.0, 4000.0)
    if dim != "travel":
        load[..., 1] = amp[None, :, None]
    status = np.zeros(n, np.int8)
    converged = np.ones((n, steps), np.int8)
    data = {
        "wheel_centre_displacement": (("variant", dim, "side", "axis"), wcd, "m"),
        "toe": (("variant", dim, "side"), curve(0.004, -0.002), "rad"),
        "camber": (("variant", dim, "side"), curve(-0.01, 0.003, 0.01), "rad"),
        "wheel_load": (("variant", dim, "side", "component"), load, "N (fx, fy, fz); N m (mx, my, mz)"),
        "caster": (("variant", dim, "side"), curve(0.01, 0.0, 0.12) if steering else np.full(vs, np.nan), "rad"),
        "kingpin_inclination": (("variant", dim, "side"), curve(-0.01, 0.0, 0.15) if steering else
                                np.full(vs, np.nan), "rad"),
        "caster_trail": (("variant", dim, "side"), curve(0.005, 0.0, 0.02) if steering else np.full(vs, np.nan),
                         "m"),
        "scrub_radius": (("variant", dim, "side"), np.full(vs, np.nan), "m"),
        "half_track_change": (("variant", dim, "side"), curve(0.01, -0.004), "m"),
        "roll_centre_height": (("variant", dim), curve(0.05, 0.0, 0.1)[..., 0], "m"),
        "converged": (("variant", dim), converged, "1"),
    }
    if analysis == "steering":                                     # NaN below 0.5 deg of steer
        data["ackermann_error"] = (("variant", dim), np.where(np.abs(u) > 0.3, curve(0.01)[..., 0], np.nan),
                                   "rad")
        data["percent_ackermann"] = (("variant", dim), np.where(np.abs(u) > 0.3, curve(0, -20.0, 60.0)[..., 0],
                                                                np.nan), "%")
    for name, unit in METRIC_UNITS.items():
        val = (1.0 + rng.random((n, 1))) * side
        if name in ("design_caster", "design_kingpin_inclination") and not steering:
            val = np.full((n, 2), np.nan)
        data[name] = (("variant", "side"), val, unit)
    data["design_roll_centre_height"] = (("variant",), 100.0 * k, "mm")
    data["design_roll_centre_lateral"] = (("variant",), np.zeros(n), "mm")
    A = rng.normal(size=(n, 2, 6, 6)) * np.array([1e-6] * 3 + [1e-5] * 3)[:, None]
    C = np.einsum("vsij,vskj->vsik", A, A) + 1e-6 * np.eye(6)     # symmetric, positive definite
    data["compliance_matrix"] = (("variant", "side", "dof", "component"), C, "SI")
    for v in failed:
        status[v] = 1
        converged[v] = 0
    for v in step_failed:
        status[v] = 3
        converged[v, -1] = 0
    for name, (dims, val, unit) in data.items():
        val = np.asarray(val, float if name != "converged" else np.int8)
        if name != "converged":
            val = val.copy()
            val[list(failed)] = np.nan
            if len(dims) > 1 and dims[1] == dim:
                val[list(step_failed), -1] = np.nan
        data[name] = (dims, val, {"units": unit})
    ds = xr.Dataset(
        {name: (dims, val, attrs) for name, (dims, val, attrs) in data.items()},
        coords={"variant": np.arange(n), dim: (dim, amp, {"units": units}), "side": SIDES,
                "axis": ["x", "y", "z"], "component": ["fx", "fy", "fz", "mx", "my", "mz"],
                "dof": ["x", "y", "z", "rx", "ry", "rz"]})
    ds["spring_rate"] = ("variant", k, {"units": "1"})             # a swept parameter
    ds["status"] = ("variant", status, {"flag_values": [-1, 0, 1, 2, 3]})
    ds["equilibrium_iterations"] = ("variant", np.full(n, 5, np.int32))
    ds.attrs.update(model="toy_axle", cube_kind="kc", analysis=analysis,
                    travel_mode=mode if analysis == "wheel_travel" else "", parameters=["spring_rate"])
    return ds


def check_png(path):
    img = matplotlib.image.imread(str(path))
    assert img.ndim == 3 and img.shape[2] in (3, 4)
    h, w = img.shape[:2]
    assert 900 <= h <= 2000 and 1300 <= w <= 2800, img.shape
    assert 1.3 < w / h < 1.5                                      # A4 landscape
    assert float(np.var(img[..., :3])) > 0.0                      # not blank
    return img


@pytest.mark.parametrize("analysis,mode,steering", [
    ("wheel_travel", "parallel", False),
    ("wheel_travel", "opposite", True),
    ("lateral_force", "", False),
    ("aligning_torque", "", True),
    ("steering", "", True),
])
def test_kc_sheet_png(tmp_path, analysis, mode, steering):
    ds = synthetic_cube(analysis, mode=mode or "parallel", steering=steering)
    path = tmp_path / f"{analysis}.png"
    assert kc_sheet(ds, str(path)) == str(path)
    check_png(path)


def test_kc_sheet_edge_cases(tmp_path):
    """Variant 0 failed, a single variant, every variant failed, and many
    variants with a small ``max_variants``: a sheet each, no exception."""
    cases = {
        "ref_failed": synthetic_cube("lateral_force", failed=(0,), step_failed=()),
        "single": synthetic_cube("wheel_travel", n=1, failed=(), step_failed=()),
        "all_failed": synthetic_cube("wheel_travel", n=3, failed=(0, 1, 2), step_failed=()),
        "many": synthetic_cube("lateral_force", n=40, failed=(5, 7), step_failed=(9,)),
    }
    for name, ds in cases.items():
        path = tmp_path / f"{name}.png"
        kc_sheet(ds, str(path), max_variants=4)
        check_png(path)


def test_kc_variants_pick():
    ds = synthetic_cube("lateral_force", n=40, failed=(0, 7), step_failed=(9,))
    ref, others = kc_variants(ds, 5, key="toe_per_lateral_force")
    assert ref == 1                                                # variant 0 failed: first good one
    assert len(others) == 5 and ref not in others and 7 not in others
    assert len(set(others.tolist())) == 5
    ok = synthetic_cube("wheel_travel", n=4, failed=(), step_failed=())
    ref, others = kc_variants(ok, 12)
    assert ref == 0 and sorted(others.tolist()) == [1, 2, 3]
