"""Measured figures in the documents come from recorded benchmark results:
each generated block between ``<!-- bench:NAME:begin/end -->`` markers
(docs/performance.md, docs/validation.md, BENCHMARKS.md) equals what
benchmarks/tables.py renders from its results JSON under
benchmarks/results/ (a figure copied by hand, or a JSON re-measured without
the documents regenerated, fails here), and the README quotes no measured
figure at all.
"""
import importlib.util
import json
import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def bench_module(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod          # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


tables = bench_module("tables")
BLOCK_DOCS = [(name, doc) for name, b in tables.BLOCKS.items() for doc in b.docs]


@pytest.mark.parametrize("name,doc", BLOCK_DOCS, ids=[f"{n}-{d}" for n, d in BLOCK_DOCS])
def test_generated_block_is_the_recorded_one(name, doc):
    have = tables.block_of((ROOT / doc).read_text(), name)
    assert have is not None, f"{doc}: no block {tables.markers(name)[0]}"
    assert have == tables.render(name), (
        f"{doc}: block {name!r} differs from benchmarks/results/{', '.join(tables.BLOCKS[name].sources)}; "
        "run python benchmarks/tables.py")


def test_every_block_in_the_documents_is_generated():
    """A block whose markers sit in a user document but that no script
    renders would look generated and go stale."""
    known = {(n, d) for n, d in BLOCK_DOCS}
    found = set()
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for name in re.findall(r"<!-- bench:([\w-]+):begin -->", doc.read_text()):
            found.add((name, str(doc.relative_to(ROOT))))
    assert found <= known, f"blocks no script renders: {sorted(found - known)}"


def test_the_check_fails_on_a_changed_figure():
    """The comparison sees one changed digit (the test above can fail)."""
    name, doc = "reruns", "docs/performance.md"
    text = (ROOT / doc).read_text()
    body = tables.block_of(text, name)
    i = next(k for k, c in enumerate(body) if c.isdigit() and k > body.index("|---|"))
    altered = tables.splice(text, name, body[:i] + str((int(body[i]) + 1) % 10) + body[i + 1:])
    assert tables.check([name], reader=lambda p: altered if p == doc else tables.read(p))
    assert not tables.check([name])


def test_rerun_cases_are_the_labelled_ones():
    with open(ROOT / "benchmarks" / "results" / "reruns.json") as f:
        result = json.load(f)
    assert set(result["cases"]) == set(bench_module("reruns").LABELS)


# a measured quantity: a number with a unit or a factor (1.9 GiB, 37 min, 16.9x, 42,761 variant-steps/s)
MEASURED = re.compile(r"\b\d[\d,.]*\s*(?:%|x\b|s\b|ms\b|min\b|h\b|GiB\b|GB\b|MB\b|Hz\b|mm\b|kN\b|N\b|"
                      r"variant-steps|variants?/s|steps/s|deg\b)")


def test_readme_quotes_no_measured_figure():
    """The README quotes no figure that could go stale: measurements live on
    the documentation pages, generated from benchmarks/results/. Code (commands,
    paths) is not prose."""
    text = (ROOT / "README.md").read_text()
    assert "<!-- bench:" not in text
    prose = "\n".join(line for line in text.splitlines() if not line.startswith("    "))
    prose = re.sub(r"`[^`]*`", "", prose)
    assert not MEASURED.findall(prose), f"README quotes measured figures: {MEASURED.findall(prose)}"
