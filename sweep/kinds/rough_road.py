"""The rough-road job kind: every variant driven over the same random road
(ISO 8608 class, speed, left/right coherence, seed: :mod:`kernels.road`)
through a point-contact tyre per wheel, the body held as on a rig.

A variant is a time response (:mod:`sweep.kinds.time_response`: static
equilibrium under the wheel loads, then the integration, the same channels)
of a model with tyres - a vertical spring-damper between the ground and each
wheel centre (``model.tyres``, set from ``loadcase.tyre`` unless the model
file gives its own) - under the wheel loads plus the road's force through
the tyre, k_t z_road + c_t dz_road/dt, a sum of harmonics that the
integrators see as a smooth input (:func:`kernels.loads.with_harmonics`).

After the run the report adds, per variant, over the time after
``loadcase.settle`` (the start-up transient left out):

- ``road_height`` (time, side) [m], the road under each wheel;
- ``tyre_contact_force`` (variant, time, side) [N], the vertical road force
  on the wheel (0 off the road: lift-off and landing are state events,
  :func:`kernels.system.switching_laws`); ``tyre_lift_off`` (variant,
  side): the wheel left the road after ``settle`` (the log says how many);
- PSDs (Welch, Hann windows of 1 / ``loadcase.resolution`` seconds, half
  overlapping; one-sided) and RMS of the wheel-centre vertical displacement,
  the contact force and the body-mount forces (every bushing to the chassis
  but the tyres): ``psd_*`` over ``frequency`` [Hz], ``rms_*``;
- ``damage_equivalent_load`` (variant, mount, force_axis) [N] of each body
  mount's force x, y, z: rainflow cycles (ASTM E1049 by the ``rainflow``
  library) and Miner's rule with the Woehler exponent m
  (``loadcase.woehler_exponent``): DEL = (sum n_i S_i^m / N_eq)^(1/m), S_i
  the cycle ranges, N_eq = the analysed duration in seconds (the 1 Hz
  equivalent load range).

The figure beside the cube (``<cube>.png``): the spectra, the variants'
band and median, with the road's own (the time response's step overview
has no step to show here).
"""
from __future__ import annotations

import dataclasses
import logging

import numpy as np
from omegaconf import OmegaConf

from kernels import loads, road, statics
from sweep.kinds import time_response
from sweep.kinds.base import rig_from_load_case
from sweep.kinds.time_response import TimeResponse
from sweep.axle.builder import TYRE, tyre_values
from sweep.core.config import LOADS, Float, Int, Map, Optional as Opt, Str, fail, fmt

log = logging.getLogger("sweep")

NAME = "rough_road"
FORCE_AXES = ("fx", "fy", "fz")
STATISTICS_BLOCK = 64        # variants read at a time for the statistics


def road_of(lc) -> tuple:
    """(Gd(n0) [m^3], the road config) of a load case's ``road`` mapping."""
    rd = lc.get("road") or {}
    gd0 = rd.get("gd0")
    if gd0 is None:
        cls = str(rd.get("class", "C")).upper()
        if cls not in road.CLASSES:
            fail("loadcase.road.class", rd.get("class"), f"is not an ISO 8608 class ({', '.join(road.CLASSES)})")
        gd0 = road.CLASSES[cls]
    return float(gd0), rd


def profile_of(lc, t0, t1) -> road.RoadProfile:
    """The load case's two-track road, its harmonics spaced 1 / (t1 - t0) (periodic over the run)."""
    gd0, rd = road_of(lc)
    return road.profile(gd0, float(rd["speed"]), float(rd["f_min"]), float(rd["f_max"]), 1.0 / (t1 - t0),
                        coherence=float(rd.get("coherence", 0.0)), seed=int(rd.get("seed", 0)),
                        waviness=float(rd.get("waviness", road.WAVINESS)))


class RoughRoad(TimeResponse):
    name = NAME
    cube_kind = time_response.NAME      # a time-response cube (its public schema) with the road's variables
    loadcase = Map({
        "name": Str(), "kind": Str(), "description": Str(),
        "t_start": Float(unit="s"), "t_end": Float(unit="s"), "wheel_loads": LOADS,
        "settle": Float(ge=0, unit="s"),
        "road": Map({"class": Opt(Str()), "gd0": Opt(Float(gt=0, unit="m^3")), "waviness": Float(gt=0),
                     "speed": Float(gt=0, unit="m/s"), "coherence": Float(ge=0, unit="1"),
                     "seed": Int(ge=0), "f_min": Float(gt=0, unit="Hz"), "f_max": Float(gt=0, unit="Hz")},
                    strict=True),
        "tyre": Map({"rate": Float(gt=0, unit="N/m"), "damping": Float(ge=0, unit="N s/m")}, strict=True),
        "sprung_body": Opt(Map({"mass_per_wheel": Float(gt=0, unit="kg")}, strict=True)),
        "resolution": Float(gt=0, unit="Hz"),
        "woehler_exponent": Float(gt=0),
    }, strict=True)

    def check(self, job):
        """The time-response checks, then the road's: a known class, f_min <
        f_max below the output's Nyquist frequency, the analysed time
        (after ``settle``) at least two PSD windows long, coherence in [0, 1]
        (the tyres are no sweep target: :mod:`sweep.axle.params`)."""
        super().check(job)
        lc = job.get("loadcase") or {}
        gd0, rd = road_of(lc)
        for key in ("speed", "f_min", "f_max"):
            if rd.get(key) is None:
                fail(f"loadcase.road.{key}", None, "is missing")
        if not float(rd["f_min"]) < float(rd["f_max"]):
            fail("loadcase.road.f_min", rd["f_min"], f"must be below loadcase.road.f_max = {fmt(float(rd['f_max']))}")
        if not 0.0 <= float(rd.get("coherence", 0.0)) <= 1.0:
            fail("loadcase.road.coherence", rd.get("coherence"), "must be in [0, 1]")
        sw, integ = job.get("sweep") or {}, job.get("integrator") or {}
        every = sw["every"] if sw.get("every") is not None else (job.get("output") or {}).get("every", 1)
        nyquist = 0.5 / (float(integ.get("dt", 1e-3)) * int(every))
        if float(rd["f_max"]) >= nyquist:
            fail("loadcase.road.f_max", rd["f_max"], f"must be below the output's Nyquist frequency "
                 f"{fmt(nyquist)} Hz (1 / (2 integrator.dt output.every))")
        t0 = sw["start"] if sw.get("start") is not None else lc.get("t_start", 0.0)
        t0_key = "sweep.start" if sw.get("start") is not None else "loadcase.t_start"
        analysed = float(lc["t_end"]) - float(t0) - float(lc.get("settle", 0.0))
        window = 1.0 / float(lc.get("resolution", 0.5))
        if analysed < 2 * window:
            fail("loadcase.settle", lc.get("settle"), f"leaves {analysed:.4g} s to analyse from {t0_key} = "
                 f"{fmt(float(t0))} s to loadcase.t_end = {fmt(float(lc['t_end']))} s: at least two PSD windows "
                 f"of 1 / loadcase.resolution = {fmt(window)} s are needed (a longer run, a shorter settle, a "
                 "coarser resolution" + (", or sweep.start=null" if sw.get("start") is not None else "") + ")")
        if lc.get("tyre") is not None:
            tyre_values(lc["tyre"], "loadcase.tyre")
        elif (job.get("model") or {}).get("tyres") is None:
            fail("loadcase.tyre", None, "is missing: the rough road drives the wheels through tyres "
                 "(give loadcase.tyre: {rate: N/m, damping: N s/m}, or model.tyres)")

    def kept_bushings(self, model):
        """The tyres and the body mounts: the statistics read their forces."""
        from kernels.names import TYRE_BUSHINGS
        return list(TYRE_BUSHINGS) + body_mounts(model.topology)

    def prepare(self, cfg):
        """The model with the load case's tyres and sprung body
        (``model.tyres``, ``model.sprung_body``, each unless the model file
        sets it). The backend is the time response's choice
        (``integrator.backend``: auto picks the generated C for large jobs)."""
        return rig_from_load_case(cfg, log)

    def finish_case(self, case, cfg):
        """The time response's case with the road under the tyres (its
        harmonics in the excitation)."""
        lc = OmegaConf.to_container(cfg.loadcase, resolve=True)
        rate, damping = tyre_values(OmegaConf.to_container(cfg.model.tyres, resolve=True))
        prof = profile_of(lc, case.t0, case.t1)
        exc = loads.with_harmonics(case.exc, *road.wheel_force_harmonics(prof, rate, damping))
        return dataclasses.replace(case, exc=exc, loadcase_name=str(cfg.loadcase.name))

    def attrs(self, plan, cfg_yaml):
        return {**super().attrs(plan, cfg_yaml), "job_kind": NAME, "body_mounts": body_mounts(plan.model.topology),
                "road_harmonics": int(plan.case.exc.h_omega.shape[0])}

    def report(self, ds, cfg, s):
        time_response.report(ds, cfg, s, step_overview=False)
        try:
            statistics(ds, cfg, s)
        except Exception as err:  # noqa: BLE001 - statistics must never lose a finished cube
            log.warning(f"warning: road statistics failed: {type(err).__name__}: {err}")


def body_mounts(topo):
    """Names of the bushings between a body and the chassis (or the sprung
    body), the tyres and the sprung body's guide left out."""
    m = statics.mount_slot(topo)
    rig = statics.rig_bushings(topo)
    return [n for n, b in zip(topo.bushing_names, np.asarray(topo.bushing_bodies))
            if m in b and n not in rig]


def damage_equivalent_load(x, m, n_eq):
    """Damage-equivalent load range of a load history x [N]: rainflow cycles
    (ranges S_i, counts n_i; half cycles count 1/2) by the ``rainflow``
    library (ASTM E1049-85), Miner's rule with Woehler exponent m:
    (sum n_i S_i^m / n_eq)^(1/m) [N] - the range of ``n_eq`` constant-range
    cycles that do the same damage. 0 for a constant history."""
    import rainflow
    cyc = np.array(rainflow.count_cycles(np.asarray(x, float)), float).reshape(-1, 2)
    if not len(cyc):
        return 0.0
    return float((np.sum(cyc[:, 1] * cyc[:, 0] ** m) / n_eq) ** (1.0 / m))


def write_beside(out, path):
    """Add the variables of ``out`` to the cube at ``path`` (replacing them on
    a rerun) and keep the cube's group attributes as they were (xarray's
    append rewrites them: the ``coordinates`` list among them), then
    consolidate the metadata again (what xarray reads and the store's
    checks compare with the per-array files)."""
    import zarr
    raw = zarr.open_group(path, mode="r").attrs.asdict()
    out.attrs = {}
    out.to_zarr(path, mode="a", consolidated=False)
    g = zarr.open_group(path, mode="r+")
    g.attrs.put(raw)
    zarr.consolidate_metadata(path, zarr_format=2)


def statistics(ds, cfg, s):
    """The road's variables of the module doc, added to the cube (rewritten
    on a rerun), the log lines and the figure."""
    import xarray as xr
    from scipy import signal
    from sweep.results import status
    if not bool(np.all(ds.chunk_done.values)):      # another shard still writes: the last one computes them
        log.info("road statistics: the cube is not complete yet (another shard's chunks); they are added "
                 "by the run that completes it")
        return
    lc = OmegaConf.to_container(cfg.loadcase, resolve=True)
    t = ds.time.values
    t0, t1 = float(t[0]), float(t[-1])
    prof = profile_of(lc, t0, t1)
    rate, damping = tyre_values(OmegaConf.to_container(cfg.model.tyres, resolve=True))
    z = prof.height(t)                                               # (nt, 2)
    zdot = prof.rate(t)
    base_fz = np.array([float((lc["wheel_loads"].get(side) or {}).get("fz", 0.0)) for side in ("left", "right")])
    fz_in = base_fz + rate * z + damping * zdot                      # (nt, 2) wheel-centre input fz
    names = list(ds.bushing.values.astype(str))
    tyres = [names.index(f"{TYRE}_{side}") for side in ("left", "right")]
    mounts = [m for m in ds.attrs.get("body_mounts", []) if m in names]
    midx = [names.index(m) for m in mounts]
    codes = ds.status.values
    ok = np.isin(codes, status.VALUES_KEPT)
    sel = t >= t0 + float(lc.get("settle", 0.0)) - 1e-12
    fs = 1.0 / float(t[1] - t[0])
    nper = int(round(fs / float(lc.get("resolution", 0.5))))
    f_max = float(lc["road"]["f_max"])
    m_exp = float(lc.get("woehler_exponent", 5.0))
    n_eq = float(t1 - t0 - float(lc.get("settle", 0.0)))

    def welch(x):
        f, p = signal.welch(x[..., sel, :], fs=fs, nperseg=nper, axis=-2, detrend="constant")
        keep = (f > 0) & (f <= f_max)
        return f[keep], p[..., keep, :]

    def rms(x):
        return np.sqrt(np.mean((x[:, sel] - x[:, sel].mean(axis=1, keepdims=True)) ** 2, axis=1))
    f, p_road = welch(z[None])
    parts = {k: [] for k in ("contact", "lift", "p_wcz", "p_contact", "p_mount", "r_wcz", "r_contact",
                             "r_mount", "dels")}
    # blocks of variants: only the tyres' and mounts' forces are read (a cube of
    # thousands of variants does not fit in memory at once)
    for v0 in range(0, len(codes), STATISTICS_BLOCK):
        vs = slice(v0, min(v0 + STATISTICS_BLOCK, len(codes)))
        bf = ds.bushing_force.isel(variant=vs, bushing=tyres + midx).values   # (B, nt, 2 + nm, 6) on the ground
        # the law on the road (the tyre bushings' outputs are that law also
        # off the road): below zero the tyre is off it (a state event), no force
        on_road = fz_in[None] - bf[:, :, :2, 2]                          # (B, nt, 2)
        contact = np.maximum(on_road, 0.0)
        wcz = ds.wheel_centre_displacement.isel(variant=vs).values[..., 2]   # (B, nt, 2)
        mforce = bf[:, :, 2:, :3]                                        # (B, nt, nm, 3)
        p_mount = (welch(mforce.reshape(*mforce.shape[:2], -1))[1] if len(midx)
                   else np.zeros((len(contact), len(f), 0)))
        dels = np.full((len(contact), len(midx), 3), np.nan)
        for i, v in enumerate(range(vs.start, vs.stop)):
            if ok[v]:
                for j in range(len(midx)):
                    for a in range(3):
                        dels[i, j, a] = damage_equivalent_load(mforce[i, sel, j, a], m_exp, n_eq)
        for key, val in (("contact", contact), ("lift", np.any(on_road[:, sel] < 0.0, axis=1)),
                         ("p_wcz", welch(wcz)[1]), ("p_contact", welch(contact)[1]),
                         ("p_mount", p_mount.reshape(len(contact), len(f), len(midx), 3)),
                         ("r_wcz", rms(wcz)), ("r_contact", rms(contact)),
                         ("r_mount", rms(mforce) if len(midx) else np.zeros((len(contact), 0, 3))),
                         ("dels", dels)):
            parts[key].append(val)
    contact, lift, p_wcz, p_contact, p_mount, r_wcz, r_contact, r_mount, dels = (
        np.concatenate(parts[k]) for k in ("contact", "lift", "p_wcz", "p_contact", "p_mount", "r_wcz",
                                           "r_contact", "r_mount", "dels"))
    lift = np.where(ok, lift.T, False).T
    side_dims = ("variant", "side")
    out = xr.Dataset(
        {
            "road_height": (("time", "side"), z, {"units": "m", "long_name": "road height under each wheel"}),
            "tyre_contact_force": (("variant", "time", "side"), contact,
                                   {"units": "N", "long_name": "vertical road contact force on the wheel"}),
            "tyre_lift_off": (side_dims, lift.astype(np.int8),
                              {"long_name": "the wheel left the road after settle (a state event: the tyre "
                                            "law would pull)", "flag_values": [0, 1],
                               "flag_meanings": "always_on_the_road lifted_off"}),
            "psd_wheel_centre_z": (("variant", "frequency", "side"), p_wcz,
                                   {"units": "m^2/Hz", "long_name": "PSD of the wheel-centre vertical displacement"}),
            "psd_tyre_contact_force": (("variant", "frequency", "side"), p_contact,
                                       {"units": "N^2/Hz", "long_name": "PSD of the tyre contact force"}),
            "psd_mount_force": (("variant", "frequency", "mount", "force_axis"), p_mount,
                                {"units": "N^2/Hz", "long_name": "PSD of the body-mount force on the chassis"}),
            "psd_road": (("frequency", "side"), p_road[0], {"units": "m^2/Hz",
                                                           "long_name": "PSD of the road height (Welch)"}),
            "psd_road_target": (("frequency",), road.time_psd(f, road_of(lc)[0],
                                                              float(lc["road"]["speed"]),
                                                              float(lc["road"].get("waviness", 2.0))),
                                {"units": "m^2/Hz", "long_name": "ISO 8608 PSD of the road at the speed"}),
            "rms_wheel_centre_z": (side_dims, r_wcz, {"units": "m"}),
            "rms_tyre_contact_force": (side_dims, r_contact, {"units": "N"}),
            "rms_mount_force": (("variant", "mount", "force_axis"), r_mount, {"units": "N"}),
            "damage_equivalent_load": (("variant", "mount", "force_axis"), dels,
                                       {"units": "N", "woehler_exponent": m_exp, "equivalent_cycles": n_eq,
                                        "long_name": "1 Hz damage-equivalent load range (rainflow, Miner)"}),
        },
        coords={"frequency": ("frequency", f, {"units": "Hz", "long_name": "frequency of the PSDs"}),
                "mount": ("mount", np.array(mounts, dtype=str),
                          {"long_name": "body mount: a bushing between a body and the chassis (or the sprung body)"}),
                "force_axis": ("force_axis", np.array(FORCE_AXES),
                               {"long_name": "force component, vehicle frame"})})
    write_beside(out, s["path"])
    n_lift = int(lift.any(axis=1).sum())
    log.info(f"road: ISO 8608 Gd(n0) = {road_of(lc)[0]:.3g} m^3 at {lc['road']['speed']} m/s, "
             f"{len(prof.omega)} harmonics {lc['road']['f_min']}-{lc['road']['f_max']} Hz, coherence "
             f"{lc['road'].get('coherence', 0.0)}; tyre {rate:.4g} N/m, {damping:.4g} N s/m; "
             + (f"sprung body {float(cfg.model.sprung_body.mass_per_wheel):.4g} kg per wheel (free in heave and roll)"
                if cfg.model.get("sprung_body") is not None else "body held as on a rig"))
    if ok.any():
        rc = r_contact[ok]
        log.info("tyre contact force RMS (left, median over ok variants): "
                 f"{np.median(rc[:, 0]):.1f} N; body-mount DEL fz (median, m = {m_exp:g}): "
                 + ", ".join(f"{m} {np.nanmedian(dels[ok, j, 2]):.1f} N" for j, m in enumerate(mounts[:4]))
                 + (" ..." if len(mounts) > 4 else ""))
    if n_lift:
        log.info(f"{n_lift} variant(s) lift a wheel off the road (the tyre law would pull: a state event, "
                 "no road force until it lands): tyre_lift_off")
    from sweep.results.plots import draw_beside, road_spectra
    draw_beside(ds, s, lambda _ds, png: road_spectra(xr.open_zarr(s["path"], chunks=None), png),
                "road spectra plot", log)


KIND = RoughRoad()
