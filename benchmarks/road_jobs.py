"""The road load cases on every shipped axle, as a user runs them: whole
``python -m sweep`` processes, wall clock from start to exit, each from an
empty JAX cache of its own (a first run).

    .venv/bin/python benchmarks/road_jobs.py               # ~15 min on 2 cores
    .venv/bin/python benchmarks/road_jobs.py --axles toy_trailing_arm

Per axle:

* ``loadcase=rough_road`` - one variant (the default road: ISO 8608 class
  C at 20 m/s, 8 s);
* the same as a 16-variant Latin hypercube of every bushing's rates
  (x 0.7-1.4, log; the tyres are not swept);
* ``loadcase=frf`` with a tyre and the road inputs of both wheels plus the
  left wheel's vertical force (100 frequencies, 0.5-100 Hz), one variant.

Each at 5 kN per wheel, the twist beam at its design load of 3.1 kN.

Writes benchmarks/results/road_jobs.json (wall clock, the job's compile and
run times, its status counts, the machine, the commit) and rewrites the
table between the ``<!-- bench:road_jobs:... -->`` markers of
docs/load_cases.md (benchmarks/tables.py, block ``road_jobs``).
"""
import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from reruns import commit  # noqa: E402
from suite_costs import machine_line  # noqa: E402
RESULTS = os.path.join(ROOT, "benchmarks", "results", "road_jobs.json")
AXLES = ("double_wishbone", "macpherson", "multilink", "twist_beam", "leaf_spring_axle", "toy_trailing_arm")
LHS = ["sweep=lhs", "sweep.n_variants=16", "sweep.start=null", "sweep.every=null", "~sweep.parameters",
       "+sweep.parameters.bushing_rates={target: bushing.stiffness, elements: '*', bounds: [0.7, 1.4], "
       "scale: log}"]
# an axle's own design wheel loads where they are not the load cases' 5 kN (docs/axles.md)
AXLE_ARGS = {"twist_beam": ["loadcase.wheel_loads.left.fz=3100", "loadcase.wheel_loads.right.fz=3100"]}
CASES = {
    "rough road, 1 variant": ["loadcase=rough_road"],
    "rough road, lhs 16": ["loadcase=rough_road", *LHS],
    "FRF with road inputs, 1 variant": ["loadcase=frf", "+loadcase.tyre={rate: 250000.0, damping: 100.0}",
                                        "loadcase.inputs=[left_fz, left_road, right_road]"],
}


def run(args, work, name):
    out = os.path.join(work, name, "c.zarr")
    env = {**os.environ, "AXLE_JAX_CACHE_DIR": os.path.join(work, name, "cache")}
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "sweep", *args, f"output.path={out}", "sweep.progress=false",
                        f"hydra.run.dir={os.path.dirname(out)}/hydra"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t
    log = p.stdout + p.stderr
    if p.returncode != 0:
        raise SystemExit(f"{args} failed:\n{log[-3000:]}")
    m = re.search(r"wall time: compile ([\d.]+) s, run ([\d.]+) s", log)
    st = re.search(r"status: (.*)", log)
    backend = "generated" if "generated C" in log else "XLA"
    return {"wall_s": round(wall, 2), "compile_s": float(m.group(1)) if m else None,
            "run_s": float(m.group(2)) if m else None, "status": st.group(1).strip() if st else "?",
            "backend": backend}


def table(result):
    """The markdown table of a results JSON (docs/load_cases.md; benchmarks/tables.py renders it)."""
    rows = ["| axle | job | backend | wall [s] | compile [s] | run [s] | status |", "|---|---|---|---|---|---|---|"]
    for axle, cases in result["axles"].items():
        for case, r in cases.items():
            rows.append(f"| {axle.replace('_', ' ')} | {case} | {r['backend']} | {r['wall_s']:.1f} | "
                        f"{r['compile_s']:.1f} | {r['run_s']:.2f} | {r['status']} |")
    rows.append("")
    rows.append(f"(python benchmarks/road_jobs.py, {result['date']}, {result['machine']}, commit "
                f"{result['commit']}; wall clock of whole `python -m sweep` processes from an empty JAX "
                "cache, the backend as `integrator.backend=auto` chose it; the rough road: ISO 8608 class C, 20 m/s, 8 s at h = 1 ms, every step written)")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--axles", nargs="*", default=list(AXLES))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="road-jobs-")
    res = {}
    try:
        for axle in a.axles:
            res[axle] = {}
            for i, (case, args) in enumerate(CASES.items()):
                res[axle][case] = run([f"model={axle}", *args, *AXLE_ARGS.get(axle, [])], work, f"{axle}-{i}")
                print(axle, case, res[axle][case], flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {"date": datetime.date.today().isoformat(), "machine": machine_line(), "commit": commit(),
              "axles": res}
    with open(RESULTS, "w") as f:
        json.dump(result, f, indent=1)
    print(table(result))
    from tables import write as write_doc_tables   # benchmarks/tables.py
    for doc in write_doc_tables(["road_jobs"]):
        print(f"rewritten: {doc}")


if __name__ == "__main__":
    main()
