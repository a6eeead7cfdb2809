"""User documents stand on their own: a user's clone has no ``../shared``.

README, docs, configs, notebooks and the packages' docstrings may not point
into the project-internal reference folder; the method reference and the
published data sets the axles cite are copied under ``docs/``. Relative links
in README and docs must resolve inside the clone.
"""
import pathlib
import re

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
