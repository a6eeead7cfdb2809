"""docs/model_file.md, the reference of the model file, agrees with the code.

A reference that drifts from the code is worse than none: an engineer
trusts it, writes a key that no longer exists (the strict reader refuses
it) or never learns of one that does. So:

* every key path of ``sweep.axle.builder.model_keys()`` (the keys the
  strict reader accepts) is written in the page as an inline code span,
  dotted from the file's root, ``<...>`` for a user-named entry
  (``per_side.bushings.<name>.adjust.distance``,
  ``bushing_types.<name>.stiffness_curves.<direction>``). ``shared`` has
  the keys of ``per_side``: its sections must be named, the keys inside
  them may be documented once under ``per_side``. Point, axis and curve
  specs are documented once as ``<point>.along``, ``<axis>.along``,
  ``<curve>.x``, ... (the key holding one must still be named). Flexible
  bodies are documented in docs/flexible_bodies.md: the sections must be
  named and linked, their sub-keys are not checked here. Sections of
  registered (not built-in) element groups are the group's own.
* the reverse: the top-level table lists exactly the real top-level keys,
  and every dotted key path the page writes resolves to a real key (no
  documented key that the reader would refuse);
* the page's minimal model builds (tables and model pytree, no compile)
  and has the number of bodies the page states.
"""
import os
import re

import pytest
import yaml

from kernels.model import build_model
from sweep.axle import builder as mb
from tests.conftest import ROOT

DOC = os.path.join(ROOT, "docs", "model_file.md")
BUILTIN_SECTIONS = ("bodies", "flexible_bodies", "bushings", "p2p")
# specs documented once, under a generic prefix
GENERIC = {"<point>": mb.POINT, "<axis>": mb.AXIS, "<curve>": mb.CURVE}
PLACEHOLDER = r"<[a-z_]+>"
PATH_CHARS = re.compile(r"^[A-Za-z0-9_<>]+(\.[A-Za-z0-9_<>]+)+$")


@pytest.fixture(scope="module")
def doc():
    with open(DOC) as f:
        return f.read()


def code_spans(text):
    """Inline code spans of the page (fenced blocks left out)."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    return set(re.findall(r"`([^`\n]+)`", prose))


def required_paths(spec, prefix=()):
    """Key paths (tuples; ``None`` for a user-named level) of ``spec``."""
    if prefix:
        yield prefix
    if any(spec is g for g in GENERIC.values()):
        return                                    # documented once under its generic prefix
    if isinstance(spec, mb.Names):
        yield from required_paths(spec.spec, prefix + (None,))
        return
    if isinstance(spec, dict):
        for key, sub in spec.items():
            path = prefix + (key,)
            if len(prefix) == 1 and prefix[0] in ("per_side", "shared") and key not in BUILTIN_SECTIONS:
                continue                          # an added group's own section
            if len(prefix) == 1 and key == "flexible_bodies":
                yield path                        # sub-keys: docs/flexible_bodies.md
                continue
            yield from required_paths(sub, path)


def all_required():
    paths = list(required_paths(mb.model_keys()))
    for name, spec in GENERIC.items():
        paths += [(name,) + p for p in required_paths(spec)]
    return paths


def pattern(path):
    return re.compile(r"\.".join(PLACEHOLDER if p is None else re.escape(p) for p in path))


def show(path):
    return ".".join("<name>" if p is None else p for p in path)


def test_every_key_of_the_model_file_is_documented(doc):
    spans = code_spans(doc)

    def documented(path):
        return any(pattern(path).fullmatch(s) for s in spans)
    missing = []
    for path in all_required():
        alternatives = [path]
        if path[0] == "shared" and len(path) > 2:       # documented once under per_side
            alternatives.append(("per_side",) + path[1:])
        if not any(documented(p) for p in alternatives):
            missing.append(show(path))
    assert not missing, (f"{len(missing)} key path(s) of sweep.axle.builder.model_keys() are not "
                         f"documented in docs/model_file.md (as `path` spans): " + ", ".join(missing))
    assert "(flexible_bodies.md)" in doc, "docs/model_file.md does not link docs/flexible_bodies.md"


def resolves(parts):
    """A dotted path written in the page names a real key (``<...>`` or any
    name at a user-named level)."""
    spec = mb.model_keys()
    if parts[0] in GENERIC:
        spec, parts = GENERIC[parts[0]], parts[1:]
    for part in parts:
        if isinstance(spec, mb.Names):
            spec = spec.spec
        elif isinstance(spec, dict) and part in spec:
            spec = spec[part]
        else:
            return False
    return True


def test_the_page_documents_no_key_that_does_not_exist(doc):
    top = mb.model_keys()
    section = doc.split("## Top-level keys", 1)[1].split("\n## ", 1)[0]
    table = re.findall(r"^\| `([^`]+)` \|", section, flags=re.M)
    assert sorted(table) == sorted(top), (
        f"top-level table of docs/model_file.md: not keys {sorted(set(table) - set(top))}, "
        f"missing {sorted(set(top) - set(table))}")
    bad = sorted(s for s in code_spans(doc)
                 if PATH_CHARS.match(s) and (s.split(".")[0] in top or s.split(".")[0] in GENERIC)
                 and not resolves(s.split(".")))
    assert not bad, f"docs/model_file.md names key paths the model file does not have: {bad}"


def test_the_minimal_model_of_the_page_builds(doc):
    section = doc.split("## A minimal model", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```yaml\n(.*?)```", section, flags=re.S)
    assert block, "no ```yaml block after '## A minimal model' in docs/model_file.md"
    cfg = yaml.safe_load(block.group(1))
    tables = mb.build_tables(cfg, source="docs/model_file.md")
    model = build_model(tables)
    stated = re.search(r"(\d+)\s+bodies", section)
    assert stated, "the minimal model's text does not state its number of bodies"
    assert model.topology.n_bodies == int(stated.group(1))
    assert model.topology.n_dof == 6 * int(stated.group(1))
