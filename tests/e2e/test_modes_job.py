"""The modes job kind (sweep/kinds/modal_analysis.py, ``loadcase=modes``): a design of
variants -> one modes cube, each variant's frequencies and damping ratios
equal to scipy's eigen solve of a state matrix assembled in the test (dense
jacfwd of eq. 1, tests/kernels/test_modes.py) for that variant's parameters."""
import jax
import numpy as np
import pytest
import scipy.linalg
import xarray as xr

from tests.jobs import cfg_of
from tests.kernels.test_modes import _dense_state_matrix

TOY = ["model=toy_trailing_arm", "loadcase=modes", "loadcase.n_modes=8", "sweep.progress=false",
       "cache.enabled=false"]
LHS = ["sweep.design=lhs", "sweep.n_variants=3", "sweep.chunk_size=2",
       "+sweep.parameters.pivots={target: bushing.stiffness, elements: 'pivot_*', directions: [radial], "
       "bounds: [0.5, 2.0]}"]


@pytest.fixture(scope="module")
def modes_cube(tmp_path_factory):
    from sweep import app
    path = tmp_path_factory.mktemp("modes") / "modes.zarr"
    cfg = cfg_of(*TOY, *LHS, f"output.path={path}")
    assert app.main(cfg, progress=False) == 0
    return cfg, xr.open_zarr(path)


def test_modes_cube_equals_an_independent_eigen_solve_per_variant(modes_cube):
    from kernels import kc
    from sweep.axle.builder import model_from_config
    from sweep.axle.params import build_parameters
    from omegaconf import OmegaConf
    cfg, ds = modes_cube
    assert ds.frequency.dims == ("variant", "mode") and ds.frequency.attrs["units"] == "Hz"
    assert ds.body_energy.dims == ("variant", "mode", "body")
    assert ds.bushing_energy.dims == ("variant", "mode", "bushing")
    assert list(ds.status.values) == [0, 0, 0]
    model = model_from_config(cfg.model)
    pset = build_parameters(OmegaConf.to_container(cfg.sweep.parameters), model)
    freqs = []
    for v in range(3):
        m = pset.apply(model, np.array([float(ds["pivots"].values[v])]))
        eq = jax.jit(kc.design_position)(m)
        lam = scipy.linalg.eigvals(_dense_state_matrix(m, eq.r, kc.design_loads(eq)))
        osc = lam[lam.imag > 1e-9 * np.maximum(np.abs(lam), 1.0)]
        ref = osc[np.argsort(np.abs(osc))][:8]
        np.testing.assert_allclose(ds.frequency.values[v], np.abs(ref) / (2 * np.pi), rtol=1e-7)
        np.testing.assert_allclose(ds.damping_ratio.values[v], -ref.real / np.abs(ref), rtol=1e-6, atol=1e-9)
        freqs.append(ds.frequency.values[v])
    # the swept pivot stiffness moves the modes (not a constant cube)
    f = np.array(freqs)
    assert np.max(np.ptp(f, axis=0) / f.mean(axis=0)) > 1e-2
    # participation shares sum to one
    np.testing.assert_allclose(ds.body_energy.sum("body").values, 1.0, rtol=1e-10)
    np.testing.assert_allclose(ds.bushing_energy.sum("bushing").values, 1.0, rtol=1e-10)


@pytest.mark.notebook
def test_modes_notebook_maps_the_tracked_mode(modes_cube, tmp_path, monkeypatch):
    """notebooks/03_modes_map.ipynb runs top to bottom on the modes cube,
    draws its figures, and reports the tracked mode's frequency range as a
    direct computation from the cube gives it (mode tracked by the energy
    distribution most similar to the reference mode's)."""
    import os
    import nbformat
    from nbclient import NotebookClient
    from tests.e2e.test_sweep_jobs import ROOT, notebook_outputs
    cfg, ds = modes_cube
    nb = nbformat.read(os.path.join(ROOT, "notebooks", "03_modes_map.ipynb"), as_version=4)
    monkeypatch.setenv("AXLE_MODES_CUBE", str(cfg.output.path))
    monkeypatch.setenv("AXLE_MODE", "1")
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    text, png = notebook_outputs(nb)
    assert png >= 2, "the notebook's figures are not in its outputs"
    sig = np.concatenate([ds.body_energy.values, ds.bushing_energy.values], axis=2)
    cos = np.einsum("vmn,n->vm", sig, sig[0, 1]) / np.linalg.norm(sig, axis=2) / np.linalg.norm(sig[0, 1])
    tracked = cos.argmax(axis=1)
    f = ds.frequency.values[np.arange(ds.sizes["variant"]), tracked]
    assert f"tracked frequency over the design: {f.min():.4f} .. {f.max():.4f} Hz" in text, text[-1500:]


def test_modes_split_over_two_cpu_devices_and_mirror_labels(modes_cube, tmp_path):
    """The same job with its chunks split over two CPU devices (a subprocess:
    the device count is fixed when JAX starts) gives the same cube to
    round-off; the toy axle's swept pivots are set alike on both sides, so
    every variant takes the mirror split and every mode is parallel or
    opposite."""
    import os
    import subprocess
    import sys
    from tests.sweep.test_sweep import ROOT
    _, ds = modes_cube
    assert np.all(ds.mirror_split.values == 1.0)
    np.testing.assert_allclose(np.abs(ds.symmetry.values), 1.0, atol=1e-9)
    assert ds.symmetry.attrs["units"] == "1" and "long_name" in ds.symmetry.attrs
    path = tmp_path / "two.zarr"
    env = dict(os.environ, AXLE_CPU_DEVICES="2")
    env["XLA_FLAGS"] = " ".join(f for f in env.get("XLA_FLAGS", "").split() if "device_count" not in f)
    proc = subprocess.run([sys.executable, "-m", "sweep", *TOY, *LHS, f"output.path={path}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "on 2 device(s)" in proc.stdout
    two = xr.open_zarr(path)
    assert list(two.status.values) == [0, 0, 0]
    for name in ("frequency", "damping_ratio", "symmetry", "body_energy", "bushing_energy"):
        np.testing.assert_allclose(two[name].values, ds[name].values, rtol=1e-9, atol=1e-12, err_msg=name)
