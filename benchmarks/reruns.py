"""Start-up and reruns of a job as a user meets them: whole ``python -m
sweep`` processes, wall clock from start to exit.

    .venv/bin/python benchmarks/reruns.py            # ~10 min on 2 cores
    .venv/bin/python benchmarks/reruns.py --repeat 1 # one of each

Cases (double wishbone; the longitudinal step and K&C wheel travel):

* first run from empty caches (a new JAX cache directory); a short job,
  so it runs on XLA and then starts the background build of its generated
  code (sweep.prebuild), whose duration is recorded as well - the reruns
  below start after it and run on that code;
* a rerun with nothing to do (the same command again);
* a rerun into a new output path (same values);
* reruns with one changed value each, into new output paths: a wheel load,
  a bushing rate in the model file, a hardpoint, the load step's time (on
  the step grid); each repeat with another value, so no run meets its own
  values in a cache;
* the K&C job: first run, and a rerun with a changed hardpoint;
* a Python workbench (``sweep.workbench.Workbench``, one process): its first job
  (the program from the disk caches the runs above filled), then jobs with
  a changed wheel load, a changed hardpoint, and the K&C job with a changed
  hardpoint after its first; each the wall clock of one ``Workbench.run``
  call (the process's start-up and imports are paid once, before them).

Writes benchmarks/results/reruns.json (median, min, max of each case, the
machine, the commit) and rewrites the table between the
``<!-- bench:reruns:... -->`` markers of docs/performance.md and
BENCHMARKS.md (benchmarks/tables.py, block ``reruns``; checked against the
JSON by tests/test_recorded_figures.py).
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from suite_costs import machine_line  # noqa: E402
RESULTS = os.path.join(ROOT, "benchmarks", "results", "reruns.json")
BEGIN, END = "<!-- bench:reruns:begin -->", "<!-- bench:reruns:end -->"
Q = (-0.1370, 0.6900, -0.0880)       # the double wishbone's outer tie-rod point


def step_time(t):
    return (f"loadcase.changes=[{{time: {t}, duration: 0.0, left: {{fx: -2500.0}}, "
            f"right: {{fx: -2500.0}}}}]")


CHANGES = {
    "wheel load": lambda i: [f"loadcase.wheel_loads.left.fz={4600.0 + 37.0 * i}",
                             f"loadcase.wheel_loads.right.fz={4600.0 + 37.0 * i}"],
    "bushing rate": lambda i: [f"model.bushing_types.upper_arm_bushing.stiffness="
                               f"[{2.0e6 + 1.0e4 * (i + 1)},2.0e+6,4.0e+5,500.0,500.0,20.0]"],
    "hardpoint": lambda i: [f"model.hardpoints.Q=[{Q[0]},{Q[1]},{Q[2] + 0.001 * (i + 1)}]"],
    "load-step time": lambda i: [step_time(round(4.9 - 0.1 * i, 3))],
}
LABELS = {
    "first": "first run, empty caches",
    "background build": "background build of the generated C after the first run (low priority)",
    "nothing": "rerun, nothing to do",
    "new output": "rerun into a new output path",
    **{f"changed {k}": f"rerun, changed {k}" for k in CHANGES},
    "kc first": "K&C wheel travel: first run, empty caches",
    "kc changed hardpoint": "K&C wheel travel: rerun, changed hardpoint",
    "workbench first": "workbench: first job (program from the disk cache)",
    "workbench changed wheel load": "workbench: changed wheel load",
    "workbench changed hardpoint": "workbench: changed hardpoint",
    "workbench kc changed hardpoint": "workbench: K&C wheel travel, changed hardpoint",
}

WORKBENCH = """
import json, sys, time
from sweep.workbench import Workbench
jobs = json.loads(sys.argv[1])
s = Workbench()
times = []
for args in jobs:
    t = time.perf_counter()
    s.run(*args)
    times.append(time.perf_counter() - t)
print("TIMES " + json.dumps(times))
"""


def _user_env():
    """The environment of a user's shell: without the tests' pin of auto to XLA."""
    return {k: v for k, v in os.environ.items() if k != "AXLE_AUTO_BACKEND"}


def workbench(jobs, cache):
    """Wall clock of each ``Workbench.run(*args)`` of ``jobs``, in one process."""
    env = {**_user_env(), "AXLE_JAX_CACHE_DIR": cache}
    p = subprocess.run([sys.executable, "-c", WORKBENCH, json.dumps(jobs)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=1200)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("TIMES ")]
    if p.returncode != 0 or not lines:
        raise SystemExit(f"workbench failed:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    if (p.stdout + p.stderr).count("kept in memory") < len(jobs) - 2:
        raise SystemExit(f"workbench: the programs were not kept:\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
    return json.loads(lines[-1][len("TIMES "):])


def run(args, cache, out):
    env = {**_user_env(), "AXLE_JAX_CACHE_DIR": cache}
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "sweep", *args, f"output.path={out}", "sweep.progress=false",
                        f"hydra.run.dir={os.path.dirname(out)}/hydra"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{args} failed:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return wall, p.stdout + p.stderr


def wait_for_background_build(cache, timeout=900):
    """Wait until the background build (sweep.prebuild) in the generated
    code's cache beside ``cache`` has written its last line; returns the
    time it ended."""
    log = os.path.join(os.path.dirname(cache), "generated", "prebuild.log")
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if os.path.exists(log) and "prebuild " in open(log).read():
            return time.perf_counter()
        time.sleep(0.2)
    raise SystemExit("the background build did not end")


def measure(repeat):
    work = tempfile.mkdtemp(prefix="reruns-")
    cache = os.path.join(work, "cache")
    times = {k: [] for k in LABELS}
    notes = {}
    try:
        n = [0]

        def out():
            n[0] += 1
            return os.path.join(work, f"o{n[0]}", "c.zarr")
        first = out()
        t0 = time.perf_counter()
        w, log = run([], cache, first)
        times["first"].append(w)
        notes["first"] = [ln for ln in log.splitlines() if "integrator.backend" in ln or "compiled in" in ln]
        if "in the background" in log:
            times["background build"].append(wait_for_background_build(cache) - t0 - w)
        for i in range(repeat):
            times["nothing"].append(run([], cache, first)[0])
            w, log = run([], cache, out())
            times["new output"].append(w)
            notes.setdefault("rerun", [ln for ln in log.splitlines() if "integrator.backend" in ln
                                       or "compiled in" in ln])
            for name, change in CHANGES.items():
                w, log = run(change(i), cache, out())
                if "reused" not in log:
                    raise SystemExit(f"changed {name}: the program was not reused:\n{log[-3000:]}")
                times[f"changed {name}"].append(w)
        kc = ["loadcase=kc_wheel_travel"]
        times["kc first"].append(run(kc, cache, out())[0])
        for i in range(repeat):
            w, log = run(kc + CHANGES["hardpoint"](i), cache, out())
            if "reused" not in log:
                raise SystemExit(f"K&C changed hardpoint: the program was not reused:\n{log[-3000:]}")
            times["kc changed hardpoint"].append(w)
        quiet = ["sweep.progress=false"]
        for i in range(repeat):
            jobs = [[*quiet, f"output.path={out()}"],
                    [*quiet, *CHANGES["wheel load"](5 + i), f"output.path={out()}"],
                    [*quiet, *CHANGES["hardpoint"](5 + i), f"output.path={out()}"],
                    [*quiet, *kc, f"output.path={out()}"],
                    [*quiet, *kc, *CHANGES["hardpoint"](8 + i), f"output.path={out()}"]]
            t = workbench(jobs, cache)
            times["workbench first"].append(t[0])
            times["workbench changed wheel load"].append(t[1])
            times["workbench changed hardpoint"].append(t[2])
            times["workbench kc changed hardpoint"].append(t[4])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return times, notes


def commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        return "?"


def table(result):
    """The markdown table of a results JSON (what docs/performance.md and
    BENCHMARKS.md show; benchmarks/tables.py renders it)."""
    rows = ["| case | median [s] | min - max [s] | runs |", "|---|---|---|---|"]
    for key, label in LABELS.items():
        ts = result["cases"].get(key)
        if ts:
            rows.append(f"| {label} | {statistics.median(ts):.1f} | {min(ts):.1f} - {max(ts):.1f} | {len(ts)} |")
    rows.append("")
    rows.append(f"(python benchmarks/reruns.py, {result['date']}, {result['machine']}, commit "
                f"{result['commit']}; wall clock of whole `python -m sweep` processes, of one "
                f"`Workbench.run` call in the workbench rows)")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    times, notes = measure(a.repeat)
    result = {"date": datetime.date.today().isoformat(), "machine": machine_line(), "commit": commit(),
              "cases": times, "notes": notes}
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        json.dump(result, f, indent=1)
    print(table(result))
    from tables import write as write_doc_tables   # benchmarks/tables.py
    for doc in write_doc_tables(["reruns"]):
        print(f"rewritten: {doc}")


if __name__ == "__main__":
    main()
