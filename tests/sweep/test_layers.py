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
