"""Every generated block of the documents, from the results files under
benchmarks/results/.

    .venv/bin/python benchmarks/tables.py           # rewrite every block
    .venv/bin/python benchmarks/tables.py --check   # exit 1 naming each block that differs

A block is the text between ``<!-- bench:NAME:begin -->`` and
``<!-- bench:NAME:end -->`` in a document; :data:`BLOCKS` says, for each
NAME, which results file it is rendered from and which documents hold it.
A benchmark that writes a results file rewrites its blocks itself
(``benchmarks/run.py``: figures, ``benchmarks/reruns.py``: reruns); after
any other re-measurement (``generated_backend.py``, ``xla_flags.py``,
``work_precision.py``) run this script. ``tests/test_recorded_figures.py``
fails while a block differs from what this script renders, so a figure
copied by hand, or a results file re-measured without the documents
regenerated, does not go unnoticed.

Only the standard library and the renderers of the benchmarks' own modules
(no JAX): the check runs in the fast test tier.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from typing import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

AXLE_NAMES = {"double_wishbone": "double wishbone", "multilink": "multi-link"}
METHODS = ("lsrt2", "ros34pw2", "linear_implicit_euler")
# LSRT2's NMSE published for the authors' own axles (Archut & Corves 2023;
# docs/method.md, section 3): displacement, force for the double wishbone,
# then the multi-link
PUBLISHED_NMSE = ("0.00243", "0.00751", "0.01286", "0.01545")


def markers(name):
    return f"<!-- bench:{name}:begin -->", f"<!-- bench:{name}:end -->"


def load(fname):
    with open(os.path.join(RESULTS, fname)) as f:
        return json.load(f)


def machine_words(m):
    """'AMD EPYC, 2 cores' of a results file's machine entry (a dict or a line)."""
    if isinstance(m, dict):
        return f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores"
    return str(m)


# ------------------------------------------------------------------ renderers
def suite_figures(res):
    """The headline figures of the benchmark suite (benchmarks/run.py, suite.json)."""
    models = ("double_wishbone", "multilink")
    A = res["axles"]
    L = ["| figure | double wishbone | multi-link |", "|---|---|---|"]

    def get(name, f):
        return f(A[name]) if name in A else "-"
    L.append("| single-variant real-time factor (block) | " + " | ".join(
        get(n, lambda a: f"{next(s for s in a['single'] if s['solver'] == 'block')['real_time_factor']:.3f}")
        for n in models) + " |")
    for B in sorted({t["batch"] for a in A.values() for t in a["throughput"]}):
        L.append(f"| variant-steps/s, batch {B} (block) | " + " | ".join(
            get(n, lambda a: f"{next((t['variant_steps_per_s'] for t in a['throughput'] if t['solver'] == 'block' and t['batch'] == B), float('nan')):.0f}")
            for n in models) + " |")
    for B in sorted({t["batch"] for a in A.values() for t in a.get("throughput_engine", [])}):
        L.append(f"| variant-steps/s, batch {B} (as a default job maps it) | " + " | ".join(
            get(n, lambda a: f"{next((t['variant_steps_per_s'] for t in a.get('throughput_engine', []) if t['batch'] == B), float('nan')):.0f}")
            for n in models) + " |")
    L.append("")
    L.append(f"({res['command']}, {res['date']}; {machine_words(res['machine'])}; details in BENCHMARKS.md)")
    return "\n".join(L)


def reruns_table(res):
    """Start-up and reruns of a job (benchmarks/reruns.py, reruns.json)."""
    import reruns
    return reruns.table(res)


def road_jobs_table(res):
    """The road load cases on every shipped axle (benchmarks/road_jobs.py, road_jobs.json)."""
    import road_jobs
    return road_jobs.table(res)


def generated_backend(results):
    """The generated backend against XLA, integration alone
    (benchmarks/generated_backend.py, generated_backend_<axle>.json)."""
    L = ["| axle | variants x steps | generated [variant-steps/s] | XLA [variant-steps/s] | speed-up | "
         "largest relative difference | generated statements |", "|---|---|---|---|---|---|---|"]
    for r in results:
        diff = max(r["max_rel_difference"].values())
        L.append(f"| {AXLE_NAMES.get(r['axle'], r['axle'])} | {r['n']} x {r['steps']} | "
                 f"{r['generated_variant_steps_per_s']:,.0f} | {r['xla_variant_steps_per_s']:,.0f} | "
                 f"{r['generated_variant_steps_per_s'] / r['xla_variant_steps_per_s']:.1f}x | {diff:.1e} | "
                 f"{r['statements']:,} |")
    L.append("")
    L.append("(python benchmarks/generated_backend.py --axle AXLE; LSRT2, h = 1 ms, every step an output "
             "sample, from the variants' static equilibria; integration only, each after a warm-up run"
             + ("; the generated code reads the values at run time" if all(r.get("values") for r in results)
                else "") + f"; machine: {', '.join(sorted({str(r['machine']) for r in results}))})")
    return "\n".join(L)


def xla_flags(res):
    """XLA:CPU options against the default (benchmarks/xla_flags.py, xla_flags.json)."""
    rows = res["rows"]
    base = next(r for r in rows if r["setting"] == "default")["variant_steps_per_s"]
    L = ["| setting | XLA_FLAGS | compile | variant-steps/s | vs default |", "|---|---|---|---|---|"]
    for r in rows:
        flags = f"`{r['xla_flags']}`" if r["xla_flags"] else "(none)"
        L.append(f"| {r['setting']} | {flags} | {r['compile_s']:.1f} s | "
                 f"{r['variant_steps_per_s']:.0f} | {r['variant_steps_per_s'] / base:.2f}x |")
    L.append("")
    L.append(f"({res['command'].strip()}; batch {res['batch']}, {res['steps']} steps, one JAX device; "
             f"{machine_words(res['machine'])})")
    return "\n".join(L)


def _nmse_rows(res, h_ms=1.0, relinearise_every=1):
    rows = {}
    for e in res["entries"]:
        if e["h_ms"] == h_ms and e["relinearise_every"] == relinearise_every:
            rows[(e["axle"], e["method"])] = e
    return rows


def _fmt(x):
    return "-" if x is None else f"{x:.1e}"


def nmse_table(res, title, published=None):
    rows = _nmse_rows(res)
    L = [f"| {title} | double wishbone: displacement | force | multi-link: displacement | force |",
         "|---|---|---|---|---|"]
    for m in METHODS:
        cells = []
        for axle in ("double_wishbone", "multilink"):
            e = rows.get((axle, m), {})
            cells += [_fmt(e.get("nmse_displacement")), _fmt(e.get("nmse_force"))]
        L.append(f"| `{m}` | " + " | ".join(cells) + " |")
    if published:
        L.append("| published (LSRT2, Archut & Corves 2023, their axles) | " + " | ".join(published) + " |")
    L.append("")
    L.append(f"(python benchmarks/work_precision.py{' --loadcase pothole --stop-law switching' if res.get('loadcase') == 'pothole' else ''}, "
             f"its rows h = 1 ms, N = 1; measured {res['date']}; {machine_words(res['machine'])})")
    return "\n".join(L)


def nmse_step(res):
    """NMSE against Radau on the longitudinal step (work_precision.json)."""
    return nmse_table(res, "NMSE, h = 1 ms", PUBLISHED_NMSE)


def nmse_pothole(res):
    """NMSE against Radau through the stops (work_precision_pothole.json)."""
    return nmse_table(res, "pothole, h = 1 ms")


def job_throughput(res):
    """The whole job's throughput on this machine (benchmarks/job_throughput.py,
    job_throughput.json)."""
    L = ["| axle | variants | run [s] | variant-steps/s | chunks computing [s] | writer thread [s] | "
         "compile [s] | peak host memory [GiB] | status |", "|---|---|---|---|---|---|---|---|---|"]
    for j in res["jobs"]:
        L.append(f"| {AXLE_NAMES.get(j['model'], j['model'])} | {j['variants']:,} | {j['run_s']:.2f} | "
                 f"{j['variant_steps_per_s']:,} | {j['compute_s']:.2f} | {j['write_s']:.2f} | "
                 f"{j['compile_s']:.1f} | {j['host_peak_gib']:.2f} | {j['status']} |")
    m = res["machine"]
    L.append("")
    L.append(f"(python benchmarks/job_throughput.py --models ... --variants ...; the longitudinal step over "
             f"{res['window_s'][0]}-{res['window_s'][1]} s, h = {res['dt'] * 1e3:g} ms, every step written; "
             f"{res['date']}, commit {res['commit']}; {m['cpu']}, {m['cores']} cores; compile from the caches "
             "of earlier runs where they had the program)")
    return "\n".join(L)


def job_throughput_gpu(res):
    """The whole job on a lent GPU (benchmarks/job_throughput.py run by
    ``DRIVER=job bash benchmarks/gpu_check.sh``, job_throughput_gpu.json)."""
    L = ["| axle | variants | steps written | run [s] | variant-steps/s | chunks computing [s] (variant-steps/s) | "
         "writer thread [s] (MB/s) | cube [GB] | compile [s] | peak device memory [GiB] | status |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
    for j in res["jobs"]:
        name = AXLE_NAMES.get(j["model"], j["model"])
        every = j.get("output_every", 1)
        written = "every" if every == 1 else f"every {every}th"
        if "error" in j:
            err = re.sub(r"(\d+\.\d+)", lambda m: f"{float(m.group(1)):.0f}", j["error"])
            L.append(f"| {name} | {j['variants']:,} | {written} | - | - | - | - | - | - | - | {err} |")
            continue
        L.append(f"| {name} | {j['variants']:,} | {written} | {j['run_s']:.2f} | **{j['variant_steps_per_s']:,}** | "
                 f"{j['compute_s']:.2f} ({j['compute_variant_steps_per_s']:,}) | {j['write_s']:.2f} "
                 f"({j['write_mb_per_s']:.0f}) | {j['cube_mb'] / 1e3:.2f} | {j['compile_s']:.1f} | "
                 f"{j['device_peak_gib']:.2f} | {j['status']} |")
    m = res["machine"]
    L.append("")
    L.append(f"(DRIVER=job bash benchmarks/gpu_check.sh; the longitudinal step over {res['window_s'][0]}-"
             f"{res['window_s'][1]} s, h = {res['dt'] * 1e3:g} ms, XLA on the GPU, chunks chosen by the job; "
             f"{res['date']}, commit {res['commit']}; {m.get('gpu') or 'no GPU recorded'}, host {m['cpu']}, "
             f"{m['cores']} cores; compile: each job's own programs on a machine started bare)")
    return "\n".join(L)


@dataclasses.dataclass(frozen=True)
class Block:
    render: Callable       # the results (one JSON, or a list of JSONs) -> markdown
    sources: tuple         # results files under benchmarks/results/
    docs: tuple            # documents (relative to the repository) that hold the block

    def results(self):
        data = [load(s) for s in self.sources]
        return data if len(data) > 1 else data[0]


BLOCKS = {
    "figures": Block(suite_figures, ("suite.json",), ("docs/performance.md",)),
    "reruns": Block(reruns_table, ("reruns.json",), ("docs/performance.md", "BENCHMARKS.md")),
    "generated_backend": Block(generated_backend, ("generated_backend_double_wishbone.json",
                                                   "generated_backend_multilink.json"), ("docs/performance.md",)),
    "xla_flags": Block(xla_flags, ("xla_flags.json",), ("docs/performance.md",)),
    "nmse_step": Block(nmse_step, ("work_precision.json",), ("docs/validation.md",)),
    "nmse_pothole": Block(nmse_pothole, ("work_precision_pothole.json",), ("docs/validation.md",)),
    "road_jobs": Block(road_jobs_table, ("road_jobs.json",), ("docs/load_cases.md",)),
    "job_throughput": Block(job_throughput, ("job_throughput.json",), ("docs/performance.md",)),
    "job_throughput_gpu": Block(job_throughput_gpu, ("job_throughput_gpu.json",),
                                ("docs/performance.md", "BENCHMARKS.md")),
}


def render(name, results=None):
    """The block's text, from ``results`` or its results files."""
    b = BLOCKS[name]
    return b.render(b.results() if results is None else results).strip()


def read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def block_of(text, name):
    """The stripped text of block ``name`` in a document's text, None without its markers."""
    a, b = markers(name)
    if a not in text or b not in text:
        return None
    return text[text.index(a) + len(a):text.index(b)].strip()


def splice(text, name, body):
    a, b = markers(name)
    i, j = text.index(a) + len(a), text.index(b)
    return text[:i] + "\n" + body + "\n" + text[j:]


def check(names=None, reader=read):
    """One line per block that is missing from a document or differs from
    its rendering (``reader(path) -> text``)."""
    problems = []
    for name in names or BLOCKS:
        body = render(name)
        for doc in BLOCKS[name].docs:
            have = block_of(reader(doc), name)
            if have is None:
                problems.append(f"{doc}: no block {markers(name)[0]}")
            elif have != body:
                problems.append(f"{doc}: block {name!r} differs from benchmarks/results/"
                                f"{', '.join(BLOCKS[name].sources)} (run python benchmarks/tables.py)")
    return problems


def write(names=None):
    """Rewrite the blocks (all, or ``names``) in their documents; the
    documents changed."""
    changed = []
    for name in names or BLOCKS:
        body = render(name)
        for doc in BLOCKS[name].docs:
            text = read(doc)
            if block_of(text, name) is None:
                raise RuntimeError(f"{doc} has no {' ... '.join(markers(name))} markers")
            new = splice(text, name, body)
            if new != text:
                with open(os.path.join(ROOT, doc), "w") as f:
                    f.write(new)
                if doc not in changed:
                    changed.append(doc)
    return changed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a block differs")
    ap.add_argument("names", nargs="*", help=f"blocks (default: all of {', '.join(BLOCKS)})")
    a = ap.parse_args(argv)
    if a.check:
        problems = check(a.names)
        for p in problems:
            print(p)
        return 1 if problems else 0
    for doc in write(a.names):
        print(f"rewritten: {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
