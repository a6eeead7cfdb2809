#!/usr/bin/env bash
# GPU check of axle-sweep on a GPU machine without the project installed
# (the figures of BENCHMARKS.md, "GPU"). Run from the repository root, with OUT set:
#   bash benchmarks/gpu_check.sh
# Lessons of its first use (2026-11-26, H200, 15 minutes of device time): a
# GPU compile of one runner takes ~1 min alone and 2-3 min with 8-10 at once,
# so set JAX_COMPILATION_CACHE_DIR, compile few runners at a time, time the
# block solver first and leave the dense solver out at batch 4096.
# Needs .gpu_site/ (carried): pure-Python packages missing on the device
# (hydra, omegaconf, antlr4, zarr, donfig) in .gpu_site/site, and cp312
# wheels (numcodecs, google-crc32c) in .gpu_site/whl.
# Steps (each under its own `timeout`, all within TOTAL seconds):
#   a. environment: nvidia-smi, versions, jax.devices(), imports
#   b. benchmark driver: the suite's own measurement code (benchmarks/run.py's
#      Axle) for both axles: float64 peak, single-variant real-time factor,
#      throughput at batch 1 64 256 1024 4096, block and dense
#   c. pytest, the fast tier of tests/kernels
#   d. (time permitting) benchmarks/sweep_throughput.py, the engine's chunk runner
# BENCH_COMMIT=<commit>: the commit the figures are recorded with (a lent
# device's copy of the tree may carry the .git of an older commit).
# Switches: SKIP_ENV=1 (no step a), SKIP_TESTS=1 (no steps c and d),
# DRIVER=job: step b runs benchmarks/job_throughput.py (the whole job as a
# user runs it, 4096 variants with every step written and 65,536 with every
# LARGE_EVERY-th (default 10: every step of 65,536 variants is ~19 GB on the
# double wishbone), both axles or JOB_MODELS, the stores in /tmp and removed
# after each job, each job's timeout at most what is left; its CPU form runs
# in CI: tests/e2e/test_job_throughput_script.py; steps c and d skipped),
# DRIVER=remeasure: step b runs benchmarks/gpu_remeasure.py instead (the
# re-measurement after the dense-solve fix: solves at 1024 first, then the
# runners compiled 6 at a time and timed, the chunk runner included; steps c
# and d skipped), COMPILE_THREADS=n, TOTAL=seconds.
export PYTHONUNBUFFERED=1
REPO=$(pwd)
OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
LOG=$OUT/all.log
TOTAL=${TOTAL:-470}
START=$SECONDS
left() { echo $(( TOTAL - (SECONDS - START) )); }
stamp() { echo; echo "=============== [$(date +%T), t+$((SECONDS - START)) s, $(left) s left] $*"; }
min() { if [ "$1" -lt "$2" ]; then echo "$1"; else echo "$2"; fi; }

main() {
stamp "setup"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$REPO"/.gpu_site/whl/*.whl || echo "WHEEL INSTALL FAILED"
export PYTHONPATH=/tmp/site:$REPO/.gpu_site/site:$REPO
unset JAX_PLATFORMS JAX_PLATFORM_NAME AXLE_CPU_DEVICES
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-/tmp/jax_cache}
echo "JAX_COMPILATION_CACHE_DIR=$JAX_COMPILATION_CACHE_DIR"
echo "PYTHONPATH=$PYTHONPATH"

# ----------------------------------------------------------------- a. environment
if [ -z "$SKIP_ENV" ]; then
stamp "a. environment"
nvidia-smi -L
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv
nproc; grep -m1 "model name" /proc/cpuinfo; free -g | head -2
timeout 60 python3 - <<'PY'
import importlib, os, sys, time
print("python", sys.version)
for m in ("jax", "jaxlib", "numpy", "scipy", "optax", "xarray", "yaml", "matplotlib", "flatbuffers",
          "omegaconf", "hydra", "zarr", "numcodecs", "google_crc32c", "donfig"):
    try:
        mod = importlib.import_module(m)
        print(f"  {m:14s} {getattr(mod, '__version__', '?'):12s} {os.path.dirname(mod.__file__)}")
    except Exception as e:  # noqa: BLE001
        print(f"  {m:14s} IMPORT FAILED: {e!r}")
import jax
import kernels  # noqa: F401  (float64)
print("jax.devices():", jax.devices(), "default backend:", jax.default_backend())
import jax.numpy as jnp
x = jnp.arange(4.0)
print("x64 on:", x.dtype, "placed on", x.devices())
for m in ("sweep.axle.builder", "sweep.kinds.time_response", "sweep.engine.mapping", "sweep.app", "sweep.results.store"):
    tic = time.perf_counter()
    try:
        importlib.import_module(m)
        print(f"  import {m}: ok ({time.perf_counter() - tic:.1f} s)")
    except Exception as e:  # noqa: BLE001
        print(f"  import {m}: FAILED {e!r}")
if jax.default_backend() != "gpu":
    print("WARNING: JAX does not use the GPU")
PY
echo "rc(env)=$?"
fi

# ----------------------------------------------------------------- b. benchmarks
cat > /tmp/gpu_driver.py <<'PY'
"""Measurements of benchmarks/run.py (its Axle class: the same runners, the
same variants, the same steps as the full suite), compiled concurrently in
threads first (XLA compiles release the GIL), then timed one after another
with nothing else running. Results saved after every item."""
import json
import os
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor, wait

ROOT = os.getcwd()
OUT = os.environ["OUT"]
T0 = time.perf_counter()
BUDGET = float(os.environ.get("DRIVER_BUDGET", "240"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import run as suite  # noqa: E402  (benchmarks/run.py: sets only the CPU device count of XLA_FLAGS)
import jax  # noqa: E402
import numpy as np  # noqa: E402

MODELS = ("double_wishbone", "multilink")
BATCHES = (4096, 1024, 256, 64, 1)
STEPS = {1: 100, 64: 100, 256: 40, 1024: 40, 4096: 20}   # as the full suite (run.py without --quick)
res = {"machine": suite.machine(), "devices": [str(d) for d in jax.devices()], "backend": jax.default_backend(),
       "xla_flags": os.environ.get("XLA_FLAGS", ""), "note": __doc__, "peak": {}, "axles": {}, "errors": []}
lock = threading.Lock()


def el():
    return time.perf_counter() - T0


def save():
    with lock:
        with open(os.path.join(OUT, "gpu_bench.json"), "w") as f:
            json.dump(res, f, indent=2, default=str)


def log(*a):
    print(f"[t+{el():6.1f} s]", *a, flush=True)


log("devices", jax.devices(), "backend", jax.default_backend())
for n in (2048, 8192):
    try:
        res["peak"][f"matmul_{n}_gflops"] = suite.float64_peak(n)
        log(f"float64 peak ({n} x {n} matmul, best of 5): {res['peak'][f'matmul_{n}_gflops']:.0f} GFLOP/s")
    except Exception as e:  # noqa: BLE001
        log(f"float64 peak {n}: FAILED {e!r}")
save()

# axles (equilibria compile) in two threads
axles = {}


def make_axle(name):
    tic = time.perf_counter()
    axles[name] = suite.Axle(name)
    log(f"{name}: model + equilibrium {time.perf_counter() - tic:.1f} s")


with ThreadPoolExecutor(2) as ex:
    for f in [ex.submit(make_axle, n) for n in MODELS]:
        f.result()
for n in MODELS:
    res["axles"][n] = {"single": [], "throughput": [], "compile_concurrent": {}}


# ---------------------------------------------------------------- compile jobs
def job_single(name, solver):
    ax = axles[name]
    n = suite.sample_grid(ax.t0, ax.t1, 1e-3, 1)
    pset = suite.build_parameters({}, ax.model)
    runner = suite.make_chunk_runner(ax.model, pset, suite.Case(ax.exc, ax.t0, 1e-3, n, solver=solver))
    thetas = np.zeros((1, 0))
    return runner.lower(thetas).compile(), thetas, {"solver": solver, "steps": n - 1, "span": ax.t1 - ax.t0}


def job_batch(name, solver, B):
    ax = axles[name]
    run = ax.batch_runner(solver, STEPS[B])
    x = ax.scales(B)
    return run.lower(x).compile(), x, {"solver": solver, "batch": B, "steps": STEPS[B]}


jobs = []   # (key, fn, args), priority order
for B in (4096, 1024):
    for name in MODELS:
        for solver in ("block", "dense"):
            jobs.append(((name, "batch", solver, B), job_batch, (name, solver, B)))
for name in MODELS:
    for solver in os.environ.get("SINGLE_SOLVERS", "block dense").split():
        jobs.append(((name, "single", solver, 0), job_single, (name, solver)))
for B in (() if os.environ.get("KEY_ONLY") else (256, 64, 1)):
    for name in MODELS:
        for solver in ("block", "dense"):
            jobs.append(((name, "batch", solver, B), job_batch, (name, solver, B)))

compiled = {}


def do(key, fn, args):
    tic = time.perf_counter()
    try:
        c, x, meta = fn(*args)
    except Exception as e:  # noqa: BLE001
        with lock:
            res["errors"].append({"key": str(key), "error": repr(e), "tb": traceback.format_exc()[-3000:]})
        log(f"compile {key}: FAILED {e!r}")
        return
    dt = time.perf_counter() - tic
    compiled[key] = (c, x, meta, dt)
    with lock:
        res["axles"][key[0]]["compile_concurrent"][f"{key[1]} {key[2]} {key[3]}"] = dt
    log(f"compiled {key} in {dt:.1f} s (concurrent)")


tic = time.perf_counter()
NW = int(os.environ.get("COMPILE_THREADS", "8"))
ex = ThreadPoolExecutor(NW)
futs = [ex.submit(do, *j) for j in jobs]
fut_of = {j[0]: f for j, f in zip(jobs, futs)}
# at most 60 % of the budget for compiling; then time what is compiled (the
# rest still compiles in the background and is timed in a second pass)
done, pending = wait(futs, timeout=max(1.0, 0.6 * BUDGET - el()))
res["compile_phase_s"] = time.perf_counter() - tic
res["compile_threads"] = NW
res["compiles_pending_at_timing"] = len(pending)
log(f"compile phase: {len(compiled)}/{len(jobs)} runners in {res['compile_phase_s']:.1f} s with {NW} threads"
    + (f"; {len(pending)} still compiling while timing (timings may be disturbed)" if pending else ""))
ex.shutdown(wait=False, cancel_futures=True)
save()


# ---------------------------------------------------------------- timing
def timed(c, x):
    """Adaptive best-of: runs again while runs are short (at most 3)."""
    times = []
    while True:
        tic = time.perf_counter()
        jax.block_until_ready(c(x))
        times.append(time.perf_counter() - tic)
        if len(times) >= 3 or sum(times) > 12 or (len(times) >= 2 and sum(times) > 4):
            return min(times), times


order = [k for k, _, _ in jobs]
timed_keys = set()
for key in order + [None] + order:     # second pass: runners compiled late
    if key is None:
        if len(timed_keys) < len(compiled):
            log("second pass over runners compiled during the timing")
        continue
    if key in timed_keys:
        continue
    try:     # wait for this runner's compilation (priority order)
        fut_of[key].result(timeout=max(0.0, BUDGET - 10 - el()))
    except Exception:  # noqa: BLE001
        pass
    if compiled.get(key) is None:
        continue
    timed_keys.add(key)
    if el() > BUDGET - 10:
        log(f"driver budget spent: not timed {key}")
        res["errors"].append({"key": str(key), "error": "not timed: driver budget spent"})
        continue
    c, x, meta, comp = compiled[key]
    name = key[0]
    try:
        best, times = timed(c, x)
    except Exception as e:  # noqa: BLE001
        res["errors"].append({"key": str(key), "error": repr(e), "tb": traceback.format_exc()[-3000:]})
        log(f"run {key}: FAILED {e!r}")
        continue
    row = dict(meta, compile_s_concurrent=comp, run_s=best, runs_s=times)
    if key[1] == "single":
        row["real_time_factor"] = best / meta["span"]
        row["us_per_step"] = 1e6 * best / meta["steps"]
        res["axles"][name]["single"].append(row)
        log(f"{name} single {meta['solver']}: RTF {row['real_time_factor']:.3f}, "
            f"{row['us_per_step']:.0f} us/step, run {best:.3f} s (runs {[round(t, 3) for t in times]}), "
            f"compile {comp:.1f} s")
    else:
        row["variant_steps_per_s"] = meta["batch"] * meta["steps"] / best
        res["axles"][name]["throughput"].append(row)
        log(f"{name} batch {meta['batch']} {meta['solver']}: {row['variant_steps_per_s']:.0f} variant-steps/s "
            f"(run {best:.4f} s for {meta['steps']} steps, runs {[round(t, 4) for t in times]}; "
            f"compile {comp:.1f} s)")
    save()
    compiled[key] = None   # free

# ---------------------------------------------------------------- extras (time permitting; serial compiles)
for name in MODELS:
    ax = axles[name]
    for solver in ("block", "dense"):
        if el() > BUDGET - 45:
            log(f"no time for extras of {name} {solver}")
            break
        try:
            tic = time.perf_counter()
            fl, by = ax.step_flops(solver)
            res["axles"][name][f"flops_{solver}"], res["axles"][name][f"bytes_{solver}"] = fl, by
            log(f"{name} {solver}: XLA flops/variant-step {fl:.4g}, bytes/variant-step {by:.4g} "
                f"({time.perf_counter() - tic:.1f} s)")
            tic = time.perf_counter()
            us = ax.solve_time(solver, 1024, repeat=3)
            res["axles"][name][f"solve_us_1024_{solver}"] = us
            log(f"{name} {solver}: factorisation + 2 solves at batch 1024: {us:.3f} us/variant "
                f"({time.perf_counter() - tic:.1f} s)")
        except Exception as e:  # noqa: BLE001
            res["errors"].append({"key": f"extras {name} {solver}", "error": repr(e)})
            log(f"extras {name} {solver}: FAILED {e!r}")
        save()

# ---------------------------------------------------------------- summary
print()
print("Single variant (whole load case 0-6 s, h = 1 ms, engine chunk runner of one variant):")
print("| axle | solver | compile (concurrent) | run | us/step | RTF |")
for name in MODELS:
    for s in res["axles"][name]["single"]:
        print(f"| {name} | {s['solver']} | {s['compile_s_concurrent']:.1f} s | {s['run_s']:.3f} s | "
              f"{s['us_per_step']:.0f} | {s['real_time_factor']:.3f} |")
print()
print("Throughput, variant-steps/s (one vmap, one device; compile excluded):")
print("| axle | solver | " + " | ".join(f"batch {b}" for b in sorted(BATCHES)) + " |")
for name in MODELS:
    for solver in ("block", "dense"):
        row = {t["batch"]: t for t in res["axles"][name]["throughput"] if t["solver"] == solver}
        print(f"| {name} | {solver} | " + " | ".join(
            f"{row[b]['variant_steps_per_s']:.0f}" if b in row else "-" for b in sorted(BATCHES)) + " |")
print()
print("Compile times (s, concurrent, 'kind solver batch'):")
for name in MODELS:
    print(" ", name, {k: round(v, 1) for k, v in res["axles"][name]["compile_concurrent"].items()})
peak = res["peak"].get("matmul_8192_gflops") or res["peak"].get("matmul_2048_gflops")
if peak:
    for name in MODELS:
        a = res["axles"][name]
        blk = {t["batch"]: t for t in a["throughput"] if t["solver"] == "block"}
        if "flops_block" in a and 4096 in blk:
            print(f"  {name}: block at 4096 achieves {100 * a['flops_block'] * blk[4096]['variant_steps_per_s'] / (peak * 1e9):.2f} % "
                  f"of the measured float64 peak {peak:.0f} GFLOP/s")
print(f"errors: {len(res['errors'])}")
for e in res["errors"]:
    print("  ", e["key"], e["error"])
res["driver_wall_s"] = el()
save()
log("driver done")
sys.stdout.flush()
os._exit(0)        # do not wait for compiles still running in the background
PY
if [ "$DRIVER" = job ]; then
stamp "b. benchmarks/job_throughput.py (the whole job: equilibria, integration, store)"
T=$(( $(left) - 5 ))
echo "driver timeout $T s"
timeout -k 5 $T python3 benchmarks/job_throughput.py --out-dir "$OUT" --store-dir /tmp/stores \
    --budget $(( T - 10 )) --timeout $(( T / 2 )) --models ${JOB_MODELS:-double_wishbone multilink} \
    --variants 4096 65536 --every 1 ${LARGE_EVERY:-10}
echo "rc(job_throughput)=$?"
SKIP_TESTS=1
elif [ "$DRIVER" = remeasure ]; then
stamp "b. benchmarks/gpu_remeasure.py (after the dense-solve fix)"
T=$(( $(left) - 5 ))
echo "driver timeout $T s"
DRIVER_BUDGET=$((T - 10)) timeout -k 5 $T python3 benchmarks/gpu_remeasure.py
echo "rc(remeasure)=$?"
SKIP_TESTS=1
else
stamp "b. benchmarks (driver)"
if [ -n "$SKIP_TESTS" ]; then T=$(( $(left) - 5 )); else T=$(min 250 $(( $(left) - 150 ))); fi
echo "driver timeout $T s"
DRIVER_BUDGET=$((T - 5)) timeout -k 5 $T python3 /tmp/gpu_driver.py
echo "rc(driver)=$?"
fi

if [ -z "$SKIP_TESTS" ]; then
# ----------------------------------------------------------------- c. tests
stamp "c. pytest tests/kernels (fast tier)"
T=$(min 160 $(( $(left) - 20 )))
echo "pytest timeout $T s"
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout -k 5 $T python3 -m pytest tests/kernels -p no:cacheprovider \
    -v -rfE --timeout 120 -n 8 --durations=15 -m "not e2e and not notebook and not validation" \
    --junitxml="$OUT/pytest_junit.xml"
echo "rc(pytest)=$?"

# ----------------------------------------------------------------- d. engine chunk runner (time permitting)
stamp "d. sweep_throughput.py (double wishbone, engine chunk runner incl. static equilibria)"
T=$(( $(left) - 8 ))
if [ "$T" -ge 45 ]; then
    echo "timeout $T s"
    timeout -k 5 $T python3 benchmarks/sweep_throughput.py --batches 1024 4096 --steps 100 --solver block \
        --json "$OUT/sweep_throughput_dw_block.json"
    echo "rc(sweep_throughput)=$?"
else
    echo "skipped: $T s left"
fi
fi
stamp "done"
ls -la "$OUT"
}
main 2>&1 | tee "$LOG"
