"""The import contract (``.importlinter``): layers, pure kernels, no circles.

Runs import-linter on the source tree of this checkout. A circle or an
upward import (e.g. the engine importing an entry point) fails here with
import-linter's report naming the import and its line.
"""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root


def _lint(config):
    pytest.importorskip("importlinter")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = ("import sys; from importlinter.cli import lint_imports; "
            f"sys.exit(lint_imports(config_filename={config!r}, no_cache=True))")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)


def test_import_contract_holds():
    out = _lint(os.path.join(ROOT, ".importlinter"))
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_contract_catches_a_circle(tmp_path):
    """The same contract on a copy of the package with the engine importing
    the command-line entry point (the circle the layering removed) fails."""
    import shutil
    for pkg in ("kernels", "sweep"):
        shutil.copytree(os.path.join(ROOT, pkg), tmp_path / pkg,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(ROOT, ".importlinter"), tmp_path / ".importlinter")
    mapping = tmp_path / "sweep" / "engine" / "mapping.py"
    mapping.write_text(mapping.read_text() + "\n\ndef _cli():\n    from sweep.entry import sweep_cli\n    return sweep_cli\n")
    pytest.importorskip("importlinter")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    code = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename='.importlinter', no_cache=True))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode != 0
    assert "sweep.engine.mapping -> sweep.entry" in out.stdout


def _modules(package):
    for dirpath, _, files in os.walk(os.path.join(ROOT, package)):
        for f in files:
            if f.endswith(".py"):
                yield os.path.join(dirpath, f)


def _names(package):
    """Module basenames (``__init__`` / ``__main__`` aside) and subpackage names."""
    names = {os.path.basename(f)[:-3] for f in _modules(package)} - {"__init__", "__main__"}
    for dirpath, dirnames, _ in os.walk(os.path.join(ROOT, package)):
        names |= {d for d in dirnames if os.path.exists(os.path.join(dirpath, d, "__init__.py"))}
    return names


def test_no_module_name_is_shared_between_kernels_and_sweep():
    """A module's name says which room it is in: no module or package name
    (``__init__`` / ``__main__`` aside) in both ``kernels/`` and ``sweep/``."""
    names = {p: _names(p) for p in ("kernels", "sweep")}
    assert {"forces", "statics"} <= names["kernels"] and {"axle", "builder", "results"} <= names["sweep"]
    assert not names["kernels"] & names["sweep"], sorted(names["kernels"] & names["sweep"])


# the commands and the Python workbench: everything else lives in a package
TOP_LEVEL = {"__init__", "__main__", "app", "entry", "workbench", "verify", "align", "sensitivity", "prebuild"}


def test_the_top_level_of_sweep_holds_only_commands():
    """``sweep/`` keeps its commands at the top; a service module belongs in
    the package of its layer (``core``, ``axle``, ``results``, ``study``,
    ``engine``, ``codegen``, ``kinds``, ``tune``)."""
    top = {f[:-3] for f in os.listdir(os.path.join(ROOT, "sweep")) if f.endswith(".py")}
    assert top == TOP_LEVEL, sorted(top ^ TOP_LEVEL)


def test_the_time_loop_is_run_only_by_the_kernels():
    """No module of ``sweep/`` calls a method's time loop (``.simulate(...)``)
    itself: the job kinds, tuning and the generated backend all run the one
    time-response driver, ``kernels.response``."""
    import ast
    calls = []
    for path in _modules("sweep"):
        for node in ast.walk(ast.parse(open(path).read(), path)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "simulate":
                calls.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}")
    assert not calls, calls
    assert any("simulate(" in open(p).read() for p in _modules("kernels"))
