"""Overview plot of a result cube (PNG beside the cube).

One variant (a single run): what an engineer looks at after it - the time
histories of the wheel-centre x and z displacement, toe, camber and the
force of the reference bushing, left and right, from just before the load
step to the end of the run, titled with the model, load case and
integrator.

A sweep (more than one variant): the response in a window around the step
(not seconds of flat line before it), both sides, the *rise* of the
reference-bushing force from each variant's own static value (the preload
differs between variants), a few variants labelled with their parameter
values (those with the smallest, median and largest peak rise), and how the
parameters drive the response.

:func:`kc_sheet`: the one-page "K&C sheet" of a K&C cube (curves against
travel / force / torque, design-position metrics, compliance matrix).
"""
from __future__ import annotations

import os

import importlib

import numpy as np


class _LazyMatplotlib:
    """``matplotlib`` imported on first use (``matplotlib.colormaps``,
    ``matplotlib.ticker``): 0.4 s of start-up that a job which draws nothing
    (a rerun with nothing to do) does not pay."""

    def __getattr__(self, name):
        mpl = importlib.import_module("matplotlib")
        if name == "ticker":
            return importlib.import_module("matplotlib.ticker")
        return getattr(mpl, name)


matplotlib = _LazyMatplotlib()


def Figure(*args, **kwargs):  # noqa: N802 - stands for the class
    """``matplotlib.figure.Figure`` (no pyplot: no backend switch, no global state), imported when drawn."""
    from matplotlib.figure import Figure as _Figure
    return _Figure(*args, **kwargs)

SIDE_STYLE = {"left": "-", "right": "--"}


def change_times(ds):
    """Times of the load case's changes (steps, ramp starts and ends) within
    the run, from the job config (``loadcase.changes``); [] without them."""
    t = ds.time.values
    try:
        import yaml
        cfg = yaml.safe_load(ds.attrs.get("config", "")) or {}
        times = set()
        for c in (cfg.get("loadcase", {}).get("changes") or []):
            times.add(float(c["time"]))
            if float(c.get("duration") or 0.0) > 0:
                times.add(float(c["time"]) + float(c["duration"]))
        return sorted(x for x in times if t[0] <= x <= t[-1])
    except Exception:  # noqa: BLE001 - no marks rather than no figure
        return []


def step_time(ds):
    """Time of the first load change after the start: from the job config
    (``loadcase.changes``), else where the response first moves."""
    t = ds.time.values
    try:
        import yaml
        cfg = yaml.safe_load(ds.attrs.get("config", "")) or {}
        times = sorted(float(c["time"]) for c in (cfg.get("loadcase", {}).get("changes") or []))
        times = [x for x in times if t[0] <= x <= t[-1]]
        if times:
            return times[0]
    except Exception:  # noqa: BLE001 - fall back on the data
        pass
    x = np.asarray(ds.wheel_centre_displacement.isel(variant=0).sel(axis="x").values)
    dev = np.nanmax(np.abs(x - x[:1]), axis=-1)
    if not np.any(dev > 0):
        return float(t[0])
    i = int(np.argmax(dev > 1e-3 * np.nanmax(dev)))
    return float(t[max(0, i - 1)])


def _label(ds, v, params):
    if not params:
        return f"variant {v}"
    vals = ", ".join(f"{p}={float(ds[p].values[v]):.3g}" for p in params[:3])
    return f"v{v}: {vals}" + (" ..." if len(params) > 3 else "")


def save_png(fig, path, dpi):
    """Write a figure to ``path`` atomically (a temporary file beside it,
    then renamed): a kill mid-write never leaves a truncated picture."""
    tmp = f"{path}.tmp-{os.getpid()}.png"
    try:
        fig.savefig(tmp, dpi=dpi)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def png_intact(path) -> bool:
    """Whether ``path`` is a whole PNG file (signature first, IEND chunk last)."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            f.seek(-12, os.SEEK_END)
            tail = f.read(12)
    except OSError:
        return False
    return head == b"\x89PNG\r\n\x1a\n" and tail[4:8] == b"IEND"


def needs_drawing(ds, summary, path) -> bool:
    """A job's picture is drawn when its cube is complete and either this run
    computed something or the picture is missing or damaged (a kill after
    the last chunk, before or while the picture was written) - never when
    every variant failed (nothing but NaN to draw: ``summary["all_failed"]``)."""
    if summary.get("all_failed"):
        return False
    complete = bool(np.all(ds.chunk_done.values))
    return complete and (bool(summary.get("variants_run")) or not png_intact(path))


def draw_beside(ds, summary, draw, what, log):
    """Draw ``draw(ds, png)`` beside a job's cube (``<cube>.png``) where it
    is needed (:func:`needs_drawing`) and log where it is; a figure that
    fails is a warning, never a lost cube."""
    png = summary["path"].rstrip("/")[:-5] + ".png"
    if needs_drawing(ds, summary, png):
        try:
            draw(ds, png)
            log.info(f"{what}: {os.path.abspath(png)}")
        except Exception as err:  # noqa: BLE001 - a figure must never lose a finished cube
            log.warning(f"warning: {what} failed: {err}")


def overview(ds, path, n_samples=5, before=0.05, after=0.5):
    """Write the overview PNG of a time-response cube and return its path
    (the figure: :func:`overview_figure`)."""
    return save_png(overview_figure(ds, n_samples=n_samples, before=before, after=after), path, dpi=90)


def overview_figure(ds, n_samples=5, before=0.05, after=0.5):
    """The overview figure of a time-response cube: :func:`_single_run_figure`
    for a cube of one variant (whatever its status: a failed run says so in
    the title), :func:`_sweep_figure` for more than one variant (even if only
    one of them is ok: the sweep figure reports how many are)."""
    if ds.sizes["variant"] == 1:
        return _single_run_figure(ds, before=before)
    return _sweep_figure(ds, n_samples=n_samples, before=before, after=after)


METHOD_LABEL = {"lsrt2": "LSRT2", "ros34pw2": "ROS34PW2", "linear_implicit_euler": "linear-implicit Euler",
                "radau": "Radau"}
SIDE_COLOUR = {"left": "C0", "right": "C1"}
COMPONENT_COLOUR = {"fx": "C0", "fy": "C1", "fz": "C2"}


def _run_title(ds):
    """'model: load case, method h = .. ms (.. solver)' from the cube's
    attributes and its resolved config (parts that are missing are left out)."""
    try:
        import yaml
        cfg = yaml.safe_load(ds.attrs.get("config", "")) or {}
    except Exception:  # noqa: BLE001 - a title without the config
        cfg = {}
    lc = (cfg.get("loadcase") or {}).get("name")
    integ = cfg.get("integrator") or {}
    method = METHOD_LABEL.get(integ.get("name"), integ.get("name"))
    if method and integ.get("dt"):
        method += f", h = {float(integ['dt']) * 1e3:g} ms"
    if method and integ.get("solver"):
        method += f" ({integ['solver']} solver)"
    return f"{ds.attrs.get('model', 'model')}: " + ", ".join(x for x in (lc, method) if x)


def _single_run_figure(ds, before=0.05):
    """Time histories of one variant, from ``before`` s ahead of the load
    step to the end of the run, left and right wheel in every panel:
    wheel-centre x and z displacement from the static equilibrium [mm], toe
    and camber [deg] (DIN 70000), and the force of the reference bushing of
    each side (fx, fy, fz on its first body, vehicle frame) [kN]."""
    from sweep.results.status import MEANINGS as STATUS_MEANINGS
    t = ds.time.values
    ts = step_time(ds)
    marks = [x for x in change_times(ds) if x >= ts] or [ts]
    win = t >= ts - before - 1e-12
    if win.sum() < 2:
        win = np.ones_like(t, bool)
    tw = t[win]
    one = ds.isel(variant=0, time=np.flatnonzero(win))
    refs = {s: ds.attrs.get(f"reference_bushing_{s}") for s in ("left", "right")}

    fig = Figure(figsize=(14, 10), constrained_layout=True)
    axes = fig.subplots(3, 2)
    panels = [
        (axes[0, 0], "wheel-centre x (+ forward)", "x displacement from static [mm]",
         {s: one.wheel_centre_displacement.sel(side=s, axis="x").values * 1e3 for s in SIDE_STYLE}),
        (axes[0, 1], "wheel-centre z (+ up)", "z displacement from static [mm]",
         {s: one.wheel_centre_displacement.sel(side=s, axis="z").values * 1e3 for s in SIDE_STYLE}),
        (axes[1, 0], "toe (DIN 70000, + toe-in)", "toe [deg]", {s: one.toe.sel(side=s).values * DEG
                                                                  for s in SIDE_STYLE}),
        (axes[1, 1], "camber (DIN 70000, + top out)", "camber [deg]", {s: one.camber.sel(side=s).values * DEG
                                                                        for s in SIDE_STYLE}),
    ]
    for ax, title, ylabel, curves in panels:
        for s, y in curves.items():
            ax.plot(tw, y, SIDE_STYLE[s], color=SIDE_COLOUR[s], lw=1.1, label=s)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(ylabel)
        _tidy_time_axes(ax, tw, marks, np.concatenate(list(curves.values())))
        ax.legend(fontsize=8, loc="best")
    for ax, s in zip(axes[2], ("left", "right")):
        b = refs[s]
        if b is None or b not in ds.bushing.values:
            ax.set_title(f"reference bushing, {s}: not in the cube", fontsize=10)
            ax.set_axis_off()
            continue
        f = one.bushing_force.sel(bushing=b)
        ys = []
        for c, colour in COMPONENT_COLOUR.items():
            y = np.asarray(f.sel(component=c).values, float) / 1e3
            ys.append(y)
            ax.plot(tw, y, SIDE_STYLE[s], color=colour, lw=1.1, label=c)
        ax.set_title(f"reference bushing, {s}: {b}", fontsize=10)
        ax.set_ylabel("force on body 1, vehicle frame [kN]")
        _tidy_time_axes(ax, tw, marks, np.concatenate(ys))
        ax.legend(fontsize=8, loc="best", ncols=3)
    status = int(np.asarray(ds.status.values)[0])
    what = STATUS_MEANINGS.get(status, f"status {status}").replace("_", " ")
    params = [p for p in ds.attrs.get("parameters", []) if p in ds]
    line2 = f"variant {int(ds.variant.values[0])}: {what}"
    if params:
        line2 += " (" + ", ".join(f"{p} = {float(ds[p].values[0]):.4g}" for p in params[:6]) \
                 + (", ..." if len(params) > 6 else "") + ")"
    if len(marks) > 1:
        shown = ", ".join(f"{x:g}" for x in marks[:6]) + (", ..." if len(marks) > 6 else "")
        line2 += f"; load changes at {shown} s (dotted); left solid, right dashed"
    else:
        line2 += f"; load step at {ts:g} s (dotted); left solid, right dashed"
    fig.suptitle(f"{_run_title(ds)}\n{line2}")
    return fig


def _tidy_time_axes(ax, tw, marks, y):
    """Time axis over the window with the load changes ``marks`` [s] marked;
    plain tick labels; a flat (or all-NaN) curve gets a readable range
    instead of round-off ticks."""
    for x in marks:
        ax.axvline(x, color="k", lw=0.6, ls=":")
    ax.set_xlim(tw[0], tw[-1])
    ax.set_xlabel("time [s]")
    ax.grid(True, lw=0.4, color="0.85")
    ax.ticklabel_format(axis="both", style="plain", useOffset=False)
    fin = np.asarray(y, float)
    fin = fin[np.isfinite(fin)]
    if not fin.size:
        ax.set_ylim(-1.0, 1.0)
        ax.text(0.5, 0.5, "no finite values", ha="center", va="center", transform=ax.transAxes, color="0.4")
        return
    lo, hi = float(fin.min()), float(fin.max())
    c = 0.5 * (lo + hi)
    if hi - lo <= 1e-6 * abs(c) + 1e-12:
        _flat_ylim(ax, c)


def _flat_ylim(ax, c):
    """y-limits of a constant signal at ``c``: +-5 % about it, or +-1 about
    0 where it is 0 to round-off (a symmetric rigid axle's toe: 1e-17 deg),
    so that the ticks are not round-off digits."""
    if abs(c) < 1e-9:
        ax.set_ylim(-1.0, 1.0)
    else:
        ax.set_ylim(c - 0.05 * abs(c), c + 0.05 * abs(c))


def _sweep_figure(ds, n_samples=5, before=0.05, after=0.5):
    """The overview figure of a sweep.

    Top: longitudinal wheel-centre displacement and rise of the longitudinal
    reference-bushing force (from each variant's value just before the step)
    over [step - ``before``, step + ``after``], left side solid, right
    dashed, for up to ``n_samples`` variants (smallest / median / largest peak
    rise) over the envelope of all. Bottom: distribution of the peak force
    rise, the peak rise against the most influential parameter, and the
    Spearman rank correlation of every parameter with both responses."""
    from scipy.stats import spearmanr
    t = ds.time.values
    status = np.asarray(ds.status.values)
    ok = np.flatnonzero(status == 0)
    params = [p for p in ds.attrs.get("parameters", []) if p in ds]
    ts = step_time(ds)
    win = (t >= ts - before - 1e-12) & (t <= ts + after + 1e-12)
    if win.sum() < 2:
        win = np.ones_like(t, bool)
    i0 = max(0, int(np.searchsorted(t, ts - 1e-12)) - 1)      # last sample before the step
    refs = {s: ds.attrs[f"reference_bushing_{s}"] for s in ("left", "right")}
    sub = ds.isel(variant=ok)
    x = {s: np.asarray(sub.wheel_centre_displacement.sel(side=s, axis="x").values) * 1e3 for s in refs}
    f = {s: np.asarray(sub.bushing_force.sel(bushing=b, component="fx").values) / 1e3 for s, b in refs.items()}
    rise = {s: f[s] - f[s][:, i0:i0 + 1] for s in refs}
    peak = {s: np.nanmax(np.abs(rise[s][:, i0:]), axis=1) if len(ok) else np.array([]) for s in refs}
    settle = x["left"][:, -1] if len(ok) else np.array([])

    fig = Figure(figsize=(14, 8.5), constrained_layout=True)
    gs = fig.add_gridspec(2, 6)
    ax_x, ax_f = fig.add_subplot(gs[0, :3]), fig.add_subplot(gs[0, 3:])
    ax_h, ax_p, ax_r = fig.add_subplot(gs[1, :2]), fig.add_subplot(gs[1, 2:4]), fig.add_subplot(gs[1, 4:])
    if len(ok):
        order = np.argsort(peak["left"])
        pick = order[np.unique(np.linspace(0, len(order) - 1, min(n_samples, len(order))).round().astype(int))]
        colors = matplotlib.colormaps["viridis"](np.linspace(0, 0.9, len(pick)))
        tw = t[win]
        for a, y in ((ax_x, x), (ax_f, rise)):
            for s in refs:
                yw = y[s][:, win]
                if len(ok) > 1:
                    a.fill_between(tw, np.nanmin(yw, 0), np.nanmax(yw, 0), color="0.88", lw=0)
            for c, i in zip(colors, pick):
                for s in refs:
                    a.plot(tw, y[s][i, win], SIDE_STYLE[s], color=c, lw=1.1,
                           label=_label(ds, int(ok[i]), params) if s == "left" else None)
            a.axvline(ts, color="k", lw=0.6, ls=":")
            a.set_xlabel("time [s]")
            a.set_xlim(tw[0], tw[-1])
        ax_x.set_ylabel("wheel-centre x displacement [mm]")
        ax_x.set_title("longitudinal wheel-centre displacement (left solid, right dashed)", fontsize=10)
        ax_f.set_ylabel("rise of fx from static [kN]")
        ax_f.set_title(f"reference bushing fx - static value ({refs['left']} solid, right dashed)", fontsize=10)
        lo, hi = ax_f.get_ylim()
        ax_f.set_ylim(lo, hi + 0.45 * (hi - lo))                 # headroom for the legend
        ax_f.legend(fontsize=7, loc="upper right", title="variants (grey: envelope of all)",
                    title_fontsize=7)
        both = np.concatenate([peak["left"], peak["right"]])
        span = None
        c = float(np.mean(both)) if len(both) else 0.0
        if len(both) and np.ptp(both) <= 1e-6 * max(abs(c), 1e-9):   # one value (e.g. one variant): +-5 %
            span = (c - 0.05 * abs(c) - 1e-9, c + 0.05 * abs(c) + 1e-9)
        ax_h.hist([peak["left"], peak["right"]], bins=min(40, max(5, len(both) // 8)), range=span,
                  label=["left", "right"])
        ax_h.ticklabel_format(axis="x", useOffset=False)
        ax_h.set_xlabel("peak |rise of fx| after the step [kN]")
        ax_h.set_ylabel("variants")
        ax_h.legend(fontsize=7)
    rho = {}
    if params and len(ok) > 2:
        for p in params:
            v = np.asarray(sub[p].values)
            rho[p] = (spearmanr(v, peak["left"]).statistic, spearmanr(v, settle).statistic)
        best = max(params, key=lambda p: abs(np.nan_to_num(rho[p][0])))
        v = np.asarray(sub[best].values)
        ax_p.scatter(v, peak["left"], s=28, facecolors="none", edgecolors="C0", label="left")
        ax_p.scatter(v, peak["right"], s=12, marker="x", color="C1", label="right")
        if ds[best].attrs.get("scale") == "log":
            ax_p.set_xscale("log")
            ax_p.xaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
            ax_p.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax_p.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        units = ds[best].attrs.get("units", "")
        ax_p.set_xlabel(f"{best} [{units}]")
        ax_p.set_ylabel("peak |rise of fx| [kN]")
        ax_p.set_title(f"most influential parameter (Spearman rho = {rho[best][0]:+.2f})", fontsize=10)
        ax_p.legend(fontsize=7)
        y = np.arange(len(params))
        ax_r.barh(y - 0.2, [rho[p][0] for p in params], 0.4, label="peak fx rise")
        ax_r.barh(y + 0.2, [rho[p][1] for p in params], 0.4, label="final x displacement")
        ax_r.set_yticks(y)
        ax_r.set_yticklabels(params, fontsize=7)
        ax_r.axvline(0, color="k", lw=0.6)
        ax_r.set_xlim(-1, 1)
        ax_r.set_xlabel("Spearman rank correlation (left side)")
        ax_r.legend(fontsize=7)
    else:
        for a in (ax_p, ax_r):
            a.text(0.5, 0.5, "parameter influence needs a sweep\n(3 or more ok variants)", ha="center",
                   va="center", transform=a.transAxes, color="0.4")
            a.set_axis_off()
    fig.suptitle(f"{ds.attrs.get('model', '')}: {len(ok)} of {len(status)} variants ok; "
                 f"step at {ts:g} s")
    return fig


# --------------------------------------------------------------------------- K&C sheet

DEG = 180.0 / np.pi
A4_LANDSCAPE = (11.69, 8.27)              # inches
KC_GOOD = (0, 4, 5)  # sweep.results.status OK, LOAD_STEP_FAILED, IMPLAUSIBLE: metrics valid (some load steps NaN)
# step axis of each analysis: (label, sign convention)
KC_STEP_LABEL = {
    "wheel_travel": ("wheel travel", "bump > 0"),
    "lateral_force": ("lateral force per wheel", "inboard at the contact patch > 0"),
    "traction_force": ("traction force per wheel", "forward at the wheel centre > 0"),
    "braking_force": ("braking force per wheel", "rearward at the contact patch > 0"),
    "aligning_torque": ("aligning torque per wheel", "toe-out sense > 0"),
    "steering": ("rack travel", "rack to the left > 0, wheel heights held; steer angle (ISO, + left) = "
                 "-toe left, +toe right"),
}
# (x, y) metrics of the across-variants scatter, per analysis (first: the y
# metric also orders the thin curves' colours)
KC_KEY_METRICS = {
    "wheel_travel": ("wheel_rate", "bump_steer"),
    "wheel_travel_opposite": ("roll_wheel_rate", "roll_steer"),
    "lateral_force": ("lateral_compliance", "toe_per_lateral_force"),
    "traction_force": ("longitudinal_compliance", "toe_per_traction_force"),
    "braking_force": ("longitudinal_compliance_braking", "toe_per_braking_force"),
    "aligning_torque": ("camber_per_aligning_torque", "toe_per_aligning_torque"),
    "steering": ("design_scrub_radius", "toe_per_rack_travel"),
}
# metrics of each analysis, set in bold in the metrics table
KC_ANALYSIS_METRICS = {
    "wheel_travel": ("bump_steer", "camber_gain", "wheel_rate", "roll_steer", "roll_camber_gain",
                     "roll_wheel_rate"),
    "lateral_force": ("toe_per_lateral_force", "camber_per_lateral_force", "lateral_compliance"),
    "traction_force": ("toe_per_traction_force", "camber_per_traction_force", "longitudinal_compliance"),
    "braking_force": ("toe_per_braking_force", "camber_per_braking_force", "longitudinal_compliance_braking"),
    "aligning_torque": ("toe_per_aligning_torque", "camber_per_aligning_torque"),
    "steering": ("toe_per_rack_travel", "design_caster", "design_kingpin_inclination", "design_caster_trail",
                 "design_scrub_radius"),
}
KC_DOF_LABELS = ("x [mm]", "y [mm]", "z [mm]", "rx [deg]", "ry [deg]", "rz [deg]")
KC_LOAD_LABELS = ("Fx\n[kN]", "Fy\n[kN]", "Fz\n[kN]", "Mx\n[kN m]", "My\n[kN m]", "Mz\n[kN m]")


def _kc_step(ds):
    """(name, values in plotting units, axis label, sign convention) of the
    cube's step dimension: travel in mm, force in kN, torque in N m."""
    dim = ds.toe.dims[1]
    x = np.asarray(ds[dim].values, float)
    units = ds[dim].attrs.get("units", {"travel": "m", "force": "N", "torque": "N m"}.get(dim, ""))
    scale, shown = {"m": (1e3, "mm"), "N": (1e-3, "kN"), "N m": (1.0, "N m"), "rad": (DEG, "deg")}.get(
        units, (1.0, units))
    analysis = ds.attrs.get("analysis", "")
    what, sense = KC_STEP_LABEL.get(analysis, (dim.replace("_", " "), ""))
    if analysis == "wheel_travel" and ds.attrs.get("travel_mode") == "opposite":
        sense = "opposite: left +s, right -s"
    return dim, x * scale, f"{what.replace(' per wheel', '')} [{shown}]", f"{what}: {sense}" if sense else what


def _kc_curves(ds):
    """[(key, title, y label, DataArray (variant, step[, side]) in plotting
    units)] of the curve panels, in sheet order, for the variables the cube has."""
    def has(name):
        return name in ds.variables

    def wc(axis):
        return ds.wheel_centre_displacement.sel(axis=axis) * 1e3

    p = {}
    if has("toe"):
        p["toe"] = ("toe", "toe [deg]  (+ toe-in)", ds.toe * DEG)
    if has("camber"):
        p["camber"] = ("camber", "camber [deg]  (+ top out)", ds.camber * DEG)
    if has("wheel_load"):
        p["fz"] = ("vertical wheel load", "Fz at the wheel centre [N]", ds.wheel_load.sel(component="fz"))
    if has("wheel_centre_displacement"):
        p["x"] = ("wheel-centre x", "x displacement [mm]  (+ forward)", wc("x"))
        p["y"] = ("wheel-centre y", "y displacement [mm]  (+ left)", wc("y"))
        p["z"] = ("wheel-centre z", "z displacement [mm]  (+ up)", wc("z"))
    if has("half_track_change"):
        p["htc"] = ("half-track change", "half-track change [mm]  (+ outboard)", ds.half_track_change * 1e3)
    if has("roll_centre_height"):
        p["rch"] = ("roll-centre height (axle)", "roll-centre height [mm]", ds.roll_centre_height * 1e3)
    if has("caster"):
        p["caster"] = ("caster", "caster [deg]  (+ top rearward)", ds.caster * DEG)
    if has("kingpin_inclination"):
        p["kpi"] = ("kingpin inclination", "kingpin inclination [deg]  (+ top inboard)",
                    ds.kingpin_inclination * DEG)
    if has("caster_trail"):
        p["trail"] = ("caster trail", "caster trail [mm]  (+ axis ahead)", ds.caster_trail * 1e3)
    if has("scrub_radius"):
        p["scrub"] = ("scrub radius", "scrub radius [mm]  (+ axis inboard)", ds.scrub_radius * 1e3)
    if has("ackermann_error"):
        p["ack"] = ("Ackermann error (axle)", "outer wheel: steer - Ackermann [deg]", ds.ackermann_error * DEG)
    if has("percent_ackermann"):
        p["pack"] = ("percent Ackermann (axle)", "Ackermann [%]", ds.percent_ackermann)
    analysis = ds.attrs.get("analysis")
    if analysis == "wheel_travel":
        # z is the prescribed travel itself: no panel
        order = ("toe", "camber", "fz", "htc", "rch", "x", "y", "caster", "kpi", "trail", "scrub")
    elif analysis == "steering":
        # wheel heights held: no z panel
        order = ("toe", "camber", "ack", "pack", "caster", "kpi", "trail", "scrub", "x", "y", "htc", "rch", "fz")
    else:
        order = ("toe", "camber", "x", "y", "z", "htc", "rch", "caster", "kpi", "trail", "scrub", "fz")
    return [(k, *p[k]) for k in order if k in p]


def _tidy(ax, y=None):
    """Plain tick labels without an offset; a flat curve (constant within
    round-off) gets +-5 % (or +-1) around its value instead of ticks that
    differ in the 10th digit."""
    ax.ticklabel_format(axis="both", style="plain", useOffset=False)
    ax.tick_params(labelsize=7)
    if y is None:
        return
    fin = np.asarray(y, float)
    fin = fin[np.isfinite(fin)]
    if fin.size:
        lo, hi = float(fin.min()), float(fin.max())
        c = 0.5 * (lo + hi)
        if hi - lo <= 1e-6 * abs(c) + 1e-12:
            _flat_ylim(ax, c)


def kc_variants(ds, max_variants, key=None):
    """(reference variant, thin variants ordered by ``key`` (left side) where
    finite, else by index) - at most ``max_variants`` thin ones, picked evenly
    over the good variants."""
    status = np.asarray(ds.status.values)
    good = np.flatnonzero(np.isin(status, KC_GOOD))
    ref = 0 if (len(status) and status[0] in KC_GOOD) or not len(good) else int(good[0])
    others = good[good != ref]
    if key is not None and key in ds.variables and len(others):
        k = np.asarray(ds[key].isel(variant=others).sel(side="left").values, float)
        if np.isfinite(k).any():
            others = others[np.argsort(np.where(np.isfinite(k), k, np.inf), kind="stable")]   # NaN last
    if len(others) > max_variants:
        others = others[np.unique(np.linspace(0, len(others) - 1, max(max_variants, 0)).round().astype(int))] \
            if max_variants > 0 else others[:0]
    return ref, others


def _fmt(v, digits=4):
    if not np.isfinite(v):
        return "n/a"
    if abs(v) < 1e-9:              # round-off of an exact zero (engineering units)
        return "0"
    if abs(v) >= 1e6 or abs(v) < 1e-3:
        return f"{v:.{max(digits - 3, 0)}e}".replace("e-0", "e-").replace("e+0", "e")
    if abs(v) >= 10 ** digits:
        return f"{v:.0f}"
    return f"{v:.{digits}g}"


def _kc_metric_names(ds):
    """(per-side metrics, axle metrics) present in the cube, in
    :data:`kernels.kc.METRICS` / ``AXLE_METRICS`` order where known."""
    try:
        from kernels.kc import AXLE_METRICS, METRICS
        known, known_axle = list(METRICS), list(AXLE_METRICS)
    except Exception:  # noqa: BLE001 - cube order only
        known, known_axle = [], []
    skip = set(ds.attrs.get("parameters", [])) | {"status", "equilibrium_iterations"}
    side = [n for n, v in ds.data_vars.items() if v.dims == ("variant", "side") and n not in skip]
    axle = [n for n, v in ds.data_vars.items() if v.dims == ("variant",) and n not in skip
            and "units" in v.attrs]
    side = [n for n in known if n in side] + [n for n in side if n not in known]
    axle = [n for n in known_axle if n in axle] + [n for n in axle if n not in known_axle]
    return side, axle


def _kc_table(ax, ds, ref, analysis):
    side, axle = _kc_metric_names(ds)
    bold = set(KC_ANALYSIS_METRICS.get(analysis, ()))
    rows = [(n, *(float(x) for x in np.asarray(ds[n].isel(variant=ref).values, float)),
             ds[n].attrs.get("units", "")) for n in side]
    rows += [(n, float(ds[n].isel(variant=ref).values), None, ds[n].attrs.get("units", "")) for n in axle]
    ax.set_axis_off()
    ax.set_title(f"design-position metrics, variant {ref}", fontsize=9)
    n = len(rows) + 1
    dy = min(1.0 / max(n, 1), 0.028)
    fs = 6.2
    cols = (0.0, 0.635, 0.805, 0.82)
    y = 1.0
    for x, text, ha in zip(cols, ("metric", "left", "right", "units"), ("left", "right", "right", "left")):
        ax.text(x, y, text, ha=ha, va="top", fontsize=fs, weight="bold", transform=ax.transAxes)
    ax.plot([0, 1], [y - 0.9 * dy] * 2, color="0.5", lw=0.5, transform=ax.transAxes, clip_on=False)
    for name, left, right, units in rows:
        y -= dy
        w = "bold" if name in bold else "normal"
        label = name.replace("_", " ") + (" (axle)" if right is None else "")
        ax.text(cols[0], y, label, ha="left", va="top", fontsize=fs, weight=w, transform=ax.transAxes)
        if right is None:
            ax.text(cols[2], y, _fmt(left), ha="right", va="top", fontsize=fs, weight=w,
                    transform=ax.transAxes)
        else:
            ax.text(cols[1], y, _fmt(left), ha="right", va="top", fontsize=fs, weight=w, transform=ax.transAxes)
            ax.text(cols[2], y, _fmt(right), ha="right", va="top", fontsize=fs, weight=w,
                    transform=ax.transAxes)
        ax.text(cols[3], y, units, ha="left", va="top", fontsize=fs - 0.4, color="0.3", transform=ax.transAxes)


def _kc_compliance(fig, ax, ds, ref):
    """The 6x6 wheel-centre compliance matrix of variant ``ref``, left wheel,
    in engineering units (mm or deg per kN or kN m: SI m/N and m/(N m) x 1e6,
    rad/N and rad/(N m) x 1e3 * 180/pi), colour on a symmetric log scale."""
    from matplotlib.colors import SymLogNorm
    cm = ds.compliance_matrix.transpose("variant", "side", "dof", "component")
    C = np.asarray(cm.isel(variant=ref).sel(side="left").values, float)
    scale = np.ones((6, 6))
    scale[:3, :] = 1e6               # m/N -> mm/kN, m/(N m) -> mm/(kN m)
    scale[3:, :] = 1e3 * DEG         # rad/N -> deg/kN, rad/(N m) -> deg/(kN m)
    E = C * scale
    ax.set_title(f"compliance matrix, variant {ref}, left wheel\n"
                 "mm or deg per kN or kN m (colour: symmetric log)", fontsize=8)
    if not np.isfinite(E).any():
        ax.text(0.5, 0.5, "compliance matrix n/a", ha="center", va="center", color="0.4", transform=ax.transAxes)
        ax.set_axis_off()
        return
    vmax = float(np.nanmax(np.abs(E)))
    vmax = vmax if vmax > 0 else 1.0
    norm = SymLogNorm(linthresh=vmax * 1e-4, linscale=0.5, vmin=-vmax, vmax=vmax, base=10)
    im = ax.imshow(np.where(np.isfinite(E), E, 0.0), cmap="RdBu_r", norm=norm, aspect="auto")
    ax.set_xticks(range(6))
    ax.set_xticklabels(KC_LOAD_LABELS, fontsize=6.5)
    ax.set_yticks(range(6))
    ax.set_yticklabels(KC_DOF_LABELS, fontsize=6.5)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for k in (2.5,):
        ax.axhline(k, color="k", lw=0.8)
        ax.axvline(k, color="k", lw=0.8)
    for i in range(6):
        for j in range(6):
            v = E[i, j]
            dark = np.isfinite(v) and abs(norm(v) - 0.5) > 0.33
            ax.text(j, i, _fmt(v, 3) if np.isfinite(v) else "n/a", ha="center", va="center", fontsize=5.8,
                    color="w" if dark else "k", weight="bold" if i == j else "normal")
    cb = fig.colorbar(im, ax=ax, shrink=0.9, pad=0.02)
    top = int(np.floor(np.log10(vmax)))
    dec = [10.0 ** k for k in range(top, top - 5, -2) if 10.0 ** k >= 10 * norm.linthresh]
    cb.set_ticks([*dec, 0.0, *(-d for d in dec)])
    cb.ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    cb.ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    cb.ax.tick_params(labelsize=6)


def _kc_scatter(ax, ds, ref, keys):
    """One key metric against another across the good variants (left o,
    right x, the reference variant starred); a histogram when only one is
    defined; None when nothing to show."""
    status = np.asarray(ds.status.values)
    good = np.flatnonzero(np.isin(status, KC_GOOD))
    if len(good) < 2:
        return False
    names = [k for k in keys if k in ds.variables
             and np.isfinite(np.asarray(ds[k].isel(variant=good).values, float)).any()]
    if not names:
        return False
    unit = {k: ds[k].attrs.get("units", "") for k in names}
    val = {k: np.asarray(ds[k].isel(variant=good).transpose("variant", "side").values, float) for k in names}
    if len(names) == 1:
        k = names[0]
        ax.hist([val[k][:, 0], val[k][:, 1]], bins=min(30, max(5, len(good) // 4)), label=["left", "right"],
                histtype="stepfilled", alpha=0.6)
        ax.set_xlabel(f"{k.replace('_', ' ')}\n[{unit[k]}]", fontsize=7)
        ax.set_ylabel("variants", fontsize=7)
    else:
        kx, ky = names
        ax.scatter(val[kx][:, 0], val[ky][:, 0], s=14, facecolors="none", edgecolors="C0", lw=0.8, label="left")
        ax.scatter(val[kx][:, 1], val[ky][:, 1], s=12, marker="x", color="C1", lw=0.8, label="right")
        i = np.flatnonzero(good == ref)
        if len(i):
            ax.scatter(val[kx][i, 0], val[ky][i, 0], s=90, marker="*", color="k", zorder=3,
                       label=f"variant {ref}")
        ax.set_xlabel(f"{kx.replace('_', ' ')}\n[{unit[kx]}]", fontsize=7)
        ax.set_ylabel(f"{ky.replace('_', ' ')}\n[{unit[ky]}]", fontsize=7)
    ax.set_title(f"across the {len(good)} good variants", fontsize=8)
    ax.legend(fontsize=6, loc="best")
    _tidy(ax)
    return True


def kc_sheet(ds, path, max_variants=12):
    """Write the "K&C sheet" PNG of a K&C cube (``xarray.open_zarr`` of a
    ``loadcase=kc_*`` job) and return ``path``.

    One A4-landscape page: the curves against the load case's step variable
    (travel in mm, force in kN, torque in N m) - toe, camber, vertical wheel
    load (wheel travel: the force-travel curve, slope = wheel rate),
    wheel-centre displacement, half-track change, roll-centre height and the
    steering geometry (caster, kingpin inclination, trail, scrub; panels of
    all-NaN channels are left out) - left wheel solid, right dashed, the
    reference variant (variant 0 - the nominal axle in a single-variant
    job, the design's first sample otherwise; the first good one if it
    failed) bold black, up to ``max_variants`` other good variants thin,
    picked evenly over the analysis' key metric; the design-position metrics
    of the reference variant (left / right, units, the analysis' own in
    bold, axle metrics); its left wheel's 6x6 compliance matrix in mm or deg
    per kN or kN m; and, with several good variants, a scatter of two key
    metrics across them."""
    from matplotlib.lines import Line2D
    analysis = ds.attrs.get("analysis", "")
    mode = ds.attrs.get("travel_mode", "") or ""
    keys = KC_KEY_METRICS.get(f"{analysis}_{mode}" if mode == "opposite" else analysis,
                              KC_KEY_METRICS["wheel_travel"])
    status = np.asarray(ds.status.values)
    ref, others = kc_variants(ds, max_variants, key=keys[1])
    dim, xs, xlabel, sense = _kc_step(ds)
    picks = np.concatenate([others, [ref]]).astype(int)
    curves = []
    for key, title, ylabel, da in _kc_curves(ds):
        order = ("variant", dim, "side") if "side" in da.dims else ("variant", dim)
        y = np.asarray(da.isel(variant=picks).transpose(*order).values, float)
        if np.isfinite(y).any():
            curves.append((key, title, ylabel, y))
    has_scatter = int((np.isin(status, KC_GOOD)).sum()) >= 2

    fig = Figure(figsize=A4_LANDSCAPE, layout="constrained")
    outer = fig.add_gridspec(1, 2, width_ratios=[2.65, 1])
    left = outer[0].subgridspec(3, 5)
    slots = [(r, c) for r in range(2) for c in range(5)] + [(2, c) for c in range(3)]
    right = outer[1].subgridspec(1, 1)
    colours = matplotlib.colormaps["viridis"](np.linspace(0.05, 0.85, max(len(others), 1)))
    n_used = 0
    for (key, title, ylabel, y), (r, c) in zip(curves, slots):
        ax = fig.add_subplot(left[r, c])
        for j, v in enumerate(picks):
            is_ref = v == ref
            colour, lw = ("k", 1.8) if is_ref else (colours[j], 0.7)
            if y.ndim == 3:
                for s, ls in enumerate(SIDE_STYLE.values()):
                    ax.plot(xs, y[j, :, s], ls, color=colour, lw=lw, zorder=3 if is_ref else 2)
            else:
                ax.plot(xs, y[j], "-", color=colour, lw=lw, zorder=3 if is_ref else 2)
        if key == "fz" and analysis == "wheel_travel":
            wr = [float(np.asarray(ds.wheel_rate.isel(variant=ref).values)[s]) for s in range(2)] \
                if "wheel_rate" in ds.variables else []
            if wr and np.isfinite(wr).all():
                ax.text(0.97, 0.04, f"design wheel rate\n{_fmt(wr[0], 3)} / {_fmt(wr[1], 3)} N/mm",
                        transform=ax.transAxes, ha="right", va="bottom", fontsize=6.5, color="0.25")
        ax.set_title(title, fontsize=8.5)
        ax.set_ylabel(ylabel, fontsize=7)
        ax.set_xlabel(xlabel, fontsize=7)
        if xs.min() < 0 < xs.max():
            ax.axvline(0.0, color="0.6", lw=0.5, zorder=1)
        ax.grid(True, lw=0.3, color="0.85")
        _tidy(ax, y)
        n_used += 1
    free = slots[n_used:]
    ax_c = fig.add_subplot(left[2, 3:])
    _kc_compliance(fig, ax_c, ds, ref)
    if has_scatter and free:
        (r, c), wide = free[0], len(free) > 1 and free[1][0] == free[0][0]      # two free slots: span both
        ax_s = fig.add_subplot(left[r, c:c + 2] if wide else left[r, c])
        if not _kc_scatter(ax_s, ds, ref, keys):
            ax_s.set_axis_off()
        free = free[2 if wide else 1:]
    skipped = [t for k, t, *_ in _kc_curves(ds) if t not in {c[1] for c in curves}]
    if skipped and free:
        ax_n = fig.add_subplot(left[free[0]])
        ax_n.set_axis_off()
        ax_n.text(0.0, 1.0, "n/a for this model / run (all NaN):\n" + "\n".join(skipped), fontsize=7,
                  color="0.4", va="top", ha="left", transform=ax_n.transAxes)
    _kc_table(fig.add_subplot(right[0, 0]), ds, ref, analysis)

    from sweep.results.status import MEANINGS
    counts = ", ".join(f"{int((status == k).sum())} {m.replace('_', ' ')}" for k, m in MEANINGS.items()
                       if (status == k).any())
    what = analysis.replace("_", " ") + (f" ({mode})" if mode else "")
    fig.suptitle(f"K&C sheet - {ds.attrs.get('model', '?')}: {what}; {len(status)} variant(s): {counts}",
                 fontsize=12, weight="bold")
    handles = [Line2D([], [], color="k", lw=1.8, label=f"variant {ref}" + ("" if ref == 0 else
                                                                            " (variant 0 failed)")),
               Line2D([], [], color="0.3", ls="-", lw=1, label="left wheel: solid"),
               Line2D([], [], color="0.3", ls="--", lw=1, label="right wheel: dashed")]
    if len(others):
        total = int(np.isin(status, KC_GOOD).sum()) - 1
        handles.append(Line2D([], [], color=colours[len(colours) // 2], lw=0.8,
                              label=f"thin: {len(others)} of {total} other good variants "
                                    f"(colour: {keys[1].replace('_', ' ')} left, low to high)"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=7.5, frameon=False,
               title=f"{sense}; vehicle frame x forward, y left, z up; toe + = toe-in, camber + = top out "
                     "(DIN 70000); curves from the design position", title_fontsize=7.5)
    return save_png(fig, path, dpi=150)


def sobol_figure(si, path=None, dpi=120):
    """Bar chart of Sobol' indices (:func:`sweep.sensitivity.sobol_indices`):
    one panel per output, per parameter the first-order index S1 and the
    total index ST side by side with their confidence intervals as error
    bars (``S1_conf``, ``ST_conf``). An output without indices (the same in
    every variant) says so in its panel. Returns the figure; ``path``: also
    written there as a PNG."""
    outputs = [str(o) for o in si["output"].values]
    params = [str(p) for p in si["parameter"].values]
    n = len(outputs)
    ncol = min(n, 3)
    nrow = -(-n // ncol)
    fig = Figure(figsize=(max(4.2, 0.55 * len(params) + 1.8) * ncol, 3.3 * nrow + 0.5), layout="constrained")
    axes = fig.subplots(nrow, ncol, squeeze=False, sharey=True)
    x = np.arange(len(params))
    w = 0.38
    units = si["units"].values if "units" in si.coords else [""] * n
    for k, out in enumerate(outputs):
        ax = axes.flat[k]
        s1, st = si["S1"].values[k], si["ST"].values[k]
        c1, ct = si["S1_conf"].values[k], si["ST_conf"].values[k]
        ax.axhline(0.0, color="0.5", lw=0.6)
        ax.bar(x - w / 2, s1, w, yerr=c1, capsize=3, color="C0", label="S1 (first order)",
               error_kw={"lw": 0.9})
        ax.bar(x + w / 2, st, w, yerr=ct, capsize=3, color="C1", label="ST (total)", error_kw={"lw": 0.9})
        title = out + (f" [{units[k]}]" if str(units[k]) else "")
        if np.all(np.isnan(s1)):
            ax.text(0.5, 0.5, "no indices: the output is the\nsame in every variant", ha="center",
                    va="center", transform=ax.transAxes, fontsize=8, color="0.4")
        else:
            title += f"\nsum S1 = {np.nansum(s1):.2f}"
        if "n_failed" in si and int(si["n_failed"].values[k]):
            title += f"; {int(si['n_failed'].values[k])} failed ({si.attrs.get('fill', '')})"
        ax.set_title(title, fontsize=9)
        ax.set_xticks(x, params, rotation=30 if len(params) > 3 else 0, ha="right" if len(params) > 3 else "center",
                      fontsize=8)
        ax.grid(True, axis="y", lw=0.3, color="0.85")
        if k % ncol == 0:
            ax.set_ylabel("Sobol' index")
    for ax in axes.flat[n:]:
        ax.set_axis_off()
    lo = np.nanmin([0.0, *np.ravel(si["S1"].values - si["S1_conf"].values)])
    hi = np.nanmax([1.0, *np.ravel(si["ST"].values + si["ST_conf"].values)])
    axes.flat[0].set_ylim(max(lo, -0.5) - 0.05, min(hi, 1.5) + 0.05)
    axes.flat[0].legend(fontsize=7.5, loc="upper right")
    a = si.attrs
    fig.suptitle(f"Sobol' indices{' - ' + a['model'] if a.get('model') else ''}: Saltelli design, "
                 f"N = {a.get('n_base', '?')}, {a.get('n_variants', '?')} variants; error bars: "
                 f"{float(a.get('conf_level', 0.95)):.0%} confidence (bootstrap)", fontsize=10)
    if path is not None:
        save_png(fig, path, dpi=dpi)
    return fig


def bode_figure(ds, path=None, max_variants=12, dpi=120):
    """Bode figure of a frequency-response cube: magnitude (log-log) and phase
    of the wheel-centre receptance along each input's own direction at the
    input's wheel (vertical, lateral, longitudinal as present) and of the
    largest body-mount force per unit vertical input (phase unwrapped over
    frequency), and a sprung body's heave where the cube has it (the body
    mode), one line per variant
    (at most ``max_variants``: the nominal and evenly picked others; the band
    of all ok variants shaded). Returns the figure; ``path``: also a PNG."""
    from sweep.results import status as st
    from sweep.results.cube import complex_of
    f = ds.frequency.values
    ok = np.nonzero(np.isin(ds.status.values, (st.OK, st.IMPLAUSIBLE)))[0]
    inputs = [str(i) for i in ds.input.values] if ds.sizes.get("input", 0) else []
    roads = [str(i) for i in ds.road_input.values] if ds.sizes.get("road_input", 0) else []
    panels = []
    if inputs:
        h = complex_of(ds, "wheel_centre_receptance")
        panels += [(f"{i} -> wheel centre {i[-1]}", "mm/kN", 1e6,
                    lambda v, i=i: h.isel(variant=v).sel(input=i, side=i[:-3], axis=i[-1]).values) for i in inputs]
    if roads:
        hr = complex_of(ds, "wheel_centre_road_transmissibility")
        panels += [(f"{i} -> wheel centre z", "m/m", 1.0,
                    lambda v, i=i: hr.isel(variant=v).sel(road_input=i, side=i[:-5], axis="z").values)
                   for i in roads]
    if roads and "body_heave_road_transmissibility_real" in ds:     # a sprung body: the ride's body mode
        hb = complex_of(ds, "body_heave_road_transmissibility")
        panels.append((f"{roads[0]} -> body heave", "m/m", 1.0,
                       lambda v: hb.isel(variant=v).sel(road_input=roads[0]).values))
    elif inputs and "body_heave_receptance_real" in ds:
        hb = complex_of(ds, "body_heave_receptance")
        vz = next((i for i in inputs if i.endswith("fz")), inputs[0])
        panels.append((f"{vz} -> body heave", "mm/kN", 1e6, lambda v: hb.isel(variant=v).sel(input=vz).values))
    if inputs:
        m, dim, units = complex_of(ds, "mount_transfer"), "input", "N/N"
        vin = next((i for i in inputs if i.endswith("fz")), inputs[0])
    else:
        m, dim, units, vin = complex_of(ds, "mount_road_transfer"), "road_input", "N/m", roads[0]
    if ds.sizes.get("mount", 0) and len(ok):
        mag = np.abs(m.isel(variant=int(ok[0])).sel({dim: vin}).sel(component=["fx", "fy", "fz"]).values)
        k, c = np.unravel_index(np.nanargmax(np.nanmax(mag, axis=0)), mag.shape[1:])
        mount, comp = str(ds.mount.values[k]), ("fx", "fy", "fz")[c]
        panels.append((f"{vin} -> {mount} {comp}", units, 1.0,
                       lambda v: m.isel(variant=v).sel({dim: vin}).sel(mount=mount, component=comp).values))
    fig = Figure(figsize=(4.0 * len(panels), 6.0), layout="constrained")
    axes = fig.subplots(2, len(panels), squeeze=False, sharex=True)
    pick = ok if len(ok) <= max_variants else ok[np.unique(np.linspace(0, len(ok) - 1, max_variants).astype(int))]
    for j, (title, units, scale, get) in enumerate(panels):
        am, ap = axes[0, j], axes[1, j]
        if len(ok) > 1:
            allv = np.array([get(int(v)) for v in ok])
            am.fill_between(f, np.nanmin(np.abs(allv), 0) * scale, np.nanmax(np.abs(allv), 0) * scale,
                            color="C0", alpha=0.15, lw=0, label=f"{len(ok)} ok variants")
        for n, v in enumerate(pick):
            z = get(int(v))
            am.loglog(f, np.abs(z) * scale, lw=1.2 if n == 0 else 0.7, color="C0" if n == 0 else "0.45",
                      label=f"variant {int(v)}" if n < 3 else None)
            ph = np.degrees(np.unwrap(np.angle(z)))          # continuous over frequency, start in (-180, 180]
            ph -= 360.0 * np.round(ph[0] / 360.0)
            ap.semilogx(f, ph, lw=1.2 if n == 0 else 0.7, color="C0" if n == 0 else "0.45")
        am.set_title(title, fontsize=9)
        am.set_ylabel(f"magnitude [{units}]")
        ap.set_ylabel("phase [deg]")
        ap.set_xlabel("frequency [Hz]")
        ap.yaxis.set_major_locator(matplotlib.ticker.MultipleLocator(90))
        for ax in (am, ap):
            ax.grid(True, which="both", lw=0.3, color="0.85")
        am.legend(fontsize=7)
    if not len(ok):
        fig.text(0.5, 0.5, "no variant finished: nothing to draw", ha="center", fontsize=12)
    a = ds.attrs
    fig.suptitle(f"Frequency response - {a.get('model', '')}: {len(ok)} of {ds.sizes['variant']} variant(s) ok; "
                 "linearised at the static equilibrium under the load case's wheel loads", fontsize=10)
    if path is not None:
        save_png(fig, path, dpi=dpi)
    return fig


def road_spectra(ds, path=None, dpi=110):
    """The rough-road figure of a cube with road statistics
    (:mod:`sweep.kinds.rough_road`): PSDs of the road (Welch and the ISO 8608
    target), the wheel-centre vertical displacement, the tyre contact force
    and the largest body-mount force (left wheel), the band of the ok
    variants and their median; the title names the road, speed and RMS.
    Returns the figure; ``path``: also a PNG."""
    from sweep.results import status as st
    f = ds.frequency.values
    ok = np.nonzero(np.isin(ds.status.values, st.VALUES_KEPT))[0]
    side = "left"
    panels = [("road height", "mm\u00b2/Hz", 1e6, None),
              ("wheel-centre z", "mm\u00b2/Hz", 1e6, ds.psd_wheel_centre_z.sel(side=side).values),
              ("tyre contact force", "N\u00b2/Hz", 1.0, ds.psd_tyre_contact_force.sel(side=side).values)]
    if ds.sizes.get("mount", 0):
        left = [i for i, m in enumerate(ds.mount.values.astype(str)) if m.endswith("_left")] or [0]
        rms = ds.rms_mount_force.values[ok][:, left, 2] if len(ok) else np.zeros((1, len(left)))
        k = left[int(np.nanargmax(np.nanmedian(rms, axis=0)))] if len(ok) else left[0]
        name = str(ds.mount.values[k])
        panels.append((f"mount {name} fz", "N\u00b2/Hz", 1.0, ds.psd_mount_force.isel(mount=k).sel(
            force_axis="fz").values))
    fig = Figure(figsize=(3.6 * len(panels), 3.8), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, units, scale, vals) in zip(axes, panels):
        if vals is None:
            ax.loglog(f, ds.psd_road.sel(side=side).values * scale, color="0.45", lw=0.8, label="road (Welch)")
            ax.loglog(f, ds.psd_road_target.values * scale, color="C3", lw=1.2, label="ISO 8608 target")
        elif len(ok):
            v = vals[ok] * scale
            if len(ok) > 1:
                ax.fill_between(f, np.nanmin(v, 0), np.nanmax(v, 0), color="C0", alpha=0.2, lw=0,
                                label=f"{len(ok)} ok variants")
            ax.loglog(f, np.nanmedian(v, 0), color="C0", lw=1.2, label="median" if len(ok) > 1 else "variant 0")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("frequency [Hz]")
        ax.set_ylabel(f"PSD [{units}]")
        ax.grid(True, which="both", lw=0.3, alpha=0.5)
        ax.legend(fontsize=7)
    rc = ds.rms_tyre_contact_force.sel(side=side).values[ok] if len(ok) else np.array([np.nan])
    fig.suptitle(f"{ds.attrs.get('model', '')}: rough road, {side} wheel; {len(ok)} of {ds.sizes['variant']} "
                 f"variant(s) ok; contact-force RMS {np.nanmedian(rc):.0f} N (median)", fontsize=10)
    if path:
        save_png(fig, path, dpi=dpi)
    return fig
