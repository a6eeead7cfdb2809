"""The benchmark suite. One command:

    .venv/bin/python benchmarks/run.py            # full suite (~20-30 min on 2 cores)
    .venv/bin/python benchmarks/run.py --quick    # smaller batches and fewer steps (~5 min)

For both axles and the longitudinal step at h = 1 ms, float64, re-linearised
every step unless stated:

* the machine's float64 peak (a large matmul, measured in the same run);
* single-variant real-time factor (whole 0-6 s load case; compile separately),
  block and dense solve;
* throughput in variant-steps per second at batch 1, 64, 256, 1024, 4096,
  block versus dense solve (integration only: every variant starts at the
  nominal equilibrium with its own bushing-stiffness scales, 0.8-1.25;
  batches on one device, the figures are per device (with
  ``AXLE_CPU_DEVICES=n`` split over n devices);
* floating-point operations per variant-step (XLA cost analysis of the
  compiled step; LAPACK calls of the dense LU are not counted by XLA) and the
  achieved fraction of the measured peak;
* where the time of one step goes (linearisation, factorisation, solves,
  the rest), at batch 256;
* peak memory (max RSS) of a 4096-variant sweep job as ``python -m sweep``
  runs it by default (every core a CPU device, at most 2; short manoeuvre;
  the job streams results chunk by chunk, so its memory does not grow with
  the manoeuvre length);
* accuracy cost (NMSE against the Radau reference, method.md section 3) of
  the speed options: re-linearise every 2 / 4 / 8 steps, float32.

Writes benchmarks/results/suite.json and rewrites the generated part of
BENCHMARKS.md and the figures table of docs/performance.md (between the
``<!-- bench:... -->`` markers; the latter rendered by benchmarks/tables.py,
block ``figures``).
"""
import argparse
import json
import os
import subprocess
import sys
import time

# the CPU devices as `python -m sweep` sets them (one per core, at most 2;
# AXLE_CPU_DEVICES=n), before JAX starts: the sweep job of the suite (peak
# memory) runs as the app does by default
from sweep.core.runtime import cpu_devices_are_default, xla_flags_from_env  # noqa: E402

xla_flags_from_env()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import yaml  # noqa: E402

import kernels  # noqa: F401,E402
from kernels import integrate, loads, lsrt2, metrics  # noqa: E402
from kernels.model import cast_floats  # noqa: E402
from kernels.system import model_system  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from single_variant import machine  # noqa: E402
from sweep.results.cube import pooled_signals  # noqa: E402
from kernels.statics import equilibrium
from sweep.study.loadcase import sample_grid
from sweep.axle.builder import model_from_config
from sweep.axle.params import build_parameters  # noqa: E402
from kernels.response import Options, Problem, make_outputs as make_channels, solve
from sweep.kinds.time_response import Case, make_chunk_runner  # noqa: E402
from sweep.study.loadcase import build_excitation  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ("double_wishbone", "multilink")
PUBLISHED_RTF = {"double_wishbone": 0.59, "multilink": 0.73}


def cfg(*p):
    with open(os.path.join(ROOT, "configs", *p)) as f:
        return yaml.safe_load(f)


def best_of(fn, repeat):
    times = []
    for _ in range(repeat):
        tic = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - tic)
    return min(times)


def float64_peak(n=2048, repeat=5):
    """GFLOP/s of an n x n float64 matmul (all cores, XLA's dot)."""
    a = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.float64)
    f = jax.jit(lambda a: a @ a)
    jax.block_until_ready(f(a))
    return 2 * n ** 3 / best_of(lambda: f(a), repeat) / 1e9


class Axle:
    def __init__(self, name):
        self.name = name
        self.model = model_from_config(cfg("model", f"{name}.yaml"))
        self.exc, self.t0, self.t1 = build_excitation(cfg("loadcase", "longitudinal_step.yaml"))
        self.eq = equilibrium(self.model, loads.u_at(self.exc, self.t0))
        assert bool(self.eq.converged), f"{name}: equilibrium did not converge"

    # ------------------------------------------------------------------ single variant
    def single(self, solver, repeat):
        """The engine's own single-variant path: the time-response chunk
        runner (sweep.kinds.time_response.make_chunk_runner) for a chunk of one
        variant - static equilibrium, then 0 -> 6 s, every bushing stored at
        every step - exactly what `python -m sweep` runs for one variant."""
        n = sample_grid(self.t0, self.t1, 1e-3, 1)
        pset = build_parameters({}, self.model)
        runner = make_chunk_runner(self.model, pset, Case(self.exc, self.t0, 1e-3, n, every=1, relin=1, bidx=list(range(len(self.model.topology.bushing_names))), solver=solver))
        thetas = np.zeros((1, 0))
        tic = time.perf_counter()
        compiled = runner.lower(thetas).compile()
        comp = time.perf_counter() - tic
        best = best_of(lambda: compiled(thetas), repeat)
        return {"solver": solver, "compile_s": comp, "run_s": best, "steps": n - 1,
                "real_time_factor": best / (self.t1 - self.t0), "us_per_step": 1e6 * best / (n - 1)}

    # ------------------------------------------------------------------ batches
    def variant(self, solver, steps):
        """One variant's integration: bushing stiffnesses scaled by ``scale``,
        ``steps`` LSRT2 steps across the load step from the nominal equilibrium."""
        model, exc = self.model, self.exc
        r0 = self.eq.r.reshape(-1)
        t0 = 5.0 - steps // 2 * 1e-3          # across the step

        def variant(scale):
            m = model.replace_elements(bushing={"k_scale": model.elements["bushing"]["k_scale"] * scale})
            traj = lsrt2.LSRT2.simulate(model_system(m, exc, solver), r0, jnp.zeros_like(r0), t0, 1e-3,
                                        2, steps, 1, lambda r, v, t: r[:3])
            return traj.outputs
        return variant

    def batch_runner(self, solver, steps):
        return jax.jit(jax.vmap(self.variant(solver, steps)))

    def scales(self, B):
        """Per-variant bushing-stiffness scales: on one device (the figures
        are per device), split over the devices when B divides and the
        devices were asked for (AXLE_CPU_DEVICES=n or XLA_FLAGS)."""
        nb = len(self.model.topology.bushing_names)
        x = jnp.asarray(np.exp(np.random.default_rng(B).uniform(np.log(0.8), np.log(1.25), (B, nb, 1))))
        n_dev = 1 if cpu_devices_are_default() else jax.device_count()
        if n_dev > 1 and B % n_dev == 0:
            from jax.sharding import Mesh, NamedSharding, PartitionSpec
            mesh = Mesh(np.array(jax.devices()), ("variant",))
            x = jax.device_put(x, NamedSharding(mesh, PartitionSpec("variant")))
        return x

    def engine_runner(self, B, steps):
        """The same variants as :meth:`batch_runner` mapped the way a default
        job maps a chunk (sweep.engine): ``lax.map`` over micro-batches
        (sweep.micro_batch: auto) on every device that a chunk of B variants
        gets (sweep.engine.mapping.job_devices: both CPU devices from 256 variants),
        the chunk split over them (shard_map). Returns (jitted runner,
        devices, micro-batch)."""
        from sweep.engine import mapping as engine
        n_dev = engine.job_devices(B)
        mb = engine.micro_batch_of({}, B, n_dev)
        return engine.map_variants(self.variant("block", steps), n_dev, mb), n_dev, mb

    def throughput_engine(self, B, steps, repeat):
        """Variant-steps/s of the engine's default mapping (:meth:`engine_runner`)."""
        from jax.sharding import Mesh, NamedSharding, PartitionSpec
        run, n_dev, mb = self.engine_runner(B, steps)
        nb = len(self.model.topology.bushing_names)
        x = jnp.asarray(np.exp(np.random.default_rng(B).uniform(np.log(0.8), np.log(1.25), (B, nb, 1))))
        if n_dev > 1:
            mesh = Mesh(np.array(jax.devices()[:n_dev]), ("variant",))
            x = jax.device_put(x, NamedSharding(mesh, PartitionSpec("variant")))
        tic = time.perf_counter()
        compiled = run.lower(x).compile()
        comp = time.perf_counter() - tic
        best = best_of(lambda: compiled(x), repeat)
        return {"solver": "block", "mapping": "engine", "devices": n_dev, "micro_batch": mb or 0,
                "batch": B, "steps": steps, "compile_s": comp, "run_s": best,
                "variant_steps_per_s": B * steps / best}

    def throughput(self, solver, B, steps, repeat):
        run = self.batch_runner(solver, steps)
        x = self.scales(B)
        tic = time.perf_counter()
        compiled = run.lower(x).compile()
        comp = time.perf_counter() - tic
        best = best_of(lambda: compiled(x), repeat)
        return {"solver": solver, "batch": B, "steps": steps, "compile_s": comp, "run_s": best,
                "variant_steps_per_s": B * steps / best}

    def solve_time(self, solver, B, repeat):
        """Factorisation of eq. (11) + the two stage solves, per variant [us], batch B."""
        sysm = model_system(self.model, self.exc, solver)
        r = self.eq.r.reshape(-1) + 1e-5 * jax.random.normal(jax.random.PRNGKey(0), (B, self.eq.r.size))
        u = jnp.broadcast_to(sysm.u(5.0), (B, 12))
        lin = jax.jit(jax.vmap(sysm.linearise))(r, jnp.zeros_like(r), u)

        def fs(ll):
            f_ = sysm.solver.factor(ll, 1e-3 * lsrt2.GAMMA)
            return sysm.solver.solve(f_, sysm.solver.solve(f_, ll.q))
        g = jax.jit(jax.vmap(fs))
        jax.block_until_ready(g(lin))
        return 1e6 * best_of(lambda: g(lin), repeat) / B

    def step_flops(self, solver, B=64):
        """XLA cost analysis of one LSRT2 step (linearisation, factorisation, both stages)."""
        f = self.one_step(solver)
        r = jnp.broadcast_to(self.eq.r.reshape(-1), (B, self.eq.r.size))
        ca = jax.jit(jax.vmap(f)).lower(r, jnp.zeros_like(r)).compile().cost_analysis()
        ca = ca[0] if isinstance(ca, list) else ca
        return ca.get("flops", float("nan")) / B, ca.get("bytes accessed", float("nan")) / B

    def one_step(self, solver):
        sysm = model_system(self.model, self.exc, solver)

        def f(r, v):
            lin = sysm.linearise(r, v, sysm.u(5.0))
            fac = sysm.solver.factor(lin, 1e-3 * lsrt2.GAMMA)
            return integrate.step(lsrt2.LSRT2, sysm, lin, fac, lin.q, r, v, 5.0, 1e-3)[:2]
        return f

    def breakdown(self, solver, B, repeat):
        """Time per variant of the parts of one step [us], batch B."""
        sysm = model_system(self.model, self.exc, solver)
        key = jax.random.PRNGKey(0)
        r = self.eq.r.reshape(-1) + 1e-5 * jax.random.normal(key, (B, self.eq.r.size))
        v = 1e-3 * jax.random.normal(jax.random.PRNGKey(1), (B, self.eq.r.size))
        u = jnp.broadcast_to(sysm.u(5.0), (B, 12))
        parts = {}

        def timed(name, f, *a):
            g = jax.jit(f)
            jax.block_until_ready(g(*a))
            parts[name] = 1e6 * best_of(lambda: g(*a), repeat) / B
        lin = jax.jit(jax.vmap(sysm.linearise))(r, v, u)
        fac = jax.jit(jax.vmap(lambda ll: sysm.solver.factor(ll, 1e-3 * lsrt2.GAMMA)))(lin)
        timed("linearisation", jax.vmap(sysm.linearise), r, v, u)
        timed("factorisation", jax.vmap(lambda ll: sysm.solver.factor(ll, 1e-3 * lsrt2.GAMMA)), lin)
        timed("two solves", jax.vmap(lambda f_, b: sysm.solver.solve(f_, sysm.solver.solve(f_, b))), fac, lin.q)
        timed("q (stage 2)", jax.vmap(sysm.q), r, v, u)
        timed("whole step", jax.vmap(self.one_step(solver)), r, v)
        parts["rest (products, rates, K)"] = parts["whole step"] - sum(
            parts[k] for k in ("linearisation", "factorisation", "two solves", "q (stage 2)"))
        return parts

    # ------------------------------------------------------------------ accuracy
    def reference(self, t):
        from kernels.radau import solve as radau
        _, r, v = radau(self.model, self.exc, self.eq.r, jnp.zeros_like(self.eq.r), t, rtol=1e-8)
        ch = make_channels()
        return jax.vmap(lambda rr, vv: ch(self.model, rr, vv, self.eq.r))(jnp.asarray(r), jnp.asarray(v))

    def inputs(self, float32=False):
        """(model, excitation, r_eq), optionally with every float leaf in float32."""
        if not float32:
            return self.model, self.exc, self.eq.r
        return cast_floats((self.model, self.exc, self.eq.r), jnp.float32)

    def accuracy(self, options):
        t = 4.9 + np.arange(1101) * 1e-3
        ref = self.reference(t)
        rows = []
        for opt in options:
            model, exc, r_eq = self.inputs(opt.get("float32", False))
            kw = dict(n_samples=1101, every=1, relinearise_every=opt.get("relinearise_every", 1))
            compiled = solve.lower(Problem(model, exc, 4.9, 1e-3), Options(**kw), r_eq).compile()
            out = compiled(Problem(model, exc, 4.9, 1e-3), r_eq)
            row = dict(opt)
            for what, key in (("wheel_displacement", "displacement"), ("bushing_force", "force")):
                y, yr = pooled_signals(out, self.model, what), pooled_signals(ref, self.model, what)
                row[f"nmse_{key}"] = float(metrics.nmse(y.astype(np.float64), yr))
            row["dtype"] = str(jnp.asarray(out["wheel_centre_displacement"]).dtype)
            row["us_per_step"] = 1e6 * best_of(lambda: compiled(model, exc, r_eq, 4.9, 1e-3), 2) / 1100
            rows.append(row)
        return rows


# The child reports its own high-water mark (VmHWM of its address space) at
# exit. getrusage(RUSAGE_CHILDREN) is wrong here: Linux carries the parent's
# peak RSS into the child's ru_maxrss through fork/vfork + exec, so it reported
# this (large) benchmark process instead of the job (4.96 GiB vs 1.6 GiB).
_PEAK_WRAPPER = """
import atexit, runpy, sys
def _peak():
    with open('/proc/self/status') as f:
        kb = [l.split()[1] for l in f if l.startswith('VmHWM:')]
    print('PEAK_RSS_KB', kb[0] if kb else 'nan', file=sys.stderr, flush=True)
atexit.register(_peak)
sys.argv = ['sweep'] + sys.argv[1:]
runpy.run_module('sweep', run_name='__main__', alter_sys=True)
"""


def job_peak_memory(n_variants, out_dir):
    """Peak resident memory [GiB] of a sweep job in a child process (short
    manoeuvre, default chunking): the child's own VmHWM (Linux)."""
    args = ["sweep=lhs", f"sweep.n_variants={n_variants}", "sweep.start=5.95", "sweep.every=10",
            f"output.path={out_dir}/peak.zarr", "output.overwrite=true", "sweep.progress=false"]
    tic = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _PEAK_WRAPPER, *args], cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - tic
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    kb = [line.split()[1] for line in proc.stderr.splitlines() if line.startswith("PEAK_RSS_KB")]
    rss = float(kb[-1]) * 1024 / 2 ** 30 if kb else float("nan")
    chunk = [line for line in proc.stdout.splitlines() if "chunks of" in line]
    return {"n_variants": n_variants, "steps": 50, "max_rss_gib": rss, "wall_s": wall,
            "chunking": chunk[0].split("; ")[-1] if chunk else "", "command": "python -m sweep " + " ".join(
                a for a in args if not a.startswith("output.path"))}


# ---------------------------------------------------------------------- report
def tables(res):
    L = []
    L.append(f"Machine: {res['machine']['cpu']}, {res['machine']['cores']} cores, "
             f"{res['machine']['device']}, jax {res['machine']['jax']}; measured float64 peak "
             f"{res['peak_gflops']:.1f} GFLOP/s ({res['peak_note']}). Command: `{res['command']}` "
             f"({res['date']}).")
    L.append("")
    L.append("Single variant, whole load case 0-6 s, h = 1 ms (published C code: RTF 0.59 / 0.73):")
    L.append("")
    L.append("| axle | solver | compile | run | us/step | real-time factor |")
    L.append("|---|---|---|---|---|---|")
    for name, a in res["axles"].items():
        for s in a["single"]:
            L.append(f"| {name} | {s['solver']} | {s['compile_s']:.1f} s | {s['run_s']:.2f} s | "
                     f"{s['us_per_step']:.0f} | {s['real_time_factor']:.3f} |")
    L.append("")
    L.append("Throughput (variant-steps per second; integration only, compile excluded):")
    L.append("")
    batches = sorted({t["batch"] for a in res["axles"].values() for t in a["throughput"]})
    L.append("| axle | solver | " + " | ".join(f"batch {b}" for b in batches) + " |")
    L.append("|---|---|" + "---|" * len(batches))
    for name, a in res["axles"].items():
        for solver in ("block", "dense"):
            row = {t["batch"]: t for t in a["throughput"] if t["solver"] == solver}
            L.append(f"| {name} | {solver} | " + " | ".join(
                f"{row[b]['variant_steps_per_s']:.0f}" if b in row else "-" for b in batches) + " |")
    if any(a.get("throughput_engine") for a in res["axles"].values()):
        L.append("")
        L.append("The same batches mapped as a default job maps a chunk (sweep.engine: `lax.map` over "
                 "micro-batches, both CPU devices from 256 variants; block solver) - the *after* of the throughput work, "
                 "against the one-vmap, one-device *before* above (figure: "
                 "benchmarks/results/throughput.png):")
        L.append("")
        L.append("| axle | mapping | " + " | ".join(f"batch {b}" for b in batches) + " |")
        L.append("|---|---|" + "---|" * len(batches))
        for name, a in res["axles"].items():
            row = {t["batch"]: t for t in a.get("throughput_engine", [])}
            L.append(f"| {name} | devices x micro-batch | " + " | ".join(
                f"{row[b]['devices']} x {row[b]['micro_batch'] or 'one vmap'}" if b in row else "-"
                for b in batches) + " |")
            L.append(f"| {name} | variant-steps/s | " + " | ".join(
                f"{row[b]['variant_steps_per_s']:.0f}" if b in row else "-" for b in batches) + " |")
    L.append("")
    L.append("Factorisation of eq. (11) plus the two stage solves alone, us per variant "
             "(block speed-up over dense LU in brackets):")
    L.append("")
    L.append("| axle | " + " | ".join(f"batch {b}" for b in batches) + " |")
    L.append("|---|" + "---|" * len(batches))
    for name, a in res["axles"].items():
        cells = []
        for b in batches:
            bl = next((t for t in a["throughput"] if t["solver"] == "block" and t["batch"] == b), None)
            de = next((t for t in a["throughput"] if t["solver"] == "dense" and t["batch"] == b), None)
            cells.append(f"{bl['solve_us']:.1f} vs {de['solve_us']:.1f} ({de['solve_us'] / bl['solve_us']:.1f}x)"
                         if bl and de else "-")
        L.append(f"| {name} | " + " | ".join(cells) + " |")
    L.append("")
    L.append("Block versus dense for the whole step, and cost per step:")
    L.append("")
    L.append("| axle | whole-step block speed-up at largest batch | XLA flops / variant-step (block) | "
             "bytes / variant-step (block) | achieved fraction of float64 peak (block, largest batch) |")
    L.append("|---|---|---|---|---|")
    for name, a in res["axles"].items():
        bmax = max(t["batch"] for t in a["throughput"])
        blk = next(t for t in a["throughput"] if t["solver"] == "block" and t["batch"] == bmax)
        den = next(t for t in a["throughput"] if t["solver"] == "dense" and t["batch"] == bmax)
        frac = a["flops_block"] * blk["variant_steps_per_s"] / (res["peak_gflops"] * 1e9)
        L.append(f"| {name} | {blk['variant_steps_per_s'] / den['variant_steps_per_s']:.2f}x (batch {bmax}) | "
                 f"{a['flops_block']:.3g} | {a['bytes_block']:.3g} | {100 * frac:.1f} % |")
    L.append("")
    L.append("Where the time of one step goes (us per variant, batch "
             f"{res['breakdown_batch']}, block solver):")
    L.append("")
    keys = list(next(iter(res["axles"].values()))["breakdown"].keys())
    L.append("| axle | " + " | ".join(keys) + " |")
    L.append("|---|" + "---|" * len(keys))
    for name, a in res["axles"].items():
        L.append(f"| {name} | " + " | ".join(f"{a['breakdown'][k]:.1f}" for k in keys) + " |")
    L.append("")
    if res.get("memory"):
        mem = res["memory"]
        L.append(f"Peak memory of a {mem['n_variants']}-variant sweep job (double wishbone, "
                 f"{mem['steps']} steps, default chunking): max RSS {mem['max_rss_gib']:.2f} GiB, "
                 f"wall {mem['wall_s']:.0f} s, {mem.get('chunking', '')} (`{mem['command']}`"
                 + (f", {mem['date']}" if mem.get("date") else "") + ").")
        L.append("")
    L.append("Accuracy cost of the speed options (NMSE against Radau, 4.9-6.0 s, both sides pooled):")
    L.append("")
    L.append("| axle | option | NMSE displacement | NMSE force | us/step (single variant) |")
    L.append("|---|---|---|---|---|")
    for name, a in res["axles"].items():
        for row in a["accuracy"]:
            opt = "float32" if row.get("float32") else f"re-linearise every {row.get('relinearise_every', 1)}"
            L.append(f"| {name} | {opt} | {row['nmse_displacement']:.2e} | {row['nmse_force']:.2e} | "
                     f"{row.get('us_per_step', float('nan')):.0f} |")
    return "\n".join(L)


def throughput_figure(res, path):
    """Variant-steps/s against batch, both axles: one vmap on one device
    (block and dense solver: the issue-16 *before*) and the engine's default
    mapping (the *after*)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(res["axles"])
    fig, axes = plt.subplots(1, len(names), figsize=(5.2 * len(names), 4.2), squeeze=False, sharey=True)
    for ax, name in zip(axes[0], names):
        a = res["axles"][name]
        for solver, style in (("block", "o-"), ("dense", "s:")):
            rows = sorted((t for t in a["throughput"] if t["solver"] == solver), key=lambda t: t["batch"])
            ax.plot([t["batch"] for t in rows], [t["variant_steps_per_s"] for t in rows], style,
                    label=f"before: one vmap, one device, {solver}")
        rows = sorted(a.get("throughput_engine", []), key=lambda t: t["batch"])
        if rows:
            ax.plot([t["batch"] for t in rows], [t["variant_steps_per_s"] for t in rows], "D-", lw=2,
                    label="after: as a job maps it (micro-batches of 32; 2 CPU devices from 256)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch [variants]")
        ax.set_title(name.replace("_", " "))
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("variant-steps per second")
    axes[0][0].set_ylim(bottom=0)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=len(labels))
    m = res["machine"]
    fig.suptitle(f"LSRT2 h = 1 ms, float64, re-linearised every step; {m['cpu']}, {m['cores']} cores, "
                 f"jax {m['jax']} ({res['date']})", fontsize=9)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def splice(path, tag, text):
    with open(path) as f:
        s = f.read()
    a, b = f"<!-- bench:{tag}:begin -->", f"<!-- bench:{tag}:end -->"
    if a not in s or b not in s:
        raise RuntimeError(f"{path} has no {a} ... {b} markers")
    i, j = s.index(a) + len(a), s.index(b)
    with open(path, "w") as f:
        f.write(s[:i] + "\n" + text + "\n" + s[j:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="batches 1, 64, 256; fewer steps; no 4096 job")
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--no-write-docs", action="store_true")
    ap.add_argument("--work-precision", action="store_true",
                    help="also run benchmarks/work_precision.py (both axles x 3 methods x 5 steps x "
                         "4 re-linearisation intervals; ~1.5 h on 2 cores) into benchmarks/results/")
    ap.add_argument("--memory-only", action="store_true",
                    help="re-measure only the 4096-variant job's peak memory into the existing suite.json")
    args = ap.parse_args()
    if args.memory_only:
        return memory_only(args)
    if args.work_precision:
        subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "work_precision.py")], check=True)
    batches = [1, 64, 256] if args.quick else [1, 64, 256, 1024, 4096]
    res = {"machine": machine(), "date": time.strftime("%Y-%m-%d"),
           "command": "python benchmarks/run.py" + (" --quick" if args.quick else ""), "axles": {}}
    res["peak_gflops"] = float64_peak()
    res["peak_note"] = "2048 x 2048 matmul, best of 5"
    print(f"float64 peak: {res['peak_gflops']:.1f} GFLOP/s", flush=True)
    res["breakdown_batch"] = 256
    for name in args.models:
        ax = Axle(name)
        a = {"single": [], "throughput": []}
        for solver in ("block", "dense"):
            s = ax.single(solver, repeat=1 if args.quick else 2)
            a["single"].append(s)
            print(f"{name} single {solver}: RTF {s['real_time_factor']:.3f} (compile {s['compile_s']:.1f} s)", flush=True)
        for B in batches:
            steps = 100 if B <= 64 else (40 if B <= 1024 else 20)
            if args.quick:
                steps = max(10, steps // 2)
            for solver in ("block", "dense"):
                t = ax.throughput(solver, B, steps, repeat=2 if B <= 256 else 1)
                t["solve_us"] = ax.solve_time(solver, B, repeat=3 if B <= 256 else 1)
                a["throughput"].append(t)
                print(f"{name} batch {B} {solver}: {t['variant_steps_per_s']:.0f} variant-steps/s "
                      f"(compile {t['compile_s']:.1f} s)", flush=True)
            t = ax.throughput_engine(B, steps, repeat=2 if B <= 256 else 1)
            a.setdefault("throughput_engine", []).append(t)
            print(f"{name} batch {B} engine mapping ({t['devices']} device(s), micro-batch "
                  f"{t['micro_batch']}): {t['variant_steps_per_s']:.0f} variant-steps/s "
                  f"(compile {t['compile_s']:.1f} s)", flush=True)
        a["flops_block"], a["bytes_block"] = ax.step_flops("block")
        a["flops_dense"], a["bytes_dense"] = ax.step_flops("dense")
        a["breakdown"] = ax.breakdown("block", res["breakdown_batch"], repeat=3)
        print(f"{name} breakdown: {a['breakdown']}", flush=True)
        options = [{"relinearise_every": 1}, {"relinearise_every": 2}, {"relinearise_every": 4},
                   {"relinearise_every": 8}, {"float32": True}]
        a["accuracy"] = ax.accuracy(options)
        for row in a["accuracy"]:
            print(f"{name} accuracy {row}", flush=True)
        res["axles"][name] = a
    if not args.quick:
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            res["memory"] = job_peak_memory(4096, d)
        print(f"memory: {res['memory']}", flush=True)
    os.makedirs(os.path.join(ROOT, "benchmarks", "results"), exist_ok=True)
    out = os.path.join(ROOT, "benchmarks", "results", "suite_quick.json" if args.quick else "suite.json")
    write_results(res, out, args)


def memory_only(args):
    import tempfile
    out = os.path.join(ROOT, "benchmarks", "results", "suite.json")
    with open(out) as f:
        res = json.load(f)
    with tempfile.TemporaryDirectory() as d:
        res["memory"] = job_peak_memory(4096, d)
    res["memory"]["date"] = time.strftime("%Y-%m-%d")
    print(f"memory: {res['memory']}", flush=True)
    write_results(res, out, args)


def write_results(res, out, args):
    with open(out, "w") as f:
        json.dump(res, f, indent=2)
    text = tables(res)
    print(text)
    if any(a.get("throughput_engine") for a in res["axles"].values()):
        throughput_figure(res, os.path.join(os.path.dirname(out), "throughput.png"))
    if not args.no_write_docs:
        splice(os.path.join(ROOT, "BENCHMARKS.md"), "suite", text)
        if os.path.basename(out) == "suite.json":     # the figures table renders suite.json
            from tables import write as write_doc_tables   # benchmarks/tables.py
            write_doc_tables(["figures"])
    print(f"written: {out}")


if __name__ == "__main__":
    main()
