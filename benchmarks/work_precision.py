"""Work-precision diagram of the fixed-step methods.

    .venv/bin/python benchmarks/work_precision.py            # full: 2 axles x 3 methods x 5 h x 4 N
    .venv/bin/python benchmarks/work_precision.py --quick    # smoke run: double wishbone, h = 1, 2 ms, N = 1, 4
    .venv/bin/python benchmarks/work_precision.py --retime benchmarks/results/work_precision.json
                                                             # second timing pass (best of both), rewrites outputs
    .venv/bin/python benchmarks/work_precision.py --from-json benchmarks/results/work_precision.json
                                                             # redraw PNG and table from a finished run
    .venv/bin/python benchmarks/work_precision.py --loadcase pothole --stop-law switching
                                                             # the stop load case: work_precision_pothole.*
    .venv/bin/python benchmarks/work_precision.py --merge OUT.json A.json B.json ...
                                                             # one diagram from runs split over processes

For each axle (``configs/model/<axle>.yaml``) under the longitudinal step
(``configs/loadcase/longitudinal_step.yaml``), each method of
:data:`kernels.methods.FIXED_STEP` (lsrt2, ros34pw2, linear_implicit_euler),
each step h in {0.25, 0.5, 1, 2, 4} ms and each re-linearisation interval
N in {1, 2, 4, 8} (``relinearise_every``):

``--loadcase pothole --stop-law switching`` measures the stop load case
instead (``configs/loadcase/pothole.yaml``, 0-0.6 s, the stops with their
switching law: engagement and release located as state events, the Radau
reference with the same root functions); its two signals are the
*vertical* wheel-centre displacement and the vertical force in the
reference bushings (the direction the load case drives), NMSE over its
``nmse_window``.

* accuracy: the NMSE of method.md section 3 against the Radau reference
  (``kernels.radau.solve``, rtol 1e-8, as the suite and the tests),
  ``NMSE = mean((y - y_ref)^2) / mean(y_ref)^2`` over the load case's
  ``nmse_window`` (4.9 s <= t <= 6.0 s), both sides pooled, for the two
  signals of the NMSE table of docs/validation.md: the longitudinal wheel-centre displacement
  and the longitudinal force in the reference bushings
  (``sweep.results.cube.pooled_signals`` + ``kernels.metrics.nmse``, the functions
  behind that table), sampled at every step of the method;
* work: wall time of the run alone (compile excluded, best of ``--repeat``
  runs of the same compiled executable) per simulated second, and per step.

The runs go through the single-variant path of the app and of
``benchmarks/single_variant.py`` (``kernels.response.solve``, lowered and
compiled once per combination, all channels at every step, block solver,
float64). They start at ``--t-start`` (default 4.5 s) in the static
equilibrium under the loads there; the load case starts at rest in
equilibrium, so any start before the step at 5.0 s gives the same response
(the loadcase yaml) and the window only needs the run to cover 4.9-6.0 s.
The Radau reference is computed once per axle per invocation, on the grid of
the smallest h (every other h samples a subset of it). A combination whose
state goes non-finite is reported as ``non-finite``, one whose NMSE exceeds 1
(error as large as the signal) as ``diverged``; neither stops the run.

Writes ``benchmarks/results/work_precision.{json,md,png}``
(``work_precision_quick.*`` with ``--quick``; ``--out-dir`` elsewhere). The
JSON is rewritten after every combination, so a killed run keeps what it
measured. A section "## Which method when" already in the markdown file
(written by hand from the figures) is carried over when the table is
rewritten - re-check it against the new table.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
import traceback

import jax
import jax.numpy as jnp
import numpy as np
import yaml

import kernels  # noqa: F401  (float64)
from kernels import loads, metrics
from kernels.methods import FIXED_STEP
from sweep.results.cube import pooled_signals
from kernels.statics import equilibrium
from sweep.study.loadcase import sample_grid
from sweep.axle.builder import model_from_config
from kernels.response import Options, Problem, make_outputs as make_channels, solve
from sweep.study.loadcase import build_excitation

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from single_variant import machine  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
AXLES = ("double_wishbone", "multilink")
METHOD_NAMES = ("lsrt2", "ros34pw2", "linear_implicit_euler")
H_MS = (0.25, 0.5, 1.0, 2.0, 4.0)
RELINEARISE = (1, 2, 4, 8)
# (name in sweep.results.cube.pooled_signals, key in the results)
SIGNALS = (("wheel_displacement", "displacement"), ("bushing_force", "force"))
# the direction (vehicle frame: 0 = x, 2 = z) of both signals per load case: the one it drives
DIRECTION = {"longitudinal_step": 0, "pothole": 2}
DIRECTION_WORD = {0: "longitudinal", 1: "lateral", 2: "vertical"}
DIVERGED_NMSE = 1.0
WHICH_HEADING = "## Which method when"
REF_RTOL = 1e-8


@dataclasses.dataclass
class Case:
    """One axle under one load case, started at t0 in its static equilibrium."""
    name: str
    model: object
    exc: object
    t0: float
    t1: float
    window: tuple
    r_eq: jax.Array
    loadcase: str
    model_stop_law: str = None

    @property
    def direction(self):
        return DIRECTION.get(self.loadcase, 0)


def _yaml(*p):
    with open(os.path.join(ROOT, "configs", *p)) as f:
        return yaml.safe_load(f)


def load_case(axle, loadcase="longitudinal_step", t_start=4.5, t_end=None, window=None, stop_law=None):
    """The axle ``configs/model/<axle>.yaml`` under ``configs/loadcase/<loadcase>.yaml``
    started at ``t_start`` (default the load case's; and ended at ``t_end``,
    default the load case's); NMSE window ``window`` (default the load case's
    ``nmse_window``); ``stop_law``: the model's ``stop_law`` override (smooth | switching)."""
    cfg = dict(_yaml("model", f"{axle}.yaml"))
    if stop_law is not None:
        cfg["stop_law"] = stop_law
    model = model_from_config(cfg)
    lc = dict(_yaml("loadcase", f"{loadcase}.yaml"))
    if t_start is not None:
        lc["t_start"] = float(t_start)
    if t_end is not None:
        lc["t_end"] = float(t_end)
    exc, t0, t1 = build_excitation(lc)
    win = tuple(float(x) for x in (window or lc.get("nmse_window", (4.9, 6.0))))
    if not (t0 <= win[0] < win[1] <= t1 + 1e-12):
        raise ValueError(f"NMSE window {win} is not inside the run {t0}-{t1} s")
    eq = equilibrium(model, loads.u_at(exc, t0))
    if not bool(eq.converged):
        raise RuntimeError(f"{axle}: static equilibrium at t = {t0} s did not converge")
    return Case(axle, model, exc, t0, t1, win, eq.r, loadcase, stop_law)


@jax.jit
def _channels_of_states(model, r_eq, r, v):
    """The job's channels (``kernels.response.make_outputs``) at a sequence of states
    (compiled once: eager vmap would dispatch op by op)."""
    ch = make_channels()
    return jax.vmap(lambda rr, vv: ch(model, rr, vv, r_eq))(r, v)


def reference(case, dt, rtol=REF_RTOL, cache_dir=None):
    """Radau reference channels at t0 + k dt (every step of the finest h), once per axle.
    ``cache_dir``: read it from / write it to ``<cache_dir>/<key>.npz`` (processes
    that share an axle and load case then solve it once)."""
    from kernels.radau import solve as radau
    n = sample_grid(case.t0, case.t1, dt, 1)
    t = case.t0 + np.arange(n) * dt
    path = None
    if cache_dir:
        law = case.model_stop_law or "yaml"
        path = os.path.join(cache_dir, f"radau_{case.name}_{case.loadcase}_{law}_{case.t0:g}_{case.t1:g}_"
                                       f"{dt * 1e3:g}ms_{rtol:g}.npz")
        if os.path.exists(path):
            z = np.load(path)
            return {"t": t, "dt": dt, "rtol": rtol, "wall_s": float(z["wall_s"]), "cached": path,
                    "channels": {k: z[k] for k in ("wheel_centre_displacement", "bushing_force")}}
    tic = time.perf_counter()
    _, r, v = radau(case.model, case.exc, case.r_eq, jnp.zeros_like(case.r_eq), t, rtol=rtol)
    out = _channels_of_states(case.model, case.r_eq, jnp.asarray(r), jnp.asarray(v))
    out = {k: np.asarray(out[k]) for k in ("wheel_centre_displacement", "bushing_force")}
    wall = time.perf_counter() - tic
    if path:
        os.makedirs(cache_dir, exist_ok=True)
        np.savez(path + ".part.npz", wall_s=wall, **out)
        os.replace(path + ".part.npz", path)
    return {"t": t, "dt": dt, "channels": out, "rtol": rtol, "wall_s": wall}


def _window_mask(t, window):
    return (t >= window[0] - 1e-9) & (t <= window[1] + 1e-9)


def nmse_of(case, out, ref_channels, t):
    """NMSE (method.md section 3) of both signals over the case's window, both
    sides pooled, in the direction the load case drives, with the project's
    functions: {key: value}."""
    sel = np.tile(_window_mask(t, case.window), 2)
    res = {}
    for what, key in SIGNALS:
        y = pooled_signals(out, case.model, what, case.direction)[sel]
        y_ref = pooled_signals(ref_channels, case.model, what, case.direction)[sel]
        res[key] = float(metrics.nmse(y, y_ref))
    return res


def measure(case, ref, method, h, relinearise_every, repeat=3):
    """One combination: compile once, run ``repeat`` times (best time), NMSE of the
    first run's outputs. Never raises for a run that blows up: the row's
    ``status`` says ok / non-finite / diverged / error."""
    row = {"axle": case.name, "method": method, "h_ms": round(h * 1e3, 6),
           "relinearise_every": int(relinearise_every)}
    try:
        n = sample_grid(case.t0, case.t1, h, 1)
        stride = h / ref["dt"]
        if abs(stride - round(stride)) > 1e-9:
            raise ValueError(f"h = {h} is not a multiple of the reference grid {ref['dt']}")
        stride = int(round(stride))
        args = (Problem(case.model, case.exc, case.t0, h), case.r_eq)
        kw = dict(n_samples=n, every=1, relinearise_every=int(relinearise_every), method=method)
        tic = time.perf_counter()
        compiled = solve.lower(args[0], Options(**kw), args[1]).compile()
        row["compile_s"] = time.perf_counter() - tic
        runs, out = [], None
        for _ in range(max(1, repeat)):
            tic = time.perf_counter()
            res = jax.block_until_ready(compiled(*args))
            runs.append(time.perf_counter() - tic)
            if out is None:
                out = {k: np.asarray(res[k]) for k in ("wheel_centre_displacement", "bushing_force")}
            del res
        del compiled
        steps = n - 1
        best = min(runs)
        row.update(steps=steps, simulated_s=case.t1 - case.t0, run_s=runs, best_run_s=best,
                   us_per_step=1e6 * best / steps, wall_s_per_simulated_s=best / (case.t1 - case.t0))
        t = case.t0 + np.arange(n) * h
        ref_ch = {k: v[::stride] for k, v in ref["channels"].items()}
        assert ref_ch["wheel_centre_displacement"].shape[0] == n, "reference grid does not match"
        if not all(np.all(np.isfinite(v)) for v in out.values()):
            row["status"] = "non-finite"
            row.update({f"nmse_{key}": None for _, key in SIGNALS})
        else:
            vals = nmse_of(case, out, ref_ch, t)
            row.update({f"nmse_{k}": v for k, v in vals.items()})
            bad = [v for v in vals.values() if not math.isfinite(v) or v > DIVERGED_NMSE]
            row["status"] = "diverged" if bad else "ok"
    except Exception as err:  # noqa: BLE001 - one broken combination must not end the diagram
        row["status"] = f"error: {type(err).__name__}: {err}".splitlines()[0][:300]
        row["traceback"] = traceback.format_exc()[-2000:]
        row.update({f"nmse_{key}": row.get(f"nmse_{key}") for _, key in SIGNALS})
    return row


def _combo(axle, method, h, relinearise_every):
    """The key of one combination (h in s)."""
    return axle, method, round(h * 1e3, 6), int(relinearise_every)


def _row_key(row):
    return _combo(row["axle"], row["method"], float(row["h_ms"]) * 1e-3, row["relinearise_every"])


def work_precision(axles=AXLES, methods=METHOD_NAMES, h_ms=H_MS, relinearise=RELINEARISE,
                   repeat=3, t_start=4.5, t_end=None, window=None, loadcase="longitudinal_step",
                   ref_rtol=REF_RTOL, on_row=None, log=print, done=(), stop_law=None, ref_cache=None,
                   shard=(0, 1)):
    """The core: every combination on every axle; returns the results dict
    (``entries``: one row per combination; ``references``: Radau run per axle).
    ``on_row(results)`` is called after every combination (incremental writes);
    ``done``: rows of an interrupted run to keep instead of measuring again;
    ``shard = (k, n)``: only every n-th combination from the k-th, counted over
    N, axle, method, h in that order (processes that split the diagram each
    begin with the re-linearise-every-1 points)."""
    for m in methods:
        if m not in FIXED_STEP:
            raise ValueError(f"unknown fixed-step method {m!r}; known: {sorted(FIXED_STEP)}")
    hs = sorted(float(x) * 1e-3 for x in h_ms)
    res = {"entries": [], "references": {}, "t_start": t_start, "loadcase": loadcase, "stop_law": stop_law,
           "direction": DIRECTION.get(loadcase, 0),
           "methods": list(methods), "h_ms": [round(h * 1e3, 6) for h in hs],
           "relinearise_every": [int(n) for n in relinearise], "repeat": int(repeat),
           "solver": "block", "dtype": "float64", "nmse_divergence_threshold": DIVERGED_NMSE}
    kept = {_row_key(e): e for e in done if "run_s" in e}
    combos = [_combo(a, m, h, N) for N in relinearise for a in axles for m in methods for h in hs]
    mine = {c for i, c in enumerate(combos) if i % shard[1] == shard[0]}
    for axle in axles:
        ours = [c for m in methods for N in relinearise for h in hs if (c := _combo(axle, m, h, N)) in mine]
        if all(c in kept for c in ours):
            res["entries"] += [kept[c] for c in ours]
            continue
        case = load_case(axle, loadcase, t_start, t_end, window, stop_law)
        res.update(t_start=case.t0, t_end=case.t1, window=list(case.window))
        log(f"{axle}: Radau reference {case.t0}-{case.t1} s every {hs[0] * 1e3:g} ms ...")
        ref = reference(case, hs[0], ref_rtol, ref_cache)
        res["references"][axle] = {"rtol": ref["rtol"], "dt_ms": hs[0] * 1e3, "wall_s": ref["wall_s"],
                                   "samples": len(ref["t"])}
        log(f"{axle}: reference took {ref['wall_s']:.1f} s")
        for method in methods:
            for N in relinearise:
                for h in hs:
                    if _combo(axle, method, h, N) not in mine:
                        continue
                    row = kept.get(_combo(axle, method, h, N))
                    if row is None:
                        row = measure(case, ref, method, h, N, repeat)
                        # each compiled executable keeps ~1-3k memory maps until the caches
                        # are cleared: ~20 combinations reached vm.max_map_count (65530) and
                        # LLVM failed with "Cannot allocate memory"
                        jax.clear_caches()
                    res["entries"].append(row)
                    log(_row_line(row))
                    if on_row is not None:
                        on_row(res)
    return res


def retime(res, repeat=3, on_row=None, log=print):
    """A second timing pass over a finished run (``--retime``): every entry
    that ran is compiled again (a hit in the persistent compilation cache when
    it is on) and run ``repeat`` more times, in reverse order, so that a
    burst of load on the shared machine does not hit a combination in both
    passes; its time becomes the best of all runs. NMSE values are kept (the
    runs are deterministic)."""
    cases = {}
    for row in reversed(res["entries"]):
        if "run_s" not in row:
            continue
        axle = row["axle"]
        if axle not in cases:
            cases[axle] = load_case(axle, res.get("loadcase", "longitudinal_step"), res["t_start"],
                                    res.get("t_end"), res.get("window"), res.get("stop_law"))
        case = cases[axle]
        h = row["h_ms"] * 1e-3
        n = sample_grid(case.t0, case.t1, h, 1)
        args = (Problem(case.model, case.exc, case.t0, h), case.r_eq)
        kw = dict(n_samples=n, every=1, relinearise_every=row["relinearise_every"], method=row["method"])
        try:
            compiled = solve.lower(args[0], Options(**kw), args[1]).compile()
            for _ in range(max(1, repeat)):
                tic = time.perf_counter()
                jax.block_until_ready(compiled(*args))
                row["run_s"].append(time.perf_counter() - tic)
            del compiled
            jax.clear_caches()
        except Exception as err:  # noqa: BLE001
            row["retime_error"] = f"{type(err).__name__}: {err}".splitlines()[0][:300]
        best = min(row["run_s"])
        row.update(best_run_s=best, us_per_step=1e6 * best / row["steps"],
                   wall_s_per_simulated_s=best / row["simulated_s"])
        log(_row_line(row) + f" (best of {len(row['run_s'])})")
        if on_row is not None:
            on_row(res)
    res["repeat"] = len(next((e["run_s"] for e in res["entries"] if "run_s" in e), [])) or res.get("repeat")
    return res


def _ref_rtol(res):
    return next(iter(res.get("references", {}).values()), {}).get("rtol", REF_RTOL)


def _fmt(x, spec=".2e"):
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def _row_line(row):
    return (f"{row['axle']} {row['method']} h={row['h_ms']:g} ms N={row['relinearise_every']}: "
            f"NMSE disp {_fmt(row.get('nmse_displacement'))} force {_fmt(row.get('nmse_force'))}, "
            f"{_fmt(row.get('us_per_step'), '.0f')} us/step, "
            f"{_fmt(row.get('wall_s_per_simulated_s'), '.3f')} s/s (compile {_fmt(row.get('compile_s'), '.1f')} s) "
            f"[{row['status']}]")


# ---------------------------------------------------------------------------- outputs
COLOURS = {"lsrt2": "tab:blue", "ros34pw2": "tab:orange", "linear_implicit_euler": "tab:green"}
STYLES = {1: ("o", "-"), 2: ("s", "--"), 4: ("^", "-."), 8: ("D", ":")}


def plot(res, path):
    """Log-log NMSE against wall s per simulated s: columns = axles, rows = the two signals."""
    import matplotlib.lines as mlines
    import matplotlib.ticker as mticker
    from matplotlib.figure import Figure
    entries = res["entries"]
    axles = list(dict.fromkeys(e["axle"] for e in entries))
    fig = Figure(figsize=(max(6.2 * len(axles), 11.0), 11.0), layout="constrained")
    axs = fig.subplots(2, len(axles), squeeze=False)
    word = DIRECTION_WORD[res.get("direction", 0)]
    titles = {"displacement": f"{word} wheel-centre displacement",
              "force": f"{word} force, reference bushings"}
    for j, axle in enumerate(axles):
        for i, (_, key) in enumerate(SIGNALS):
            ax = axs[i, j]
            for method in res["methods"]:
                for N in res["relinearise_every"]:
                    rows = sorted((e for e in entries if e["axle"] == axle and e["method"] == method
                                   and e["relinearise_every"] == N and e["status"] == "ok"),
                                  key=lambda e: e["h_ms"])
                    if not rows:
                        continue
                    x = [e["wall_s_per_simulated_s"] for e in rows]
                    y = [e[f"nmse_{key}"] for e in rows]
                    mk, ls = STYLES.get(N, ("x", "-"))
                    ax.plot(x, y, color=COLOURS.get(method, "k"), marker=mk, linestyle=ls,
                            markersize=5, linewidth=1.2, alpha=0.9)
                    if N == res["relinearise_every"][0]:
                        for e in rows:
                            ax.annotate(f"{e['h_ms']:g}", (e["wall_s_per_simulated_s"], e[f"nmse_{key}"]),
                                        textcoords="offset points", xytext=(5, 3), fontsize=7,
                                        color=COLOURS.get(method, "k"))
            bad = [e for e in entries if e["axle"] == axle and e["status"] != "ok"]
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.xaxis.set_major_locator(mticker.LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.xaxis.set_major_formatter(mticker.FuncFormatter(lambda x, _: f"{x:g}"))
            ax.xaxis.set_minor_formatter(mticker.NullFormatter())
            ax.grid(True, which="both", alpha=0.3)
            ax.set_title(f"{axle}: {titles[key]}", fontsize=10)
            ax.set_xlabel("wall time per simulated second [s] (run only, best of repeats)")
            ax.set_ylabel(f"NMSE {key} vs Radau")
            if bad:
                items = [f"{e['method']} h={e['h_ms']:g} N={e['relinearise_every']} ({e['status'].split(':')[0]})"
                         for e in bad]
                lines = [", ".join(items[i:i + 3]) for i in range(0, len(items), 3)]
                t = ax.text(0.01, 0.01, "not plotted:\n" + "\n".join(lines), transform=ax.transAxes,
                            fontsize=6, va="bottom", color="0.3")
                t.set_in_layout(False)      # a long list must not squeeze the axes
    handles = [mlines.Line2D([], [], color=COLOURS.get(m, "k"), lw=2, label=m) for m in res["methods"]]
    handles += [mlines.Line2D([], [], color="0.3", marker=STYLES.get(N, ("x", "-"))[0],
                              linestyle=STYLES.get(N, ("x", "-"))[1], label=f"re-linearise every {N}")
                for N in res["relinearise_every"]]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 4), fontsize=9)
    w = res.get("window", [4.9, 6.0])
    fig.suptitle(
        f"Work-precision of the fixed-step methods, {_case_words(res)}, one variant "
        f"(numbers next to the re-linearise-every-{res['relinearise_every'][0]} points: h in ms)\n"
        f"Top row: {word} wheel-centre displacement; bottom row: {word} force in the reference "
        f"bushings.\n"
        f"NMSE = mean((y - y_ref)^2) / mean(y_ref)^2 over {w[0]:g}-{w[1]:g} s, both sides pooled, against "
        f"Radau (rtol {_ref_rtol(res):g}). Run {res.get('t_start') or 0:g}-{res.get('t_end', 0):g} s, "
        f"block solver, float64, {res.get('date', '')};\nwall time = run only, best of {res.get('repeat', '?')}, "
        f"on {_machine_words(res)}",
        fontsize=9)
    fig.savefig(path, dpi=110)


def _case_words(res):
    lc = res.get("loadcase", "longitudinal_step").replace("_", " ")
    return lc + (f", {res['stop_law']} stop law" if res.get("stop_law") else "")


def _machine_words(res):
    m = res.get("machine", {})
    par = res.get("processes")
    return (f"{m.get('cpu', '?')} ({m.get('cores', '?')} cores"
            + (f", {par} processes at once" if par else ", shared, timings noisy") + ")")


def _other_machine(res, row):
    cpu = row.get("machine")
    return f" (timed on {cpu})" if cpu and cpu != res.get("machine", {}).get("cpu") else ""


def markdown(res, command):
    m = res.get("machine", {})
    la = res.get("loadavg", {})
    L = ["# Work-precision diagram (generated by `benchmarks/work_precision.py`)", ""]
    L.append(f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('device', '?')}, "
             f"jax {m.get('jax', '?')}, Python {m.get('python', '?')}. Date: {res.get('date', '?')} "
             f"({res.get('started', '')} - {res.get('finished', '')}). Command: `{command}` "
             f"(wall {res.get('wall_min', float('nan')):.0f} min).")
    L.append("")
    rt = res.get("retime")
    passes = ""
    if rt:
        rla = rt.get("loadavg", {})
        passes = (f" A second timing pass (`{rt.get('command', '--retime')}`, {rt.get('date', '?')} "
                  f"{rt.get('started', '')} - {rt.get('finished', '')}, {rt.get('wall_min', float('nan')):.0f} min, "
                  f"load average {rla.get('start', '?')} / {rla.get('end', '?')}) ran every combination again "
                  "in reverse order; the time is the best over both passes.")
    how = (f"**Timings**: {res['processes']} processes ran at once on this machine, each with a share "
           "of the combinations" if res.get("processes") else
           "**Timings are noisy**: this 2-core machine was shared with another developer's jobs during the run")
    L.append(f"{how} (load average (1, 5, 15 min) at start / end: {la.get('start', '?')} / "
             f"{la.get('end', '?')}); each time is the best of {res.get('repeat')} runs of the same compiled "
             f"executable, compile excluded.{passes} Compare factors, not per cent.")
    L.append("")
    w = res.get("window", [4.9, 6.0])
    word = DIRECTION_WORD[res.get("direction", 0)]
    L.append(f"Load case: {_case_words(res)}. "
             f"Single variant, block solver, float64, all channels stored at every step (the app's "
             f"single-variant path, `kernels.response.solve`); run from {res.get('t_start') or 0:g} s (static "
             f"equilibrium) to {res.get('t_end'):g} s = {res.get('t_end', 0) - (res.get('t_start') or 0):g} "
             f"simulated s. NMSE = mean((y - y_ref)^2) / mean(y_ref)^2 over {w[0]:g} s <= t <= {w[1]:g} s, "
             "both sides pooled (method.md section 3), sampled at every step of the method, against "
             f"scipy's Radau (rtol {_ref_rtol(res):g}); *displacement* = {word} wheel-centre "
             f"displacement, *force* = {word} force in the reference bushings. N = re-linearise every "
             f"N steps. Status: `non-finite` = the state blew up, "
             f"`diverged` = NMSE > {DIVERGED_NMSE:g}. Figure: `{res.get('stem', 'work_precision')}.png`; "
             f"all numbers: `{res.get('stem', 'work_precision')}.json`.")
    L.append("")
    L.append("| axle | method | h [ms] | N | NMSE displacement | NMSE force | us/step | wall s per simulated s | status |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for e in res["entries"]:
        L.append(f"| {e['axle']} | {e['method']} | {e['h_ms']:g} | {e['relinearise_every']} | "
                 f"{_fmt(e.get('nmse_displacement'))} | {_fmt(e.get('nmse_force'))} | "
                 f"{_fmt(e.get('us_per_step'), '.0f')} | {_fmt(e.get('wall_s_per_simulated_s'), '.3f')} | "
                 f"{e['status']}{_other_machine(res, e)} |")
    return "\n".join(L) + "\n"


def write_outputs(res, out_dir, stem, command):
    """JSON, markdown table (keeping a hand-written "Which method when" section) and PNG."""
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, stem)
    with open(base + ".json", "w") as f:
        json.dump(res, f, indent=2)
    keep = ""
    if os.path.exists(base + ".md"):
        with open(base + ".md") as f:
            old = f.read()
        i = old.find(WHICH_HEADING)
        if i >= 0:
            keep = "\n" + old[i:]
    with open(base + ".md", "w") as f:
        f.write(markdown(res, command) + keep)
    plot(res, base + ".png")
    return [base + ext for ext in (".json", ".md", ".png")]


def _loadavg():
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: double wishbone, h = 1, 2 ms, N = 1, 4, 2 repeats")
    ap.add_argument("--axles", nargs="+", default=None)
    ap.add_argument("--methods", nargs="+", default=None)
    ap.add_argument("--h-ms", nargs="+", type=float, default=None)
    ap.add_argument("--relinearise-every", nargs="+", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=None, help="timed runs per combination (best taken)")
    ap.add_argument("--t-start", type=float, default=None,
                    help="start of the run [s] (default 4.5 for the longitudinal step, else the load case's)")
    ap.add_argument("--loadcase", default="longitudinal_step", choices=sorted(DIRECTION),
                    help="configs/loadcase/<name>.yaml (outputs: work_precision_<name>.* unless the step)")
    ap.add_argument("--stop-law", default=None, choices=("smooth", "switching"),
                    help="the models' stop_law (default: each model yaml's)")
    ap.add_argument("--reference-cache", default=None, metavar="DIR",
                    help="keep the Radau reference runs in DIR (npz) and reuse them")
    ap.add_argument("--shard", default="0/1", metavar="K/N",
                    help="measure only every N-th combination from the K-th (processes splitting the diagram; "
                         "outputs <stem>.shardK.*, then --merge)")
    ap.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                    help="OUT.json IN.json ...: one result from runs split over processes (same load case); "
                         "writes OUT's json, md and png")
    ap.add_argument("--out-dir", default=RESULTS)
    ap.add_argument("--no-cache", action="store_true", help="no persistent compilation cache")
    ap.add_argument("--from-json", default=None, help="only redraw PNG and markdown from this JSON")
    ap.add_argument("--resume", action="store_true",
                    help="keep the combinations already in the output JSON (an interrupted run)")
    ap.add_argument("--retime", default=None, metavar="JSON",
                    help="second timing pass over a finished run (best of all runs), rewrites its outputs")
    args = ap.parse_args(argv)
    stem = "work_precision" + ("" if args.loadcase == "longitudinal_step" else f"_{args.loadcase}")
    stem += "_quick" if args.quick else ""
    if args.merge:
        return merge_main(args.merge)
    shard = tuple(int(x) for x in args.shard.split("/"))
    if len(shard) != 2 or not 0 <= shard[0] < shard[1]:
        raise SystemExit(f"--shard {args.shard!r}: K/N with 0 <= K < N")
    if shard[1] > 1:
        stem += f".shard{shard[0]}"
    if args.from_json:
        with open(args.from_json) as f:
            res = json.load(f)
        stem = os.path.splitext(os.path.basename(args.from_json))[0]
        for p in write_outputs(res, args.out_dir, stem, res.get("command", "")):
            print(f"written: {p}")
        return 0
    if args.retime:
        return _retime_main(args)
    q = args.quick
    axles = args.axles or (["double_wishbone"] if q else list(AXLES))
    methods = args.methods or list(METHOD_NAMES)
    h_ms = args.h_ms or ([1.0, 2.0] if q else list(H_MS))
    Ns = args.relinearise_every or ([1, 4] if q else list(RELINEARISE))
    repeat = args.repeat or (2 if q else 3)
    if not args.no_cache:
        from sweep.core.runtime import setup
        setup()       # the app's persistent compilation cache (a re-run skips XLA's compile)
    argl = list(sys.argv[1:] if argv is None else argv)
    command = " ".join(["python benchmarks/work_precision.py"] + argl)
    started = time.time()
    meta = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "command": command,
            "started": time.strftime("%H:%M"), "loadavg": {"start": _loadavg()}}
    print(f"work-precision: axles {axles}, methods {methods}, h {h_ms} ms, N {Ns}, repeat {repeat}; "
          f"load average {meta['loadavg']['start']}", flush=True)

    def on_row(res):
        res.update(meta, wall_min=(time.time() - started) / 60)
        with open(os.path.join(args.out_dir, stem + ".json"), "w") as f:
            json.dump(res, f, indent=2)

    os.makedirs(args.out_dir, exist_ok=True)
    done = []
    out_json = os.path.join(args.out_dir, stem + ".json")
    if args.resume and os.path.exists(out_json):
        with open(out_json) as f:
            old = json.load(f)
        done = old.get("entries", [])
        meta.update(date=old.get("date", meta["date"]), started=old.get("started", meta["started"]),
                    loadavg={"start": old.get("loadavg", {}).get("start", meta["loadavg"]["start"])})
        started -= 60 * old.get("wall_min", 0.0)
        print(f"resuming: {len(done)} combination(s) kept from {out_json}", flush=True)
    t_start = args.t_start if args.t_start is not None else (
        4.5 if args.loadcase == "longitudinal_step" else None)
    meta["stem"] = stem
    res = work_precision(axles, methods, h_ms, Ns, repeat, t_start, loadcase=args.loadcase, on_row=on_row,
                         log=lambda s: print(s, flush=True), done=done, stop_law=args.stop_law,
                         ref_cache=args.reference_cache, shard=shard)
    meta["loadavg"]["end"] = _loadavg()
    meta["finished"] = time.strftime("%H:%M")
    res.update(meta, wall_min=(time.time() - started) / 60)
    for p in write_outputs(res, args.out_dir, stem, command):
        print(f"written: {p}")
    n_bad = sum(e["status"] != "ok" for e in res["entries"])
    print(f"{len(res['entries'])} combinations, {n_bad} not ok, {res['wall_min']:.1f} min")
    return 0


def merge_main(paths):
    """``--merge OUT IN...``: the entries of every IN (one per combination, the
    last IN wins), references and machine of the first, ``processes`` = the
    number of INs (they ran at once), wall = the longest."""
    out, ins = paths[0], paths[1:]
    if not ins:
        raise SystemExit("--merge needs OUT.json and at least one IN.json")
    parts = []
    for p in ins:
        with open(p) as f:
            parts.append(json.load(f))
    lcs = {r.get("loadcase", "longitudinal_step") for r in parts}
    if len(lcs) != 1:
        raise SystemExit(f"--merge: the inputs are of different load cases {sorted(lcs)}")
    res = dict(parts[0])
    key = _row_key
    rows = {}
    for r in parts:
        cpu = r.get("machine", {}).get("cpu", "?")
        for e in r["entries"]:
            old = rows.get(key(e))
            if old is not None and old.get("run_s") == e.get("run_s"):
                continue          # the same measurement carried into a later part (a seed): keep its machine
            rows[key(e)] = dict(e, machine=e.get("machine", cpu))
        for ax, ref in r.get("references", {}).items():
            res["references"].setdefault(ax, ref)
    order = lambda k: (AXLES.index(k[0]) if k[0] in AXLES else 9, METHOD_NAMES.index(k[1])  # noqa: E731
                       if k[1] in METHOD_NAMES else 9, k[3], k[2])
    res["entries"] = [rows[k] for k in sorted(rows, key=order)]
    for fld, vals in (("methods", METHOD_NAMES), ("relinearise_every", RELINEARISE), ("h_ms", H_MS)):
        got = {e[fld if fld != "methods" else "method"] for e in res["entries"]}
        res[fld] = [v for v in vals if v in got] + sorted(v for v in got if v not in vals)
    res["processes"] = len(parts)
    res["wall_min"] = max(r.get("wall_min", 0.0) for r in parts)
    res["finished"] = max(r.get("finished", "") for r in parts)
    res["command"] = "; ".join(r.get("command", "") for r in parts) + \
        f"; python benchmarks/work_precision.py --merge {' '.join(paths)}"
    stem = os.path.splitext(os.path.basename(out))[0]
    res["stem"] = stem
    for p in write_outputs(res, os.path.dirname(os.path.abspath(out)), stem, res["command"]):
        print(f"written: {p}")
    return 0


def _retime_main(args):
    with open(args.retime) as f:
        res = json.load(f)
    stem = os.path.splitext(os.path.basename(args.retime))[0]
    if not args.no_cache:
        from sweep.core.runtime import setup
        setup()
    started = time.time()
    info = {"date": time.strftime("%Y-%m-%d"), "started": time.strftime("%H:%M"), "loadavg": {"start": _loadavg()},
            "repeat": args.repeat or 3}
    print(f"retime {args.retime}: {len(res['entries'])} entries, {info['repeat']} more runs each; "
          f"load average {info['loadavg']['start']}", flush=True)

    def on_row(r):
        r["retime"] = dict(info, wall_min=(time.time() - started) / 60)
        with open(os.path.join(args.out_dir, stem + ".json"), "w") as f:
            json.dump(r, f, indent=2)

    os.makedirs(args.out_dir, exist_ok=True)
    retime(res, info["repeat"], on_row, log=lambda s: print(s, flush=True))
    info["loadavg"]["end"] = _loadavg()
    info["finished"] = time.strftime("%H:%M")
    res["retime"] = dict(info, wall_min=(time.time() - started) / 60,
                         command=" ".join(["python benchmarks/work_precision.py"] + sys.argv[1:]))
    for p in write_outputs(res, args.out_dir, stem, res.get("command", "")):
        print(f"written: {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
