"""Worker time of the test suite per test file, from a run's JUnit XML.

Each test's time (setup + call + teardown, pytest's ``junit_duration_report``
default) is summed per file, so that the cost of a change to the suite is
visible file by file. The machine's speed goes beside the figures: pass the
integration benchmark's variant-steps/s (``--speed``) or let the script time
a fixed NumPy workload (``--probe``) so a slow day can be told from a slow
change.

    python -m pytest --junitxml=/tmp/fast.xml                        # the fast tier
    python -m pytest -m "e2e or notebook or slow" --junitxml=/tmp/rest.xml
    python benchmarks/suite_costs.py /tmp/fast.xml /tmp/rest.xml --probe
    python benchmarks/suite_costs.py /tmp/a.xml --against /tmp/b.xml  # per-file change
"""
from __future__ import annotations

import argparse
import collections
import os
import platform
import sys
import time
import xml.etree.ElementTree as ET



def machine_line():
    """'<CPU model name>, <n> cores' of this machine."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores"

def file_of(case):
    """The test file of a JUnit <testcase> (its classname is the dotted module path)."""
    f = case.get("file")
    if f:
        return f
    cls = case.get("classname", "")
    parts = cls.split(".")
    # drop a trailing class name (Test...) where there is one
    while parts and parts[-1][:1].isupper():
        parts.pop()
    return "/".join(parts) + ".py"


def costs(paths):
    """{file: [seconds, tests, failures]} summed over the XML files."""
    out = collections.defaultdict(lambda: [0.0, 0, 0])
    for path in paths:
        for case in ET.parse(path).getroot().iter("testcase"):
            row = out[file_of(case)]
            row[0] += float(case.get("time", 0.0))
            row[1] += 1
            row[2] += any(c.tag in ("failure", "error") for c in case)
    return dict(out)


def probe_seconds(repeat=5):
    """A fixed, single-threaded NumPy workload (LU of 300 x 300, 200 times):
    the best of ``repeat`` runs in seconds, lower is faster."""
    import numpy as np
    import scipy.linalg
    a = np.random.default_rng(0).normal(size=(300, 300))
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(200):
            scipy.linalg.lu_factor(a)
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("xml", nargs="+", help="JUnit XML files of one run (fast tier, rest, ...)")
    ap.add_argument("--against", nargs="+", help="JUnit XML files of an earlier run: print the change per file")
    ap.add_argument("--speed", help="the machine's speed to print beside the figures (e.g. '37,666 variant-steps/s')")
    ap.add_argument("--probe", action="store_true", help="time a fixed NumPy workload as the machine's speed")
    ap.add_argument("--top", type=int, default=0, help="only the N most expensive files")
    args = ap.parse_args(argv)

    now = costs(args.xml)
    before = costs(args.against) if args.against else None
    print(f"machine: {machine_line()}")
    if args.speed:
        print(f"speed: {args.speed}")
    if args.probe:
        print(f"speed probe: {probe_seconds():.3f} s (NumPy LU 300x300 x 200, best of 5; lower is faster)")
    total = sum(r[0] for r in now.values())
    print(f"{'worker s':>9} {'share':>6} {'tests':>5}" + (f" {'before':>8} {'change':>8}" if before else "") + "  file")
    rows = sorted(now.items(), key=lambda kv: -kv[1][0])
    if args.top:
        rows = rows[:args.top]
    for f, (sec, n, bad) in rows:
        line = f"{sec:9.1f} {100 * sec / total:5.1f}% {n:5d}"
        if before is not None:
            b = before.get(f, [0.0])[0]
            line += f" {b:8.1f} {sec - b:+8.1f}"
        print(line + f"  {f}" + (f"  ({bad} failed)" if bad else ""))
    if before is not None:
        gone = sorted(set(before) - set(now))
        for f in gone:
            print(f"{0.0:9.1f} {'':>6} {'':>5} {before[f][0]:8.1f} {-before[f][0]:+8.1f}  {f} (gone)")
    n_tests = sum(r[1] for r in now.values())
    print(f"{total:9.1f} s of worker time in {n_tests} tests, {len(now)} files"
          + (f" (before: {sum(r[0] for r in before.values()):.1f} s)" if before else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
