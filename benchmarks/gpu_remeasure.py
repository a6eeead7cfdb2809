"""GPU re-measurement after the dense-solve fix (kernels.linalg: one batched
call on the GPU instead of a lax.map): run by benchmarks/gpu_check.sh with
DRIVER=remeasure (OUT set). Measures, in this order:

1. factorisation + 2 solves per variant at batch 1024 (benchmarks/run.py's
   Axle.solve_time), block and dense, both axles - nothing else running;
2. compiles in a few threads, in priority order, and times each runner as
   soon as it is compiled ("as compiled": other compiles still running):
   the integration at batch 1024 block/dense (both axles), the job's chunk
   runner (benchmarks/sweep_throughput.py's code: lhs design, per-variant
   static equilibrium, 100 steps) at 1024, single-variant real-time factor
   (the engine's chunk runner of one variant, 0-6 s), block at 256/64/1,
   then dense at 256/64/1, single dense, chunk runner at 4096;
3. a clean pass: every compiled runner timed again with no compile running
   (no compile thread left) - or with the number still running recorded;
4. time permitting: factorisation + 2 solves at batch 4096.

Results saved after every item in $OUT/gpu_remeasure.json.
Same runners, variants and steps as benchmarks/run.py's full suite."""
import json
import os
import sys
import threading
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

ROOT = os.getcwd()
OUT = os.environ.get("OUT", "/tmp/gpu_out")
T0 = time.perf_counter()
BUDGET = float(os.environ.get("DRIVER_BUDGET", "450"))
RESERVE = float(os.environ.get("CLEAN_RESERVE", "70"))   # seconds kept for the clean pass + batch-4096 solves
NW = int(os.environ.get("COMPILE_THREADS", "6"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import run as suite  # noqa: E402  (benchmarks/run.py: sets only the CPU device count of XLA_FLAGS)
import jax  # noqa: E402
import numpy as np  # noqa: E402
import yaml  # noqa: E402

MODELS = ("double_wishbone", "multilink")
STEPS = {1: 100, 64: 100, 256: 40, 1024: 40, 4096: 20}   # as the full suite (run.py without --quick)
CHUNK_STEPS, CHUNK_EVERY = 100, 10                       # as sweep_throughput.py --steps 100
res = {"machine": suite.machine(), "devices": [str(d) for d in jax.devices()], "backend": jax.default_backend(),
       "xla_flags": os.environ.get("XLA_FLAGS", ""),
       "compilation_cache": os.environ.get("JAX_COMPILATION_CACHE_DIR", ""),
       "compile_threads": NW, "note": __doc__, "solve_us": [], "runners": {}, "errors": []}
lock = threading.Lock()
inflight = [0]


def el():
    return time.perf_counter() - T0


def save():
    with lock:
        with open(os.path.join(OUT, "gpu_remeasure.json"), "w") as f:
            json.dump(res, f, indent=2, default=str)


def log(*a):
    print(f"[t+{el():6.1f} s]", *a, flush=True)


def err(key, e):
    with lock:
        res["errors"].append({"key": str(key), "error": repr(e), "tb": traceback.format_exc()[-3000:]})
    log(f"{key}: FAILED {e!r}")


log("devices", jax.devices(), "backend", jax.default_backend())
axles = {}


def make_axle(name):
    tic = time.perf_counter()
    axles[name] = suite.Axle(name)
    log(f"{name}: model + equilibrium {time.perf_counter() - tic:.1f} s")


with ThreadPoolExecutor(2) as ex:
    for f in [ex.submit(make_axle, n) for n in MODELS]:
        f.result()


def solve_row(name, solver, B):
    tic = time.perf_counter()
    try:
        us = axles[name].solve_time(solver, B, repeat=5)
    except Exception as e:  # noqa: BLE001
        err(f"solve {name} {solver} {B}", e)
        return
    with lock:
        res["solve_us"].append({"axle": name, "solver": solver, "batch": B, "us_per_variant": us,
                                "wall_s": time.perf_counter() - tic, "compiles_running": inflight[0]})
    log(f"{name} {solver}: factorisation + 2 solves at batch {B}: {us:.3f} us/variant "
        f"({time.perf_counter() - tic:.1f} s incl. compile; {inflight[0]} compiles running)")
    save()


# ---------------------------------------------------------------- 1. solves at 1024, nothing else running
for name in MODELS:
    for solver in ("dense", "block"):
        solve_row(name, solver, 1024)


# ---------------------------------------------------------------- 2. runners
def job_single(name, solver):
    ax = axles[name]
    n = suite.sample_grid(ax.t0, ax.t1, 1e-3, 1)
    pset = suite.build_parameters({}, ax.model)
    runner = suite.make_chunk_runner(ax.model, pset, suite.Case(ax.exc, ax.t0, 1e-3, n, every=1, relin=1, bidx=list(range(len(ax.model.topology.bushing_names))), solver=solver))
    thetas = np.zeros((1, 0))
    return runner.lower(thetas).compile(), thetas, {"solver": solver, "steps": n - 1, "span": ax.t1 - ax.t0}


def job_batch(name, solver, B):
    ax = axles[name]
    run = ax.batch_runner(solver, STEPS[B])
    x = ax.scales(B)
    return run.lower(x).compile(), x, {"solver": solver, "batch": B, "steps": STEPS[B]}


def job_chunk(name, solver, B):
    """benchmarks/sweep_throughput.py's runner (double wishbone only there)."""
    from sweep.study.design import make_design
    cfg = lambda *p: yaml.safe_load(open(os.path.join(ROOT, "configs", *p)))  # noqa: E731
    model = axles[name].model
    pset = suite.build_parameters(cfg("sweep", "lhs.yaml")["parameters"], model)
    X = make_design({"design": "lhs", "n_variants": B, "seed": 0}, pset)
    run = suite.make_chunk_runner(model, pset, suite.Case(axles[name].exc, 5.0 - 0.05, 1e-3, CHUNK_STEPS // CHUNK_EVERY + 1, every=CHUNK_EVERY, relin=1, bidx=list(range(len(model.topology.bushing_names))), solver=solver))
    return run.lower(X).compile(), X, {"solver": solver, "batch": B, "steps": CHUNK_STEPS}


DW, ML = MODELS
jobs = [((DW, "batch", "block", 1024), job_batch), ((DW, "batch", "dense", 1024), job_batch),
        ((DW, "chunk", "block", 1024), job_chunk),
        ((ML, "batch", "block", 1024), job_batch), ((ML, "batch", "dense", 1024), job_batch),
        ((DW, "single", "block", 1), job_single), ((ML, "single", "block", 1), job_single)]
jobs += [((n, "batch", "block", B), job_batch) for B in (256, 64, 1) for n in MODELS]
jobs += [((n, "batch", "dense", B), job_batch) for B in (256, 64, 1) for n in MODELS]
jobs += [((n, "single", "dense", 1), job_single) for n in MODELS]
jobs += [((DW, "chunk", "block", 4096), job_chunk)]
if os.environ.get("MAX_JOBS"):
    jobs = jobs[:int(os.environ["MAX_JOBS"])]


def kstr(key):
    return " ".join(map(str, key))


compiled = {}


def do(key, fn):
    with lock:
        inflight[0] += 1
    tic = time.perf_counter()
    try:
        args = (key[0], key[2]) if key[1] == "single" else (key[0], key[2], key[3])
        c, x, meta = fn(*args)
        dt = time.perf_counter() - tic
        compiled[key] = (c, x, meta)
        with lock:
            res["runners"][kstr(key)] = dict(meta, axle=key[0], kind=key[1], compile_s_concurrent=dt,
                                             compiled_at_s=el(), timings=[])
        log(f"compiled {key} in {dt:.1f} s ({inflight[0]} compiling)")
    except Exception as e:  # noqa: BLE001
        err(f"compile {kstr(key)}", e)
    finally:
        with lock:
            inflight[0] -= 1


def timed(c, x):
    """Adaptive best-of: runs again while runs are short (at most 3)."""
    times = []
    while True:
        tic = time.perf_counter()
        jax.block_until_ready(c(x))
        times.append(time.perf_counter() - tic)
        if len(times) >= 3 or sum(times) > 12 or (len(times) >= 2 and sum(times) > 4):
            return min(times), times


def time_runner(key, phase):
    c, x, meta = compiled[key]
    running = inflight[0]
    try:
        best, times = timed(c, x)
    except Exception as e:  # noqa: BLE001
        err(f"run {kstr(key)} ({phase})", e)
        return
    row = {"phase": phase, "compiles_running": running, "run_s": best, "runs_s": times}
    if key[1] == "single":
        row["real_time_factor"] = best / meta["span"]
        row["us_per_step"] = 1e6 * best / meta["steps"]
        txt = f"RTF {row['real_time_factor']:.4f}, {row['us_per_step']:.1f} us/step"
    else:
        row["variant_steps_per_s"] = meta["batch"] * meta["steps"] / best
        txt = f"{row['variant_steps_per_s']:.0f} variant-steps/s ({meta['steps']} steps)"
    with lock:
        res["runners"][kstr(key)]["timings"].append(row)
    log(f"[{phase}, {running} compiling] {kstr(key)}: {txt}; run {best:.4f} s (runs {[round(t, 4) for t in times]})")
    save()


log(f"compiling {len(jobs)} runners with {NW} threads")
ex = ThreadPoolExecutor(NW)
futs = {ex.submit(do, k, fn): k for k, fn in jobs}
pending = set(futs)
while pending and el() < BUDGET - RESERVE:
    done, pending = wait(pending, timeout=max(0.5, BUDGET - RESERVE - el()), return_when=FIRST_COMPLETED)
    for f in sorted(done, key=lambda f: list(futs).index(f)):
        if futs[f] in compiled and el() < BUDGET - RESERVE:
            time_runner(futs[f], "as compiled")
res["compile_phase_end_s"] = el()
res["not_compiled"] = [kstr(futs[f]) for f in pending]
ex.shutdown(wait=False, cancel_futures=True)
log(f"compile phase over: {len(compiled)}/{len(jobs)} compiled; {inflight[0]} compiles still running"
    + (f"; not compiled: {res['not_compiled']}" if pending else ""))
save()

# ---------------------------------------------------------------- 3. clean pass
for key, _ in jobs:
    if key not in compiled:
        continue
    if el() > BUDGET - (25 if key[1] == "single" else 8):
        log(f"driver budget spent: no clean timing of {kstr(key)}")
        continue
    time_runner(key, "clean" if inflight[0] == 0 else "second")

# ---------------------------------------------------------------- 4. solves at 4096
for name in MODELS:
    for solver in ("dense", "block"):
        if el() > BUDGET - 15:
            log(f"no time for the batch-4096 solve of {name} {solver}")
            continue
        solve_row(name, solver, 4096)

# ---------------------------------------------------------------- summary
print()
print("Factorisation + 2 solves, us per variant:")
for r in res["solve_us"]:
    print(f"  {r['axle']} {r['solver']} batch {r['batch']}: {r['us_per_variant']:.3f} "
          f"({r['compiles_running']} compiles running)")
print("Runners (best timing with the fewest compiles running):")
for key, _ in jobs:
    r = res["runners"].get(kstr(key))
    if not r or not r["timings"]:
        print(f"  {kstr(key)}: not timed")
        continue
    t = min(r["timings"], key=lambda t: (t["compiles_running"], t["run_s"]))
    fig = (f"RTF {t['real_time_factor']:.4f} ({t['us_per_step']:.1f} us/step)" if key[1] == "single"
           else f"{t['variant_steps_per_s']:.0f} variant-steps/s")
    print(f"  {kstr(key)}: {fig}, run {t['run_s']:.4f} s [{t['phase']}, {t['compiles_running']} compiling], "
          f"compile {r['compile_s_concurrent']:.1f} s (concurrent)")
print(f"errors: {len(res['errors'])}")
for e in res["errors"]:
    print("  ", e["key"], e["error"])
res["driver_wall_s"] = el()
save()
log("driver done")
sys.stdout.flush()
os._exit(0)        # do not wait for compiles still running in the background
