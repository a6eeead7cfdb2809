"""The cubes of every job kind are CF- and pint-clean (docs/result_cube.md,
"CF conventions and units"): global ``Conventions``, a ``long_name`` on
every coordinate, ``units`` (parsed by pint) or ``flag_values`` on every
data variable, ``ds.pint.quantify()`` without an error, cf_xarray finds the
time axis; the mixed force / torque tables stay one variable (the public
schema) with units "none" and split by unit with ``sweep.results.cube.split_loads``.

No job runs: each cube is laid out from the kind's own plan (validated
config, no compute) as ``sweep.engine.run`` lays it out (``store_spec``,
the kind's attributes), created by ``sweep.results.store`` and its first chunk
written with placeholder values, so the attributes checked are the ones a
job writes. Oracle: the CF / pint rules themselves (``cube_schema.cf_problems``),
pint's parser and the public schema (``cube_schema.problems``)."""
import numpy as np
import pytest
import xarray as xr

from sweep.results import schema as cube_schema
from tests.jobs import cfg_of

pint_xarray = pytest.importorskip("pint_xarray")
cf_xarray = pytest.importorskip("cf_xarray")

# swept parameters of every units kind: scale factor, value in N/m, a hardpoint
# offset in m, a value over a translational and a rotational direction (mixed)
PARAMS = ["~sweep.parameters",
          "+sweep.parameters.pf={target: bushing.stiffness, elements: 'pivot_front_*', directions: radial, "
          "bounds: [0.5, 2.0], scale: log}",
          "+sweep.parameters.rm={target: bushing.stiffness, elements: 'rear_mount_*', directions: [x], "
          "mode: value, nominal: 1.0e+6, bounds: [5.0e+5, 2.0e+6]}",
          "+sweep.parameters.hp={target: hardpoint, points: [PR], axis: z, bounds: [-0.01, 0.01]}",
          "+sweep.parameters.mix={target: bushing.stiffness, elements: 'rear_mount_*', directions: [y, rz], "
          "mode: value, nominal: 1.0e+6, bounds: [5.0e+5, 2.0e+6]}",
          "sweep=lhs", "sweep.n_variants=4", "sweep.chunk_size=2", "sweep.progress=false"]
KINDS = {
    "time_response": ["loadcase.t_start=4.99", "loadcase.t_end=5.01", "sweep.start=null", "sweep.every=null"],
    "kc": ["loadcase=kc_wheel_travel", "loadcase.steps=3"],
    "modes": ["loadcase=modes", "loadcase.n_modes=4"],
    "frf": ["loadcase=frf", "loadcase.frequencies.n=4"],
}
EXPECTED_UNITS = {"pf": "1", "rm": "N/m", "hp": "m", "mix": "none"}


def laid_out_cube(path, overrides):
    """The cube of a job laid out and created as sweep.engine.run does (no
    compute), its first chunk written with zeros and status ok."""
    from sweep.results import store as cube_store
    from sweep.engine import layout
    from sweep.kinds import kind_of
    cfg = cfg_of("model=toy_trailing_arm", *PARAMS, *overrides, f"output.path={path}")
    kind = kind_of(cfg)
    plan = kind.plan(cfg)
    attrs = {**kind.attrs(plan, "config: placeholder"), "cube_kind": kind.name}
    store, created = cube_store.create_store(str(path), layout.store_spec(plan), attrs, "identity",
                                             chunk=plan.chunk)
    assert created
    a, b = store.region(0)
    store.write_chunk(0, a, {name: np.zeros((b - a,) + store.group[name].shape[1:], store.group[name].dtype)
                             for name in store.arrays})
    return kind


def published_problems(path):
    """Problems the published checker (../shared/tools/check_cube.py) finds,
    or None in a clone without it."""
    import importlib.util
    import os

    from tests.conftest import CHECK_CUBE
    if not os.path.exists(CHECK_CUBE):
        return None
    spec = importlib.util.spec_from_file_location("check_cube", CHECK_CUBE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with xr.open_zarr(path) as ds:
        return list(mod.problems(ds))


@pytest.fixture(scope="module")
def cubes(tmp_path_factory):
    root = tmp_path_factory.mktemp("cubes")
    return {name: (root / f"{name}.zarr", laid_out_cube(root / f"{name}.zarr", over))
            for name, over in KINDS.items()}


@pytest.mark.parametrize("name", list(KINDS))
def test_cube_is_cf_and_pint_clean(cubes, name):
    path, kind = cubes[name]
    ds = xr.open_zarr(path)
    assert cube_schema.check(path, kind.channels) == []             # the public schema still holds
    published = published_problems(path)
    assert published in (None, []), published
    assert list(cube_schema.cf_problems(ds)) == []
    assert ds.attrs["Conventions"].startswith("CF-")
    for c in ds.coords:
        assert ds[c].attrs.get("long_name"), c
    for v in ds.data_vars:
        assert "units" in ds[v].attrs or "flag_values" in ds[v].attrs, v
    # quantify: every variable with a unit is a quantity, the mixed ones stay plain
    q = ds.pint.quantify()
    units = {v: str(q[v].pint.units) if q[v].pint.units is not None else None for v in q.variables}
    assert units["equilibrium_iterations"] == "dimensionless" and units["status"] is None
    assert {p: ds[p].attrs["units"] for p in EXPECTED_UNITS} == EXPECTED_UNITS
    assert units["rm"] == "newton / meter" and units["hp"] == "meter" and units["mix"] is None
    assert "valid_range" in ds.pf.attrs and "bounds" not in ds.pf.attrs      # CF reserves bounds
    assert "N m/rad" in ds.mix.attrs["comment"]
    repr(ds.cf)                                                      # cf_xarray describes it
    assert (ds.status.cf == "ok").values.tolist() == [True, True, False, False]   # flag_meanings
    if name == "time_response":
        assert ds.cf.axes == {"T": ["time"]} and ds.cf.coordinates == {"time": ["time"]}
        assert ds.cf["T"].attrs["units"] == "s"
        assert units["toe"] == "radian" and units["wheel_centre_displacement"] == "meter"
        assert units["bushing_force"] is None and ds.bushing_force.attrs["units"] == "none"
        assert "N m (mx, my, mz)" in ds.bushing_force.attrs["comment"]
    elif name == "kc":
        assert units["travel"] == "meter" and units["toe_per_aligning_torque"] == "degree / hectonewton / meter"
        assert units["wheel_load"] is None and units["compliance_matrix"] is None
        assert "rad/(N m)" in ds.compliance_matrix.attrs["comment"]
    elif name == "modes":
        assert units["frequency"] == "hertz" and units["mode"] == "dimensionless"
    else:
        assert units["frequency"] == "hertz" and units["wheel_centre_receptance_real"] == "meter / newton"
        assert units["toe_receptance_imag"] == "radian / newton" and units["mount_transfer_real"] is None
        assert "N m/N (mx, my, mz)" in ds.mount_transfer_real.attrs["comment"]


@pytest.mark.parametrize("name, force, moment", [("time_response", "bushing_force", "bushing_moment"),
                                                 ("kc", "wheel_load", "wheel_moment")])
def test_split_loads_quantifies_the_loads(cubes, name, force, moment):
    """sweep.results.cube.split_loads: the mixed load table as a force [N] and a
    torque [N m] variable, lazy views of the stored one."""
    from sweep.results.cube import split_loads
    ds = xr.open_zarr(cubes[name][0])
    loads = split_loads(ds)
    q = loads.pint.quantify()
    assert str(q[force].pint.units) == "newton" and str(q[moment].pint.units) == "meter * newton"
    assert list(loads.force_component.values) == ["fx", "fy", "fz"]
    assert list(loads.moment_component.values) == ["mx", "my", "mz"]
    assert list(cube_schema.cf_problems(loads.assign_attrs(ds.attrs), quantify=False)) == []
    np.testing.assert_array_equal(loads[moment].values, ds[force].values[..., 3:])
    # K&C: the compliance matrix keeps the component dimension
    assert ("component" in loads.dims) == (name == "kc")


def test_cf_problems_finds_what_is_missing():
    """The CF / pint check finds each kind of deviation (the oracle of the tests above)."""
    ds = xr.Dataset({"a": ("x", [1.0], {"units": "deg/(100 N m)"}), "b": ("x", [1.0])},
                    coords={"x": ("x", [0], {"units": "1"})})
    found = list(cube_schema.cf_problems(ds))
    assert any("Conventions" in p for p in found)
    assert any("coordinate 'x' has no long_name" in p for p in found)
    assert any("'b' has neither units nor flag_values" in p for p in found)
    assert any("pint cannot parse units 'deg/(100 N m)'" in p for p in found)
    assert any(p.startswith("ds.pint.quantify() fails") for p in found)


def test_legacy_units_of_older_cubes_still_pass_the_public_checks():
    """A cube written before the units became pint-parseable (mixed-unit
    text, deg/(100 N m)) still passes the channel checks (sweep.verify)."""
    from sweep.engine.layout import Channel
    table = [Channel("bushing_force", ("component",), "none", "x"), Channel("t", (), "deg/(hN m)", "y")]
    ds = xr.Dataset({"bushing_force": (("variant", "component"), np.zeros((1, 6)),
                                       {"units": "N (fx, fy, fz); N m (mx, my, mz): see component_units"}),
                     "t": ("variant", [0.0], {"units": "deg/(100 N m)"}),
                     "status": ("variant", np.zeros(1, np.int8), {"flag_values": [0], "flag_meanings": "ok"})},
                    coords={"variant": [0]}, attrs={"cube_kind": "other", "n_bodies": 1, "n_force_elements": 1,
                                                    "n_dof": 6})
    assert list(cube_schema.problems(ds, table)) == []
    ds["t"].attrs["units"] = "deg"
    assert list(cube_schema.problems(ds, table)) == ["variable 't' has units 'deg', expected 'deg/(hN m)'"]
