"""The frequency-response job kind (sweep/kinds/frequency_response.py, ``loadcase=frf``): a
design of variants -> one cube, each variant's transfer functions equal to
kernels.frf called here on that variant's model at its own static
equilibrium, the low-frequency end equal to finite differences of the
static equilibrium; the mount forces on the body; a bad load case is one
line naming the key; the Bode figure is drawn."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr
from omegaconf import OmegaConf

from tests.jobs import cfg_of

TOY = ["model=toy_trailing_arm", "loadcase=frf", "loadcase.frequencies.n=12", "loadcase.frequencies.min=0.01",
       "loadcase.wheel_loads.left.fz=3500",
       "loadcase.wheel_loads.right.fz=3500", "sweep.progress=false", "cache.enabled=false"]
LHS = ["sweep.design=lhs", "sweep.n_variants=3", "sweep.chunk_size=2",
       "+sweep.parameters.pivots={target: bushing.stiffness, elements: 'pivot_*', directions: [radial], "
       "bounds: [0.5, 2.0]}"]


@pytest.fixture(scope="module")
def frf_cube(tmp_path_factory):
    from sweep import app
    path = tmp_path_factory.mktemp("frf") / "frf.zarr"
    cfg = cfg_of(*TOY, *LHS, f"output.path={path}")
    assert app.main(cfg, progress=False) == 0
    return cfg, path, xr.open_zarr(path)


def test_frf_cube_equals_the_kernel_per_variant(frf_cube):
    from kernels import frf, statics
    from sweep.results.cube import complex_of
    from sweep.axle.builder import model_from_config
    from sweep.axle.params import build_parameters
    cfg, path, ds = frf_cube
    assert list(ds.status.values) == [0, 0, 0]
    assert ds.wheel_centre_receptance_real.dims == ("variant", "frequency", "input", "side", "axis")
    assert list(ds.input.values) == ["left_fx", "left_fy", "left_fz"]
    # default mounts: every element to the chassis - the bushings, then the P2P spring and damper
    assert set(ds.mount.values.tolist()[:4]) == {f"{b}_{s}" for b in ("pivot_front", "rear_mount")
                                                 for s in ("left", "right")}
    assert set(ds.mount.values.tolist()[4:]) == {f"{p}_{s}" for p in ("spring", "damper") for s in ("left", "right")}
    model = model_from_config(cfg.model)
    pset = build_parameters(OmegaConf.to_container(cfg.sweep.parameters), model)
    u = jnp.zeros((2, 6)).at[:, 2].set(3500.0)
    w = 2 * np.pi * ds.frequency.values
    h = complex_of(ds, "wheel_centre_receptance")
    mounts = [list(model.topology.bushing_names).index(m) for m in ds.mount.values[:4]]
    peaks = []
    for v in range(3):
        m = pset.apply(model, np.array([float(ds["pivots"].values[v])]))
        st = jax.jit(statics.static_equilibrium)(m, u)
        ref = frf.frequency_response(m, st.r, u, w, [0, 1, 2], mounts)       # the bushings: chassis 2nd body
        np.testing.assert_allclose(h.isel(variant=v).values, np.moveaxis(np.asarray(ref.wheel_centre), -1, 1),
                                   rtol=1e-8, atol=1e-15)
        mt = complex_of(ds, "mount_transfer").isel(variant=v).values[:, :, :4]
        np.testing.assert_allclose(mt, -np.moveaxis(np.asarray(ref.bushing), -1, 1), rtol=1e-8, atol=1e-12)
        peaks.append(np.abs(h.isel(variant=v).sel(input="left_fx", side="left", axis="x").values).max())
    assert np.ptp(peaks) / np.mean(peaks) > 0.05          # the swept pivot rate changes the response
    # at 0.01 Hz the axle is in equilibrium: the mounts (bushings, spring, damper) pass the whole
    # vertical wheel force to the body and no net lateral or longitudinal one (oracle: statics)
    low = complex_of(ds, "mount_transfer").isel(variant=0, frequency=0)
    for inp, comp in (("left_fz", "fz"), ("left_fx", "fx"), ("left_fy", "fy")):
        total = low.sel(input=inp).sum("mount").values
        expected = np.array([c == comp for c in ("fx", "fy", "fz", "mx", "my", "mz")], float)
        np.testing.assert_allclose(np.real(total[:3]), expected[:3], atol=2e-4)
    assert 0.05 < float(np.real(low.sel(input="left_fz", component="fz", mount=["spring_left"]).sum())) < 0.95
    assert (path.parent / "frf.png").exists()


def test_a_bad_frf_load_case_is_one_line(tmp_path):
    from sweep.kinds import kind_of
    from sweep.core.config import ConfigError
    for over, key in ((["loadcase.inputs=[left_fq]"], "loadcase.inputs"),
                      (["loadcase.frequencies.max=0.001"], "loadcase.frequencies.max"),
                      (["loadcase.mounts=[no_such_bushing]"], "loadcase.mounts")):
        cfg = cfg_of(*TOY, *over, f"output.path={tmp_path / 'bad.zarr'}")
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            kind_of(cfg).plan(cfg)
