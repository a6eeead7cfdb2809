"""The whole job's throughput - equilibria, integration, store - as a user
runs it (``python -m sweep``), on whatever device JAX finds: the prepared
script for a lent GPU, and its CPU form in CI (``--quick``) so that it
cannot rot.

    python benchmarks/job_throughput.py                       # 4096 and 65,536 variants, DW and multi-link
    python benchmarks/job_throughput.py --variants 1024 --models double_wishbone
    python benchmarks/job_throughput.py --quick               # CI form: the toy axle, 16 variants

Each job is ``python -m sweep model=<m> sweep=lhs sweep.n_variants=<n>``
over the longitudinal step's window 4.9-5.1 s (LSRT2, h = 1 ms, every step
written, the bushings included) into a fresh store, one subprocess per job
under ``--timeout`` seconds. From the job's own log: compile and run time,
the run's split (chunks computing, the writer thread writing, the main
thread waiting for a write), peak host and device memory; from the cube:
its size on disk. Derived: variant-steps/s of the run, of the compute
alone, and the store's write rate [MB/s]. Results (with the machine, the
commands and the commit) go to ``--json`` after every job, so a run cut
short keeps what it measured.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WINDOW = (4.9, 5.1)          # s: across the load step at 5.0 s
DT = 1e-3

PATTERNS = {
    "compile_s": r"wall time: compile ([\d.]+) s",
    "run_s": r"wall time: compile [\d.]+ s, run ([\d.]+) s",
    "compute_s": r"run split: chunks computing ([\d.]+) s",
    "equilibria_s": r"\(equilibria ([\d.]+) s, integration",
    "integration_s": r"integration ([\d.]+) s\)",
    "write_s": r"writing ([\d.]+) s in the writer thread",
    "write_wait_s": r"the run waited ([\d.]+) s for it",
    "host_peak_gib": r"peak memory: host ([\d.]+) GiB",
    "device_peak_gib": r"device ([\d.]+) GiB",
    "chunk": r"chunks of (\d+) on",
    "devices": r"on (\d+) device\(s\)",
}


def _git_commit():
    if os.environ.get("BENCH_COMMIT"):      # a copy of the tree whose .git is not the tree's (a lent device)
        return os.environ["BENCH_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    gpu = None
    try:        # the accelerator, where there is one (the jobs run on it: JAX's default backend)
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        gpu = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": sys.version.split()[0], "gpu": gpu}


def _size_on_disk(path):
    total = 0
    for dirpath, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(dirpath, f)) for f in files)
    return total


# each axle's own lhs design (configs/sweep/); the toy axle: its pivot bushings
DESIGNS = {"double_wishbone": ["sweep=lhs"], "multilink": ["sweep=lhs_multilink"],
           "leaf_spring_axle": ["sweep=lhs_leaf_spring"], "twist_beam": ["sweep=lhs_twist_beam"],
           "toy_trailing_arm": ["sweep=lhs", "~sweep.parameters",
                                "+sweep.parameters.pivots={target: bushing.stiffness, elements: 'pivot_*', "
                                "directions: [radial], bounds: [0.5, 2.0]}"]}


def run_job(model, n, out_dir, timeout, extra=(), every=1):
    """One job; returns its record (the parsed figures, or the error)."""
    path = os.path.join(out_dir, f"{model}_{n}.zarr")
    cmd = [sys.executable, "-m", "sweep", f"model={model}", *DESIGNS.get(model, ["sweep=lhs"]), f"sweep.n_variants={n}",
           f"loadcase.t_start={WINDOW[0]}", f"loadcase.t_end={WINDOW[1]}", "sweep.start=null", "sweep.every=null",
           f"output.every={every}", f"output.path={path}", "output.overwrite=true", "sweep.progress=false", *extra]
    rec = {"model": model, "variants": n, "output_every": every, "command": " ".join(cmd[1:])}
    if os.path.exists(path):            # a fresh store: a complete one of the same job would be reused
        shutil.rmtree(path)
    tic = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        rec.update(error=f"timed out after {timeout:.0f} s")
        return rec
    rec["wall_s"] = round(time.perf_counter() - tic, 2)
    text = proc.stdout + proc.stderr
    if proc.returncode != 0:
        rec.update(error=f"exit {proc.returncode}", log_tail=text[-1500:])
        return rec
    for key, pat in PATTERNS.items():
        m = re.search(pat, text)
        if m:
            rec[key] = float(m.group(1)) if "." in m.group(1) or key.endswith(("_s", "_gib")) else int(m.group(1))
    steps = round((WINDOW[1] - WINDOW[0]) / DT)
    if rec.get("run_s"):
        rec["variant_steps_per_s"] = round(n * steps / rec["run_s"])
    if rec.get("compute_s"):
        rec["compute_variant_steps_per_s"] = round(n * steps / rec["compute_s"])
    if rec.get("integration_s"):       # the generated backend's stages, same run and threads
        rec["integration_variant_steps_per_s"] = round(n * steps / rec["integration_s"])
        if rec.get("run_s"):
            rec["job_over_integration"] = round(rec["integration_s"] / rec["run_s"], 3)
    rec["cube_mb"] = round(_size_on_disk(path) / 1e6, 2)
    if rec.get("write_s"):
        rec["write_mb_per_s"] = round(rec["cube_mb"] / rec["write_s"], 1)
    for key, pat in (("backend_line", r"integrator\.backend=auto: [^\n]*"), ("runner_line", r"compiling [^\n]*")):
        m = re.search(pat, text)
        rec[key] = m.group(0)[:300] if m else None
    status = re.search(r"status: (.*)", text)
    rec["status"] = status.group(1).strip() if status else None
    return rec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["double_wishbone", "multilink"])
    ap.add_argument("--variants", type=int, nargs="+", default=[4096, 65536])
    ap.add_argument("--quick", action="store_true", help="CI form: the toy axle, 16 variants")
    ap.add_argument("--timeout", type=float, default=560.0, help="seconds per job")
    ap.add_argument("--every", type=int, nargs="+", default=None,
                    help="output.every of each --variants entry (default 1: every step written); a large job "
                         "with every step written can outgrow a lent machine's disk and time")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds for all jobs together: a job's timeout is at most what is left")
    ap.add_argument("--out-dir", default=os.environ.get("OUT", "/tmp/job_throughput"),
                    help="where the figures go")
    ap.add_argument("--store-dir", default=None, help="where the jobs' stores go (default: --out-dir)")
    ap.add_argument("--json", default=None, help="where to write the figures (default: <out-dir>/job_throughput.json)")
    ap.add_argument("extra", nargs="*", help="further overrides for every job, e.g. integrator.backend=xla")
    args = ap.parse_args(argv)
    if args.quick:
        args.models, args.variants = ["toy_trailing_arm"], [16]
    every = args.every or [1] * len(args.variants)
    if len(every) != len(args.variants):
        ap.error(f"--every needs one value per --variants entry ({len(args.variants)}), got {len(every)}")
    store_dir = args.store_dir or args.out_dir
    os.makedirs(args.out_dir, exist_ok=True)
    os.makedirs(store_dir, exist_ok=True)
    t0 = time.perf_counter()
    out = args.json or os.path.join(args.out_dir, "job_throughput.json")
    result = {"machine": _machine(), "commit": _git_commit(), "date": time.strftime("%Y-%m-%d %H:%M"),
              "window_s": list(WINDOW), "dt": DT, "jobs": []}
    for model in args.models:
        for n, ev in zip(args.variants, every):
            timeout = args.timeout
            if args.budget is not None:
                timeout = min(timeout, args.budget - (time.perf_counter() - t0))
                if timeout < 20:
                    result["jobs"].append({"model": model, "variants": n, "error": "not run: budget spent"})
                    continue
            rec = run_job(model, n, store_dir, timeout, args.extra, every=ev)
            if store_dir != args.out_dir:          # keep the lent machine's disk for the next job
                for p in glob.glob(os.path.join(store_dir, f"{model}_{n}.*")):   # the store and its overview plot
                    if os.path.isdir(p):
                        shutil.rmtree(p)
                    else:
                        os.remove(p)
            result["jobs"].append(rec)
            with open(out, "w") as f:
                json.dump(result, f, indent=1)
            shown = {k: rec.get(k) for k in ("model", "variants", "compile_s", "run_s", "variant_steps_per_s",
                                             "compute_variant_steps_per_s", "write_mb_per_s", "host_peak_gib",
                                             "device_peak_gib", "status", "error")}
            print(json.dumps(shown), flush=True)
    print(f"figures: {out}")
    return 0 if all("error" not in j for j in result["jobs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
