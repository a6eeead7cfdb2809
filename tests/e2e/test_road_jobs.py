"""The road load cases as jobs: ``loadcase=rough_road`` (sweep/kinds/rough_road.py)
on the toy axle - a design of variants -> one cube that the public schema
accepts, with the road statistics added; the tyres carry the wheel load on
average; the RMS and PSDs agree with the time histories in the cube; a
rough enough road lifts a wheel off (flagged); bad road inputs are one
line naming the key - and ``loadcase=frf`` with road inputs, whose static
end equals finite differences of the static equilibrium under a raised
road. The damage-equivalent load against a closed form."""
import logging

import numpy as np
import pytest
import xarray as xr

from tests.jobs import cfg_of

ROAD = ["model=toy_trailing_arm", "loadcase=rough_road", "loadcase.t_end=5.0", "loadcase.resolution=1.0",
        "sweep.progress=false", "cache.enabled=false"]
LHS = ["sweep.design=lhs", "sweep.n_variants=3", "sweep.chunk_size=2",
       "+sweep.parameters.pivots={target: bushing.stiffness, elements: '*', directions: [radial], "
       "bounds: [0.5, 2.0]}"]


@pytest.fixture(scope="module")
def road_cube(tmp_path_factory):
    from sweep import app
    path = tmp_path_factory.mktemp("road") / "road.zarr"
    cfg = cfg_of(*ROAD, *LHS, f"output.path={path}")
    assert app.main(cfg, progress=False) == 0
    return cfg, path


def test_rough_road_cube(road_cube):
    """Schema, variables and the physics they must show: the tyre bushings
    are in the cube and not swept (the '*' pattern leaves them out); the
    mean contact force is the static wheel load; the RMS is the time
    history's; the road's own PSD follows the ISO 8608 target; the DELs are
    finite and positive; both figures are written."""
    from kernels import road
    from sweep.results import schema as cube_schema
    cfg, path = road_cube
    ds = xr.open_zarr(path)
    assert list(cube_schema.problems(ds)) == []
    assert ds.attrs["cube_kind"] == "time_response" and ds.attrs["job_kind"] == "rough_road"
    assert list(ds.status.values) == [0, 0, 0]
    assert {"tyre_left", "tyre_right"} <= set(ds.bushing.values.astype(str))
    assert set(ds.mount.values.astype(str)) == {"pivot_front_left", "rear_mount_left", "pivot_front_right",
                                                "rear_mount_right"}
    t = ds.time.values
    sel = t >= 1.0
    contact = ds.tyre_contact_force.values[:, sel]
    np.testing.assert_allclose(contact.mean(axis=1), 5000.0, rtol=0.01)
    # the tyre law itself: static load + k_t (road - wheel) + c_t (their rates), the
    # wheel's rate by central differences of the cube's displacement
    z_road = ds.road_height.values
    wcz = ds.wheel_centre_displacement.values[..., 2]
    dt = float(t[1] - t[0])
    law = 5000.0 + 250e3 * (z_road[None] - wcz) + 100.0 * (np.gradient(z_road, dt, axis=0)[None]
                                                           - np.gradient(wcz, dt, axis=1))
    np.testing.assert_allclose(ds.tyre_contact_force.values[:, 2:-2], law[:, 2:-2], atol=2.0)
    rms = contact.std(axis=1)
    np.testing.assert_allclose(ds.rms_tyre_contact_force.values, rms, rtol=1e-9)
    assert (rms > 100).all() and len(np.unique(np.round(rms[:, 0], 3))) == 3      # the variants differ
    f = ds.frequency.values
    band = (f >= 2) & (f <= 40)
    ratio = ds.psd_road.values[band] / road.time_psd(f[band], road.CLASSES["C"], 20.0)[:, None]
    assert 0.7 < np.median(ratio) < 1.3
    np.testing.assert_allclose(ds.psd_road_target.values, road.time_psd(f, 256e-6, 20.0), rtol=1e-12)
    assert np.all(np.isfinite(ds.damage_equivalent_load.values)) and np.all(ds.damage_equivalent_load.values > 0)
    assert not ds.tyre_lift_off.values.any()
    assert ds.psd_mount_force.dims == ("variant", "frequency", "mount", "force_axis")
    assert (path.parent / "road.png").exists() and not (path.parent / "road_road.png").exists()


def test_generated_backend_equals_xla(road_cube, tmp_path):
    """The same job on the generated backend (the road's harmonics in the
    generated C) equals the XLA cube to 1e-9 of each channel's largest value."""
    from sweep import app
    cfg, path = road_cube
    gen = tmp_path / "gen.zarr"
    assert app.main(cfg_of(*ROAD, *LHS, "integrator.backend=generated", f"output.path={gen}"), progress=False) == 0
    a, b = xr.open_zarr(gen), xr.open_zarr(path)
    for name in ("wheel_centre_displacement", "bushing_force", "tyre_contact_force", "damage_equivalent_load"):
        x, y = a[name].values, b[name].values
        assert np.nanmax(np.abs(x - y)) <= 1e-9 * np.nanmax(np.abs(y)), name


def test_rerun_keeps_the_cube_and_its_statistics(road_cube, caplog):
    """A rerun with nothing to do rewrites the statistics and keeps the
    cube's attributes and coordinates (the public schema still holds, the
    store verifies)."""
    from sweep import app
    from sweep.results import schema as cube_schema
    from sweep.verify import verify
    cfg, path = road_cube
    with caplog.at_level(logging.INFO, logger="sweep"):
        assert app.main(cfg, progress=False) == 0
    ds = xr.open_zarr(path)
    assert list(cube_schema.problems(ds)) == []
    assert "damage_equivalent_load" in ds and "nothing to run" in caplog.text
    assert {"chunk_done", "component_units", "frequency", "mount"} <= set(ds.coords)
    problems, ok = verify(str(path))
    assert problems == [] and "complete" in ok


def test_a_rough_road_lifts_a_wheel(tmp_path, caplog):
    """Class G at 30 m/s: the wheels leave the road (state events: no tyre
    force while off it, never a pull), the variant is flagged
    (tyre_lift_off) and the log says so."""
    from sweep import app
    path = tmp_path / "g.zarr"
    cfg = cfg_of(*ROAD, "loadcase.road.class=G", "loadcase.road.speed=30.0", f"output.path={path}")
    with caplog.at_level(logging.INFO, logger="sweep"):
        assert app.main(cfg, progress=False) == 0
    ds = xr.open_zarr(path)
    assert ds.tyre_lift_off.values.any()
    contact = ds.tyre_contact_force.values
    assert contact.min() == 0.0 and (contact == 0.0).mean() > 0.01     # off the road: no force, never a pull
    assert "lift a wheel off the road" in caplog.text


@pytest.mark.parametrize("override, words", [
    ("loadcase.road.class=Z", "loadcase.road.class"),
    ("loadcase.road.f_max=600.0", "Nyquist"),
    ("loadcase.tyre.rate=250.0", "loadcase.tyre.rate"),
    ("loadcase.settle=4.5", "loadcase.settle"),
    ("+sweep.parameters.t={target: bushing.stiffness, elements: 'tyre_*', bounds: [0.5, 2.0]}", "tyre"),
])
def test_bad_road_inputs_are_one_line(override, words, tmp_path, caplog):
    from sweep import app
    cfg = cfg_of(*ROAD, override, f"output.path={tmp_path / 'x.zarr'}")
    with caplog.at_level(logging.INFO, logger="sweep"):
        assert app.main(cfg, progress=False) == 2
    errors = [r.getMessage() for r in caplog.records if r.getMessage().startswith("error:")]
    assert len(errors) == 1 and words in errors[0], errors
    assert not (tmp_path / "x.zarr").exists()


def test_frf_road_input_static_end_equals_a_raised_road(tmp_path):
    """The road transmissibility at 0.01 Hz equals the wheel centre's rise per
    metre of road from two static equilibria (the road raised 1 mm under the
    left tyre: its force k_t dz more at the wheel centre), in magnitude and
    with zero phase; units m/m, its own variables."""
    import jax
    import jax.numpy as jnp
    from omegaconf import OmegaConf
    from scipy import optimize
    from kernels import statics
    from kernels.dynamics import q_fn
    from sweep import app
    from sweep.results.cube import complex_of
    from sweep.axle.builder import model_from_config
    path = tmp_path / "frf.zarr"
    cfg = cfg_of("model=toy_trailing_arm", "loadcase=frf", "loadcase.frequencies.n=4",
                 "loadcase.frequencies.min=0.01", "+loadcase.tyre={rate: 250000.0, damping: 100.0}",
                 "loadcase.inputs=[left_fz, left_road]", "sweep.progress=false", "cache.enabled=false",
                 f"output.path={path}")
    assert app.main(cfg, progress=False) == 0
    ds = xr.open_zarr(path)
    assert ds.wheel_centre_road_transmissibility_real.attrs["units"] == "m/m"
    assert list(ds.road_input.values.astype(str)) == ["left_road"]
    h = complex_of(ds, "wheel_centre_road_transmissibility").isel(variant=0, frequency=0).sel(
        road_input="left_road", side="left", axis="z").values
    mcfg = OmegaConf.to_container(cfg.model, resolve=True)
    assert "tyres: {rate: 250000.0, damping: 100.0}" in ds.attrs["config"].replace("\n  ", " ") or \
        "rate: 250000.0" in ds.attrs["config"]                            # the job put them on the model
    mcfg["tyres"] = {"rate": 250000.0, "damping": 100.0}
    model = model_from_config(mcfg)
    u = np.zeros((2, 6))
    u[:, 2] = 5000.0
    r0 = jax.jit(statics.static_equilibrium)(model, jnp.asarray(u)).r
    # the tyres at rest in that state, then the road 1 mm higher under the left
    # tyre (its force k_t dz more at the wheel centre): the new rest state by
    # scipy's root finder on the equations of motion at rest (not the kernels' Newton)
    loaded = statics.tyres_at_rest(model, r0)
    dz = 1e-3
    u1 = jnp.asarray(u).at[0, 2].add(250000.0 * dz)
    m = model.topology.n_bodies
    q = jax.jit(lambda x: q_fn(loaded, x.reshape(m, 6), jnp.zeros((m, 6)), u1).reshape(-1))
    sol = optimize.root(lambda x: np.asarray(q(jnp.asarray(x))), np.asarray(r0).reshape(-1), tol=1e-13)
    assert sol.success
    slot = int(model.topology.wheel_slots[0])
    fd = float(sol.x.reshape(m, 6)[slot, 2] - r0[slot, 2]) / dz
    assert abs(h) == pytest.approx(fd, rel=1e-3)
    assert abs(np.angle(h)) < 1e-2
    assert 0.5 < fd < 1.0                     # a tyre in series with the suspension


SPRUNG = "+loadcase.sprung_body={mass_per_wheel: 420.0}"


def test_frf_sprung_body_static_end_is_a_rigid_lift(tmp_path, caplog):
    """With a sprung body (free in heave and roll, standing on the tyres),
    a road raised under the left tyre lifts the axle at 0.01 Hz nearly as a
    rigid body over the right tyre's contact: the left wheel centre by the
    road's height, the body's heave by half of it and its roll by about
    1 / (2 s) rad/m (s: half the wheel-centre track; the wheel loads stay
    vertical as the axle rolls, and the linkage's jacking adds 2 %) - where
    the held body (the rig) gives less than 1 at the wheel. Exactly: the
    static states found by scipy with the road raised 1 mm. The body mode shows
    as a heave peak between 1 and 2 Hz; the log names it; the figure is
    written."""
    from sweep import app
    from sweep.results import schema as cube_schema
    from sweep.results.cube import complex_of
    path = tmp_path / "frf.zarr"
    cfg = cfg_of("model=toy_trailing_arm", "loadcase=frf", "loadcase.frequencies.min=0.01",
                 "loadcase.frequencies.n=60", "+loadcase.tyre={rate: 250000.0, damping: 100.0}", SPRUNG,
                 "loadcase.inputs=[left_fz, left_road]", "sweep.progress=false", "cache.enabled=false",
                 f"output.path={path}")
    with caplog.at_level(logging.INFO, logger="sweep"):
        assert app.main(cfg, progress=False) == 0
    ds = xr.open_zarr(path)
    assert list(cube_schema.problems(ds)) == []
    assert ds.body_heave_road_transmissibility_real.attrs["units"] == "m/m"
    assert ds.body_roll_road_transfer_real.attrs["units"] == "rad/m"
    assert ds.body_heave_receptance_real.attrs["units"] == "m/N"
    heave = complex_of(ds, "body_heave_road_transmissibility").isel(variant=0).sel(road_input="left_road").values
    roll = complex_of(ds, "body_roll_road_transfer").isel(variant=0).sel(road_input="left_road").values
    wheel = complex_of(ds, "wheel_centre_road_transmissibility").isel(variant=0).sel(
        road_input="left_road", side="left", axis="z").values
    assert abs(heave[0]) == pytest.approx(0.5, rel=0.01) and abs(wheel[0]) == pytest.approx(1.0, rel=0.01)
    assert abs(roll[0]) == pytest.approx(1.0 / 1.49, rel=0.03)     # 1 / (2 s), less the linkage's jacking
    # the independent check: two static states of the at-rest model found by
    # scipy's root finder (not the kernels' Newton), the road 1 mm higher
    # under the left tyre (its force k_t dz more at the wheel centre)
    import jax
    import jax.numpy as jnp
    from omegaconf import OmegaConf
    from scipy import optimize
    from kernels import statics
    from kernels.dynamics import q_fn
    from sweep.axle.builder import model_from_config
    mcfg = OmegaConf.to_container(cfg.model, resolve=True)
    mcfg.update(tyres={"rate": 250000.0, "damping": 100.0}, sprung_body={"mass_per_wheel": 420.0})
    model = model_from_config(mcfg)
    u = jnp.zeros((2, 6)).at[:, 2].set(5000.0)
    r0 = statics.equilibrium(model, u).r
    rest = statics.at_rest(model, r0)
    dz = 1e-3
    m = model.topology.n_bodies
    q = jax.jit(lambda x: q_fn(rest, x.reshape(m, 6), jnp.zeros((m, 6)), u.at[0, 2].add(250000.0 * dz)).reshape(-1))
    jac = jax.jit(jax.jacfwd(q))                  # the guide's held rate (1e10) needs the exact Jacobian
    sol = optimize.root(lambda x: np.asarray(q(jnp.asarray(x))), np.asarray(r0).reshape(-1), tol=1e-13,
                        jac=lambda x: np.asarray(jac(jnp.asarray(x))))
    assert sol.success
    d = (sol.x.reshape(m, 6) - np.asarray(r0)) / dz
    body, wslot = statics.mount_slot(model.topology), int(model.topology.wheel_slots[0])
    assert abs(heave[0]) == pytest.approx(d[body, 2], rel=2e-3)
    assert abs(roll[0]) == pytest.approx(d[body, 5], rel=2e-3)
    assert abs(wheel[0]) == pytest.approx(d[wslot, 2], rel=2e-3)
    f = ds.frequency.values
    assert 1.0 < f[np.argmax(np.abs(heave))] < 2.0 and np.abs(heave).max() > 1.0
    assert "body heave: peak" in caplog.text and "sprung_body_guide" not in ds.mount.values.astype(str)
    assert (path.parent / "frf.png").exists()


def test_rough_road_with_a_sprung_body(tmp_path, caplog):
    """The rough road with the sprung body: a time-response cube the schema
    accepts, the body mounts the toy's bushings to the chassis (now on the
    body; the guide is no mount), the contact force's mean the static wheel
    load (the body rests in the static state), the log says the body is
    sprung. (The held body's cube: test_rough_road_cube.)"""
    from sweep import app
    from sweep.results import schema as cube_schema
    path = tmp_path / "sprung.zarr"
    cfg = cfg_of(*ROAD, "loadcase.sprung_body={mass_per_wheel: 420.0}", f"output.path={path}")
    with caplog.at_level(logging.INFO, logger="sweep"):
        assert app.main(cfg, progress=False) == 0
    ds = xr.open_zarr(path)
    assert list(cube_schema.problems(ds)) == [] and list(ds.status.values) == [0]
    assert "sprung body 420 kg per wheel" in caplog.text
    assert set(ds.mount.values.astype(str)) == {"pivot_front_left", "rear_mount_left", "pivot_front_right",
                                                "rear_mount_right"}
    assert "sprung_body_guide" in ds.bushing.values.astype(str)
    sel = ds.time.values >= 1.0
    np.testing.assert_allclose(ds.tyre_contact_force.values[:, sel].mean(axis=1), 5000.0, rtol=0.01)
    assert not ds.tyre_lift_off.values.any()


@pytest.mark.parametrize("args, words", [
    ([*ROAD, "loadcase.sprung_body={mass_per_wheel: 0.42}"], "loadcase.sprung_body.mass_per_wheel"),
    (["model=toy_trailing_arm", "loadcase=frf", SPRUNG, "sweep.progress=false"], "tyres"),
])
def test_bad_sprung_body_is_one_line(args, words, tmp_path, caplog):
    from sweep import app
    cfg = cfg_of(*args, f"output.path={tmp_path / 'x.zarr'}")
    with caplog.at_level(logging.INFO, logger="sweep"):
        assert app.main(cfg, progress=False) == 2
    errors = [r.getMessage() for r in caplog.records if r.getMessage().startswith("error:")]
    assert len(errors) == 1 and words in errors[0], errors
    assert not (tmp_path / "x.zarr").exists()


def test_damage_equivalent_load_of_a_sine():
    """N cycles of range 2A: DEL = 2A (N / n_eq)^(1/m) (closed form)."""
    from sweep.kinds.rough_road import damage_equivalent_load
    t = np.linspace(0.0, 50.0, 50 * 64 + 1)
    x = 300.0 - 120.0 * np.cos(2 * np.pi * t)          # trough to trough: 50 whole cycles
    for m in (3.0, 5.0):
        assert damage_equivalent_load(x, m, 10.0) == pytest.approx(240.0 * (50 / 10.0) ** (1 / m), rel=1e-3)
    assert damage_equivalent_load(np.full(10, 3.0), 5.0, 1.0) == 0.0
