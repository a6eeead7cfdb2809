"""A job with a force element of the user's own, loaded through the model
configuration alone (``+model.elements=[module:ATTRIBUTE]`` and its section
on the command line; nothing in ``kernels/`` edited): a torsion spring
between the trailing arm and the chassis at the front pivot, its stiffness a
sweep parameter. The job runs, every variant is ok, and the spring acts: the
stiffer it is, the less the arm winds up under the longitudinal step (the
arm's pitch is what the spring resists; the law itself is checked against
oracles in tests/kernels/test_element_registry*.py). The generated backend
runs the same element to the same numbers. The group declares an output,
so its torque is a channel of the cube. A second group of the test suite's,
a tyre that reads the road under it (a time-varying input of its own,
tests/kernels/test_group_input.py), is in the same model: the road moves
the wheels, on both backends alike."""
import numpy as np
import xarray as xr

from tests.jobs import cli

TOY = ["model=toy_trailing_arm", "loadcase.t_start=4.98", "loadcase.t_end=5.1", "output.every=10",
       "sweep=grid", "sweep.start=null", "sweep.every=null", "~sweep.parameters", "sweep.progress=false",
       "integrator.backend=xla"]
ELEMENT = ["+model.elements=['tests.sweep.user_elements:TORSION_SPRING', 'tests.kernels.test_group_input:ROAD_TYRE']",
           # a tyre of the user's own on a road of its own: an element group with a time-varying input
           "+model.per_side.test_road_tyres={tyre: {bodies: [chassis, wheel], at: WC, rate: 200000.0, "
           "damping: 150.0, omega: [8.17, 25.76, 69.1], cos: [0.004, 0.0015, -0.0005], sin: [-0.001, 0.002, 0.0004]}}",
           "+model.per_side.user_torsion_springs={twist: {bodies: [arm, chassis], at: PF, axis: [0, 1, 0], "
           "stiffness: 2000.0, damping: 5.0}}",
           "+sweep.parameters.twist={target: user_torsion_spring.stiffness, elements: '*', bounds: [0.1, 10.0], "
           "scale: log}", "sweep.levels=3"]


def test_a_job_runs_with_the_users_element_and_sweeps_it(tmp_path):
    path = tmp_path / "user_element.zarr"
    proc = cli(*TOY, *ELEMENT, f"output.path={path}", f"hydra.run.dir={tmp_path}/hydra")
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    ds = xr.open_zarr(path)
    assert list(ds.status.values) == [0, 0, 0]
    k = ds.twist.values
    assert np.all(np.diff(k) > 0)                                  # 0.1, 1, 10 x nominal
    # the arm's pitch follows from the wheel centre's x and z; its swing under the
    # step shrinks as the torsion spring stiffens
    swing = np.abs(ds.wheel_centre_displacement.sel(side="left", axis="x").values).max(axis=1)
    assert np.all(np.diff(swing) < 0), swing
    assert swing[0] > 1.02 * swing[-1], swing
    # the group's declared output is a channel of the cube: its torque on the arm, vehicle frame
    f = ds.user_torsion_spring_force
    assert f.dims == ("variant", "time", "user_torsion_spring", "component")
    assert list(ds.user_torsion_spring.values) == ["twist_left", "twist_right"]
    assert np.all(f.sel(component=["fx", "fy", "fz"]).values == 0.0)
    my = np.abs(f.sel(component="my").values).max(axis=(1, 2))
    assert np.all(my > 1.0) and np.all(np.diff(my) > 0), my   # stiffer spring: more of the load
    heave = np.ptp(ds.wheel_centre_displacement.sel(axis="z").values, axis=1)
    assert np.all(heave > 2e-3), heave       # the road under the user's tyre (the step alone: below 0.3 mm)

    gen_path = tmp_path / "user_element_generated.zarr"
    proc = cli(*TOY[:-1], "integrator.backend=generated", *ELEMENT, f"output.path={gen_path}",
               f"hydra.run.dir={tmp_path}/hydra_generated")
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    assert "generated backend (" in proc.stdout + proc.stderr
    gen = xr.open_zarr(gen_path)
    assert list(gen.status.values) == [0, 0, 0]
    for var in ("wheel_centre_displacement", "bushing_force", "user_torsion_spring_force"):
        a, b = gen[var].values, ds[var].values
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-9 * np.abs(b).max())
