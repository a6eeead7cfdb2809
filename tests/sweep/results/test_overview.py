"""The overview PNG of a time-response cube (sweep.results.plots.overview), on small
synthetic cubes: one variant gets a time-history figure (wheel-centre x and z,
toe, camber, reference-bushing force), a sweep the sweep figure (responses
of a few variants, peak distribution, parameter influence)."""
import os

import numpy as np
import pytest
import xarray as xr
import yaml

from sweep.results.plots import overview, overview_figure

BUSHINGS = ["link_left", "link_right", "other_left", "other_right"]
CONFIG = {"loadcase": {"name": "longitudinal_step",
                       "changes": [{"time": 0.2, "duration": 0.0, "left": {"fx": -2500.0},
                                    "right": {"fx": -2500.0}}]},
          "integrator": {"name": "lsrt2", "dt": 0.001, "solver": "block"}}


def cube(n_variants, status=None):
    """A cube with the time-response schema: a damped response to a
    longitudinal step at 0.2 s, scaled per variant by the parameter k."""
    t = np.arange(0.0, 0.6 + 1e-9, 0.002)
    k = np.linspace(0.5, 2.0, n_variants)
    resp = np.where(t >= 0.2, 1.0 - np.exp(-(t - 0.2) / 0.03) * np.cos(2 * np.pi * 15 * (t - 0.2)), 0.0)
    r = resp[None, :] / k[:, None]                                           # (variant, time)
    wcd = np.zeros((n_variants, t.size, 2, 3))
    wcd[..., 0] = -5e-3 * r[..., None]                                      # x [m]
    wcd[..., 2] = 0.4e-3 * r[..., None]                                     # z [m]
    toe = 0.002 + 1e-3 * r[..., None] * np.array([1.0, 1.0])                # [rad]
    camber = -0.01 + 2e-4 * r[..., None] * np.array([1.0, 1.0])
    bf = np.zeros((n_variants, t.size, len(BUSHINGS), 6))
    bf[:, :, 0, 0] = bf[:, :, 1, 0] = 400.0 + 1330.0 * r                    # fx [N]
    bf[:, :, 0, 1], bf[:, :, 1, 1] = 150.0 * r, -150.0 * r                  # fy
    bf[:, :, 0, 2] = bf[:, :, 1, 2] = -600.0 + 80.0 * r                     # fz
    bf[:, :, :, 3:] = 10.0 * r[..., None, None]                             # torques [N m]
    ds = xr.Dataset(
        {"wheel_centre_displacement": (("variant", "time", "side", "axis"), wcd, {"units": "m"}),
         "toe": (("variant", "time", "side"), toe, {"units": "rad"}),
         "camber": (("variant", "time", "side"), camber, {"units": "rad"}),
         "bushing_force": (("variant", "time", "bushing", "component"), bf),
         "status": ("variant", np.zeros(n_variants, np.int8) if status is None else np.asarray(status, np.int8)),
         "k": ("variant", k, {"units": "-", "scale": "log"})},
        coords={"variant": np.arange(n_variants), "time": ("time", t, {"units": "s"}),
                "side": ["left", "right"], "axis": ["x", "y", "z"], "bushing": BUSHINGS,
                "component": ["fx", "fy", "fz", "mx", "my", "mz"]},
        attrs={"model": "toy_axle", "reference_bushing_left": "link_left",
               "reference_bushing_right": "link_right", "parameters": ["k"] if n_variants > 1 else [],
               "config": yaml.safe_dump(CONFIG)})
    return ds


def texts(fig):
    """Every title, axis label and free text of a figure, lower case."""
    out = [fig._suptitle.get_text() if fig._suptitle is not None else ""]
    for a in fig.axes:
        out += [a.get_title(), a.get_xlabel(), a.get_ylabel()] + [t.get_text() for t in a.texts]
    return [s.lower() for s in out]


def test_single_variant_is_a_time_history(tmp_path):
    ds = cube(1)
    png = tmp_path / "one.png"
    assert overview(ds, str(png)) == str(png)
    assert png.stat().st_size > 10_000
    fig = overview_figure(ds)
    titles = [a.get_title().lower() for a in fig.axes]
    assert len(fig.axes) == 6
    for want in ("wheel-centre x", "wheel-centre z", "toe", "camber", "link_left", "link_right"):
        assert any(want in s for s in titles), (want, titles)
    joined = " | ".join(texts(fig))
    assert "needs a sweep" not in joined
    for want in ("toy_axle", "longitudinal_step", "lsrt2", "h = 1 ms"):
        assert want in fig._suptitle.get_text().lower(), want
    for a in fig.axes:                                  # units on every axis
        assert a.get_xlabel() == "time [s]"
        assert "[" in a.get_ylabel() and "]" in a.get_ylabel(), a.get_ylabel()
        assert a.get_legend() is not None
    labels = {a.get_title().split(" (")[0]: a.get_ylabel() for a in fig.axes}
    assert "[mm]" in labels["wheel-centre x"] and "[deg]" in labels["toe"]
    # the plotted values are in those units: x in mm, toe in deg, force in kN
    ax_x = next(a for a in fig.axes if a.get_title().startswith("wheel-centre x"))
    assert np.nanmin(ax_x.lines[0].get_ydata()) == pytest.approx(
        ds.wheel_centre_displacement.values[0, :, 0, 0].min() * 1e3)
    ax_toe = next(a for a in fig.axes if a.get_title().startswith("toe"))
    assert np.nanmax(ax_toe.lines[0].get_ydata()) == pytest.approx(np.degrees(ds.toe.values[0, :, 0].max()))
    ax_f = next(a for a in fig.axes if "link_left" in a.get_title())
    fx = next(ln for ln in ax_f.lines if ln.get_label() == "fx")
    assert np.nanmax(fx.get_ydata()) == pytest.approx(ds.bushing_force.values[0, :, 0, 0].max() / 1e3)
    # no y axis padded far beyond its curves (the force axis once ran to 2.0 kN for a 1.33 kN peak)
    for a in fig.axes:
        ys = np.concatenate([np.asarray(ln.get_ydata(), float) for ln in a.lines
                             if not ln.get_label().startswith("_")])        # not the step marker
        lo, hi = np.nanmin(ys), np.nanmax(ys)
        ylo, yhi = a.get_ylim()
        assert ylo <= lo and yhi >= hi
        assert (yhi - ylo) <= 1.3 * (hi - lo) + 1e-9 or hi - lo < 1e-9, (a.get_title(), ylo, yhi, lo, hi)


def test_single_failed_variant_still_draws(tmp_path):
    ds = cube(1, status=[1])
    for v in ("wheel_centre_displacement", "toe", "camber", "bushing_force"):
        ds[v][:] = np.nan
    png = tmp_path / "failed.png"
    overview(ds, str(png))
    assert png.stat().st_size > 5_000
    assert "failed" in overview_figure(ds)._suptitle.get_text().lower()


def test_sweep_keeps_the_sweep_figure(tmp_path):
    ds = cube(3)
    png = tmp_path / "sweep.png"
    assert overview(ds, str(png)) == str(png)
    assert png.stat().st_size > 10_000
    joined = " | ".join(texts(overview_figure(ds)))
    assert "most influential parameter" in joined
    assert "spearman rank correlation" in joined
    assert "3 of 3 variants ok" in joined


def test_picture_is_written_atomically_and_redrawn_when_missing_or_damaged(tmp_path, monkeypatch):
    """A rerun with nothing left to compute redraws the picture only when it
    is missing or not a whole PNG (a kill after the last chunk, or while
    the picture was written); the write itself goes through a temporary
    file, so a failing write leaves the old picture and no stray file."""
    from sweep.results import plots
    ds = cube(1).assign_coords(chunk_done=("chunk", np.ones(1, np.int8)))
    png = tmp_path / "c.png"
    nothing_run, ran = {"variants_run": 0}, {"variants_run": 1}
    assert plots.needs_drawing(ds, nothing_run, str(png))            # missing
    overview(ds, str(png))
    assert plots.png_intact(str(png)) and os.listdir(tmp_path) == ["c.png"]
    assert not plots.needs_drawing(ds, nothing_run, str(png))        # whole: left alone
    assert plots.needs_drawing(ds, ran, str(png))                    # new results: redrawn
    whole = png.read_bytes()
    png.write_bytes(whole[:72])                                       # cut mid-write
    assert not plots.png_intact(str(png)) and plots.needs_drawing(ds, nothing_run, str(png))
    incomplete = ds.drop_vars("chunk_done").assign_coords(chunk_done=("chunk", np.array([1, 0], np.int8)))
    assert not plots.needs_drawing(incomplete, ran, str(png))        # an unfinished cube: not yet
    png.write_bytes(whole)

    def fail(self, path, **kw):
        open(path, "wb").write(b"\x89PNG partial")
        raise OSError(28, "No space left on device")
    from matplotlib.figure import Figure                              # the class sweep.results.plots draws with
    monkeypatch.setattr(Figure, "savefig", fail)
    with pytest.raises(OSError):
        overview(ds, str(png))
    assert png.read_bytes() == whole and os.listdir(tmp_path) == ["c.png"]
