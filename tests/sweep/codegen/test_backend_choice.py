"""Which backend a time-response job integrates on (sweep.codegen.runner.resolve):
integrator.backend defaults to auto, and auto means the generated C on a
CPU with a C compiler for a job long enough to pay for its build, XLA
otherwise - with one line saying why where the compiler is missing or the
job is short."""
import logging
import os

import pytest
import yaml

from sweep.codegen import build
from sweep.codegen import runner as generated
from sweep.schema import ConfigError
from tests.conftest import ROOT


@pytest.mark.parametrize("method", ["lsrt2", "ros34pw2", "linear_implicit_euler"])
def test_auto_is_the_default_of_every_fixed_step_method(method):
    with open(os.path.join(ROOT, "configs", "integrator", f"{method}.yaml")) as f:
        assert yaml.safe_load(f)["backend"] == "auto"


@pytest.fixture
def unpinned(monkeypatch):
    monkeypatch.delenv(generated.AUTO_ENV, raising=False)
    return monkeypatch


def test_auto_is_the_generated_code_on_a_cpu_with_a_compiler(unpinned):
    unpinned.setattr(build, "compiler", lambda: "/usr/bin/cc")
    assert generated.resolve("auto", True, "cpu") == "generated"
    assert generated.resolve(None, True, "cpu") == "generated"         # a config without the key
    assert generated.resolve("auto", True, "gpu") == "xla"             # accelerators: XLA
    assert generated.resolve("auto", False, "cpu") == "xla"            # the host reference (Radau)
    assert generated.resolve("xla", True, "cpu") == "xla"              # asked for by name
    assert generated.resolve("generated", True, "cpu") == "generated"


def test_auto_runs_a_short_job_on_xla_and_says_why(unpinned, caplog):
    """A job shorter than what XLA integrates while gcc builds the C runs on
    XLA, whose program a rerun with changed values reuses."""
    unpinned.setattr(build, "compiler", lambda: "/usr/bin/cc")
    short = generated.GENERATED_MIN_VARIANT_STEPS - 1
    with caplog.at_level(logging.INFO, logger="sweep"):
        assert generated.resolve("auto", True, "cpu", variant_steps=short) == "xla"
        assert generated.resolve("auto", True, "cpu", variant_steps=short + 1) == "generated"
        assert generated.resolve("generated", True, "cpu", variant_steps=1) == "generated"   # by name: kept
    lines = [r.getMessage() for r in caplog.records if "integrator.backend=auto" in r.getMessage()]
    assert len(lines) == 1 and f"{short:,} variant-steps" in lines[0] and "runs on XLA" in lines[0]


def test_auto_without_a_compiler_runs_on_xla_and_says_so_once(unpinned, caplog):
    unpinned.setattr(build, "compiler", lambda: None)
    with caplog.at_level(logging.INFO, logger="sweep"):
        assert generated.resolve("auto", True, "cpu") == "xla"
    lines = [r.getMessage() for r in caplog.records if "integrator.backend=auto" in r.getMessage()]
    assert len(lines) == 1 and "no C compiler found" in lines[0]


def test_the_environment_fixes_what_auto_means(unpinned):
    unpinned.setattr(build, "compiler", lambda: "/usr/bin/cc")
    unpinned.setenv(generated.AUTO_ENV, "xla")
    assert generated.resolve("auto", True, "cpu") == "xla"
    assert generated.resolve("generated", True, "cpu") == "generated"   # a named backend is kept
    unpinned.setenv(generated.AUTO_ENV, "generated")
    assert generated.resolve("auto", True, "cpu") == "generated"
    unpinned.setenv(generated.AUTO_ENV, "fast")
    with pytest.raises(ConfigError, match=r"variable AXLE_AUTO_BACKEND = .fast. must be xla or generated"):
        generated.resolve("auto", True, "cpu")
