"""User documents stand on their own: a user's clone has no ``../shared``.

README, docs, configs, notebooks and the packages' docstrings may not point
into the project-internal reference folder; the method reference and the
published data sets the axles cite are copied under ``docs/``. Relative links
in README and docs must resolve inside the clone, and the documentation site
builds with ``mkdocs build --strict`` (a broken link or anchor, a page
missing from the navigation: any warning fails). README, the pages and the
changelog the site includes are written for a user: no issue numbers, no
diary of the work sessions that produced them (BENCHMARKS.md, the dated
log of measurements, is exempt). The console scripts the documents name
answer ``--help``.
"""
import os
import pathlib
import re
import subprocess
import sys
import sysconfig

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
USER_FILES = (["README.md"] + sorted(str(p.relative_to(ROOT)) for d in ("docs", "configs", "notebooks", "kernels", "sweep")
                                     for p in (ROOT / d).rglob("*") if p.suffix in (".md", ".yaml", ".ipynb", ".py")))
FORBIDDEN = re.compile(r"shared/(reference|tools|seeds)|\.\./shared")


def test_no_user_document_points_into_shared():
    hits = []
    for rel in USER_FILES:
        for no, line in enumerate((ROOT / rel).read_text(errors="replace").splitlines(), 1):
            if FORBIDDEN.search(line):
                hits.append(f"{rel}:{no}: {line.strip()[:100]}")
    assert not hits, "user documents point into ../shared:\n" + "\n".join(hits)


def test_relative_links_in_readme_and_docs_resolve():
    broken = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert not broken, "broken relative links:\n" + "\n".join(broken)


def test_the_cited_references_are_in_the_clone():
    assert (ROOT / "docs" / "method.md").read_text().startswith("# Method reference")
    assert "hardpoints_left" in (ROOT / "docs" / "sources" / "double_wishbone_published_data.yaml").read_text()


# README, every page of the site and the changelog it includes
READER_DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "mkdocs.yml",
               *sorted((ROOT / "docs").rglob("*.md"))]
WORK_TALK = {
    "an issue number": re.compile(r"\bissues?[\s-]*#?\d+", re.I),
    "a ticket reference (#NN)": re.compile(r"(?<![\w&/])#\d+\b"),
    "session talk": re.compile(r"\bsessions?\b", re.I),
    "a pointer into ../shared": re.compile(r"\.\./shared"),
}


def test_no_issue_numbers_or_session_talk_in_user_documents():
    hits = []
    for doc in READER_DOCS:
        for no, line in enumerate(doc.read_text(errors="replace").splitlines(), 1):
            if doc.name == "CHANGELOG.md" and line.startswith("#"):
                continue                     # dated headings
            for what, pattern in WORK_TALK.items():
                if pattern.search(line):
                    hits.append(f"{doc.relative_to(ROOT)}:{no}: {what}: {line.strip()[:100]}")
    assert not hits, "written for the project's work, not for a user:\n" + "\n".join(hits)


def test_the_documentation_site_builds_strictly(tmp_path):
    """``mkdocs build --strict`` (as .ci/run runs it): a warning - a link to a
    page or anchor that does not exist, a page left out of the navigation -
    fails the build. Not ``--quiet``: it drops the warnings before strict
    mode counts them, and the build passes."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert (tmp_path / "site" / "index.html").exists()


def _scripts_dir():
    return pathlib.Path(sysconfig.get_path("scripts"))


@pytest.mark.parametrize("script", ["axle-sweep", "axle-tune", "axle-verify", "axle-align"])
def test_console_scripts_answer_help(script):
    """The console scripts of pyproject's [project.scripts] (installed by
    ``pip install -e .``) print their help and exit 0 (each imports its app
    but builds nothing: about a second)."""
    import importlib.metadata
    try:
        importlib.metadata.distribution("axle-sweep")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("axle-sweep is not installed in this environment (pip install -e .)")
    exe = _scripts_dir() / script
    assert exe.exists(), f"{script}: not installed beside {sys.executable} (pip install -e . again)"
    proc = subprocess.run([str(exe), "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{script} --help: exit {proc.returncode}\n{proc.stderr[-2000:]}"
    assert proc.stdout.strip(), f"{script} --help printed nothing"


def test_console_scripts_are_the_documented_ones():
    import tomllib
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == {"axle-sweep", "axle-tune", "axle-verify", "axle-align"}
