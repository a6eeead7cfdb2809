"""Sobol' indices of a Saltelli design (sweep.design ``saltelli``,
sweep.sensitivity, sweep.results.plots.sobol_figure), without running a job.

Oracles: the Ishigami function's analytic indices (a = 7, b = 0.1; Saltelli
et al. 2008, Global Sensitivity Analysis: The Primer, section 4.7), the
design built through :func:`sweep.study.design.make_design` and evaluated on
the cube's parameter values; SALib's own sampler for the design's unit
sample; the design's block structure (row AB_j = row A but in column j)."""
import numpy as np
import pytest
import xarray as xr
import yaml

from sweep.study import design
from sweep.axle.params import HARDPOINT, Parameter, ParameterSet
from sweep.core.config import ConfigError
from sweep.sensitivity import SensitivityError, sobol_indices

# Ishigami, a = 7, b = 0.1, x_i uniform on [-pi, pi]
S1_ISHIGAMI = np.array([0.3139, 0.4424, 0.0])
ST_ISHIGAMI = np.array([0.5576, 0.4424, 0.2437])
S13_ISHIGAMI = 0.2437


def ishigami(X, a=7.0, b=0.1):
    return np.sin(X[:, 0]) + a * np.sin(X[:, 1]) ** 2 + b * X[:, 2] ** 4 * np.sin(X[:, 0])


def pi_parameters(k=3):
    return ParameterSet([Parameter(f"x{i + 1}", "spring.rate", None, (), "value", 0.0, -np.pi, np.pi, "linear")
                         for i in range(k)])


def cube(sw, pset, **outputs):
    """A cube as a sweep job writes it: the design's parameter values per
    variant, ``status``, the outputs (functions of the values) and the
    attributes the analysis reads (``config``, ``parameters``)."""
    X = design.make_design(sw, pset)
    data = {p: ("variant", X[:, i]) for i, p in enumerate(pset.names)}
    data["status"] = ("variant", np.zeros(len(X), np.int8))
    for name, f in outputs.items():
        y = f(X)
        data[name] = (("variant", "side") if y.ndim == 2 else ("variant",), y, {"units": "1"})
    return xr.Dataset(data, coords={"variant": np.arange(len(X))}, attrs={
        "config": yaml.safe_dump({"sweep": sw}), "parameters": list(pset.names), "model": "ishigami"})


SW = {"design": "saltelli", "n_base": 1024, "calc_second_order": True, "seed": 0}


@pytest.fixture(scope="module")
def ishigami_cube():
    return cube(SW, pi_parameters(), y=ishigami)


def test_ishigami_indices_equal_the_analytic_ones(ishigami_cube):
    assert ishigami_cube.sizes["variant"] == 1024 * (2 * 3 + 2)
    si = sobol_indices(ishigami_cube, "y")
    s1, st = si.S1.sel(output="y").values, si.ST.sel(output="y").values
    assert np.all(np.abs(s1 - S1_ISHIGAMI) < 0.05), s1
    assert np.all(np.abs(st - ST_ISHIGAMI) < 0.05), st
    s2 = si.S2.sel(output="y").values
    assert abs(s2[0, 2] - S13_ISHIGAMI) < 0.07 and abs(s2[0, 1]) < 0.05 and abs(s2[1, 2]) < 0.05, s2
    assert np.isnan(s2[1, 0]) and np.isnan(s2[0, 0])               # upper triangle only
    for k in ("S1_conf", "ST_conf"):                                # bootstrap half-widths of a sane size
        assert np.all((si[k].values > 0.005) & (si[k].values < 0.15)), si[k].values
    assert list(si.parameter.values) == ["x1", "x2", "x3"] and si.attrs["n_base"] == 1024
    # without second order: N(D+2) variants, the same first-order and total indices
    first = cube({**SW, "calc_second_order": False}, pi_parameters(), y=ishigami)
    assert first.sizes["variant"] == 1024 * 5
    s = sobol_indices(first, "y")
    assert "S2" not in s and np.all(np.abs(s.S1.values[0] - S1_ISHIGAMI) < 0.05)
    np.testing.assert_allclose(s.ST.values, si.ST.values)


def test_the_design_maps_hardpoints_and_log_scales_like_the_other_designs():
    """On a real parameter set (toy axle: a hardpoint offset, a log-scaled
    bushing factor, a linear spring factor) the design is SALib's unit
    sample mapped through each parameter's scale, in Saltelli's blocks."""
    from SALib.sample import sobol

    from sweep.axle.builder import model_from_config
    from sweep.axle.params import build_parameters
    from tests.jobs import cfg_of
    model = model_from_config(cfg_of("model=toy_trailing_arm").model)
    pset = build_parameters({
        "rear_z": {"target": "hardpoint", "points": ["PR"], "axis": "z", "bounds": [-0.01, 0.01]},
        "pivot": {"target": "bushing.stiffness", "elements": "pivot_front_*", "directions": "radial",
                  "bounds": [0.5, 2.0], "scale": "log"},
        "spring": {"target": "spring.rate", "elements": "spring_*", "bounds": [0.85, 1.15]}}, model)
    assert pset.params[0].target == HARDPOINT
    sw = {"design": "saltelli", "n_base": 8, "seed": 3}                      # calc_second_order: default true
    X = design.make_design(sw, pset)
    assert X.shape == (8 * (2 * 3 + 2), 3)
    Z = sobol.sample({"num_vars": 3, "names": ["a", "b", "c"], "bounds": [[0.0, 1.0]] * 3}, 8, seed=3)
    np.testing.assert_allclose(X[:, 0], -0.01 + 0.02 * Z[:, 0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(X[:, 1], np.exp(np.log(0.5) + Z[:, 1] * np.log(4.0)), rtol=1e-14)
    np.testing.assert_allclose(X[:, 2], 0.85 + 0.3 * Z[:, 2], rtol=1e-14)
    pset.check_values(X, "saltelli")                                         # within bounds
    blocks = X.reshape(8, 8, 3)
    for j in range(3):                      # AB_j (row 1 + j) = A (row 0) but in column j; B last
        keep = np.arange(3) != j
        np.testing.assert_array_equal(blocks[:, 1 + j, keep], blocks[:, 0, keep])
        assert np.all(blocks[:, 1 + j, j] == blocks[:, -1, j])
    np.testing.assert_array_equal(design.make_design(sw, pset), X)          # deterministic
    assert not np.array_equal(design.make_design({**sw, "seed": 4}, pset), X)


@pytest.mark.parametrize("over,message", [
    ({"n_base": 1000}, "sweep.n_base = 1000 must be a power of 2"),
    ({"n_base": 1}, "sweep.n_base = 1 must be a power of 2"),
    ({"n_base": None}, "sweep.n_base is missing"),
    ({"n_base": 2.5}, "sweep.n_base"),
    ({"calc_second_order": "yes"}, "sweep.calc_second_order"),
])
def test_a_bad_saltelli_config_is_refused_naming_the_field(over, message):
    sw = {k: v for k, v in {**SW, **over}.items() if v is not None}
    with pytest.raises(ConfigError, match=message) as err:
        design.make_design(sw, pi_parameters())
    assert "\n" not in str(err.value)


def test_failed_variants_are_refused_with_their_count_unless_a_fill_is_given(ishigami_cube):
    ds = ishigami_cube.copy(deep=True)
    ds["status"].values[[5, 700, 701]] = [1, 2, 2]
    ds["y"].values[[5, 700, 701]] = np.nan
    with pytest.raises(SensitivityError, match=r"3 of 8192 variants failed \(ok 8189, equilibrium_failed 1, "
                                               r"non_finite 2\).*fill="):
        sobol_indices(ds, "y")
    dropped = sobol_indices(ds, "y", fill="drop_blocks")     # base samples 0 and 87 left out
    assert int(dropped.n_failed.values[0]) == 3 and int(dropped.n_base_used.values[0]) == 1022
    assert np.all(np.abs(dropped.S1.values[0] - S1_ISHIGAMI) < 0.05)
    assert sobol_indices(ds, "y", fill="mean").attrs["fill"] == "mean"
    # a non-finite value in a variant whose status is ok: counted, refused as well
    ds = ishigami_cube.copy(deep=True)
    ds["y"].values[9] = np.inf
    with pytest.raises(SensitivityError, match="not finite in 1 of 8192 variants with status ok"):
        sobol_indices(ds, "y")
    with pytest.raises(SensitivityError, match="fill = 'zero'"):
        sobol_indices(ds, "y", fill="zero")


def test_sides_callables_and_the_cube_checks(ishigami_cube):
    ds = ishigami_cube.copy()
    X = np.stack([ds[p].values for p in ("x1", "x2", "x3")], 1)
    # a (variant, side) metric: left Ishigami, right x2 alone
    ds["metric"] = (("variant", "side"), np.stack([ishigami(X), X[:, 1]], 1), {"units": "deg/m"})
    ds = ds.assign_coords(side=["left", "right"])
    # a time series: its peak over time is the Ishigami function + 1 (the same indices)
    ds["series"] = (("variant", "time"), ishigami(X)[:, None] + np.array([0.0, 1.0, -2.0]))
    si = sobol_indices(ds, "metric")
    assert list(si.output.values) == ["metric[left]", "metric[right]"]
    assert list(si.units.values) == ["deg/m", "deg/m"]
    np.testing.assert_allclose(si.ST.sel(output="metric[right]").values, [0, 1, 0], atol=0.02)
    si = sobol_indices(ds, {"bump": "metric", "peak": lambda c: c.series.max("time")}, side="left")
    assert list(si.output.values) == ["bump", "peak"]
    np.testing.assert_allclose(si.S1.sel(output="peak").values, si.S1.sel(output="bump").values, atol=1e-9)
    np.testing.assert_allclose(si.ST.sel(output="peak").values, ST_ISHIGAMI, atol=0.05)
    with pytest.raises(SensitivityError, match="dimension\\(s\\) time besides variant"):
        sobol_indices(ds, "series")
    with pytest.raises(SensitivityError, match="'nope' is not a variable of the cube"):
        sobol_indices(ds, "nope")
    # a cube of another design, or shortened, is refused
    lhs = ds.assign_attrs(config=yaml.safe_dump({"sweep": {"design": "lhs", "n_variants": 8192}}))
    with pytest.raises(SensitivityError, match="design is 'lhs', not saltelli"):
        sobol_indices(lhs, "y")
    with pytest.raises(SensitivityError, match="has 8184 variants, its Saltelli design 8192"):
        sobol_indices(ds.isel(variant=slice(0, 8184)), "y")
    shuffled = ds.copy(deep=True)
    shuffled["x2"].values[1] = shuffled["x2"].values[0] + 0.1
    with pytest.raises(SensitivityError, match="not in Saltelli's order"):
        sobol_indices(shuffled, "y")


def test_constant_outputs_have_no_indices_and_the_figure_draws(ishigami_cube, tmp_path):
    from sweep.results.plots import png_intact, sobol_figure
    ds = ishigami_cube.assign(flat=("variant", np.full(ishigami_cube.sizes["variant"], 2.5), {"units": "mm"}))
    si = sobol_indices(ds, ["y", "flat"])
    assert np.all(np.isnan(si.S1.sel(output="flat").values)) and float(si.variance.sel(output="flat")) == 0.0
    fig = sobol_figure(si, tmp_path / "sobol.png")
    assert png_intact(tmp_path / "sobol.png")
    assert [a.get_title().split("\n")[0] for a in fig.axes[:2]] == ["y [1]", "flat [mm]"]
