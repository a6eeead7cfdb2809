"""Overview plot of a result cube (PNG beside the cube).

What a reader of a longitudinal-step sweep wants first: the response in a
window around the step (not seconds of flat line before it), both sides,
the *rise* of the reference-bushing force from each variant's own static
value (the preload differs between variants), a few variants labelled with
their parameter values (those with the smallest, median and largest peak
rise), and how the parameters drive the response.
"""
from __future__ import annotations

import matplotlib
import matplotlib.ticker
import numpy as np
from matplotlib.figure import Figure      # no pyplot: no backend switch, no global state

SIDE_STYLE = {"left": "-", "right": "--"}


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


def overview(ds, path, n_samples=5, before=0.05, after=0.5):
    """Write the overview PNG of a time-response cube and return its path.

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
    fig.savefig(path, dpi=90)
    return path
