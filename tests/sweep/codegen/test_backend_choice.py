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
from sweep.core.config import ConfigError
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


def test_auto_runs_a_short_job_on_generated_code_already_built(unpinned, caplog):
    """A short job whose generated code an earlier run built (it reads the
    values at run time) runs on it; not built, it runs on XLA with the
    reason "short" - the one that starts the background build."""
    unpinned.setattr(build, "compiler", lambda: "/usr/bin/cc")
    short = generated.GENERATED_MIN_VARIANT_STEPS - 1
    with caplog.at_level(logging.INFO, logger="sweep"):
        assert generated.choose("auto", True, "cpu", short, built=lambda: True) == ("generated", "built")
        assert generated.choose("auto", True, "cpu", short, built=lambda: False) == ("xla", "short")
    assert "runs on the generated code that an earlier run built" in caplog.text
    # only a short job under auto asks; pinned, named or large jobs do not
    ask = lambda: pytest.fail("asked whether the code is built")      # noqa: E731
    assert generated.choose("xla", True, "cpu", short, built=ask) == ("xla", "chosen")
    assert generated.choose("auto", True, "cpu", short + 1, built=ask) == ("generated", "large")
    unpinned.setenv(generated.AUTO_ENV, "xla")
    assert generated.choose("auto", True, "cpu", short, built=ask) == ("xla", "pinned")


def test_a_short_job_plans_its_background_build_and_finds_it_built(unpinned, tmp_path):
    """The time-response plan of a short job on XLA names the cache record
    of its generated code (what the background build writes); once that
    record and its code are in the cache, the same job - and one with a
    changed wheel load - plans on the generated backend."""
    from tests.jobs import cfg_of
    from sweep.kinds import kind_of
    unpinned.setattr(build, "compiler", lambda: "/usr/bin/cc")
    unpinned.setenv("AXLE_JAX_CACHE_DIR", str(tmp_path / "jax"))     # the generated cache: tmp_path/generated
    args = ("model=toy_trailing_arm", "loadcase.t_start=4.95", "loadcase.t_end=5.05")
    cfg = cfg_of(*args)
    plan = kind_of(cfg).plan(cfg)
    record = plan.case.prebuild
    assert plan.case.backend == "xla" and record.startswith(str(tmp_path)) and not build.record_built(record)
    with open(record, "w") as f:
        f.write("somekey")
    with open(os.path.join(os.path.dirname(record), "somekey.pkl"), "w") as f:
        f.write("")
    for extra in ((), ("loadcase.wheel_loads.left.fz=4100",)):
        cfg = cfg_of(*args, *extra)
        plan = kind_of(cfg).plan(cfg)
        assert plan.case.backend == "generated" and not plan.case.prebuild
    # another structure (fewer stored bushings) has its own record
    cfg = cfg_of(*args, "output.bushings=pivot_*")
    assert kind_of(cfg).plan(cfg).case.prebuild not in ("", record)
    # with the cache off (cache.enabled=false: no persistent cache in the process), nothing is built
    from sweep.core import runtime
    unpinned.setattr(runtime, "cache_in_use", lambda: False)
    cfg = cfg_of(*args, "loadcase.wheel_loads.left.fz=4300", "output.bushings=pivot_*")
    assert kind_of(cfg).plan(cfg).case.prebuild == ""


def test_a_short_job_on_xla_is_compiled_for_a_quick_start(unpinned, tmp_path):
    """A short job that auto runs on XLA is compiled for a quick start
    (sweep.engine.stream.QUICK_START, named in the compile line of the log),
    a program of its own in the caches (its key differs); a job on XLA by
    name (integrator.backend=xla) or pinned to it keeps XLA's defaults.
    That both compute the same: tests/sweep/engine/test_values_numbers.py."""
    from tests.jobs import cfg_of
    from sweep.engine.stream import QUICK_START
    from sweep.kinds import kind_of
    unpinned.setattr(build, "compiler", lambda: "/usr/bin/cc")
    unpinned.setenv("AXLE_JAX_CACHE_DIR", str(tmp_path / "jax"))
    args = ("model=toy_trailing_arm", "loadcase.t_start=4.95", "loadcase.t_end=5.05")

    def runner(*extra):
        cfg = cfg_of(*args, *extra)
        kind = kind_of(cfg)
        plan = kind.plan(cfg)
        return plan, kind.runner(plan)
    plan, quick = runner()
    assert plan.case.backend == "xla" and plan.case.quick
    assert quick.compile_options == QUICK_START and "quick start" in quick.what
    for extra in (("integrator.backend=xla",), ()):
        if not extra:
            unpinned.setenv(generated.AUTO_ENV, "xla")
        plan, full = runner(*extra)
        assert plan.case.backend == "xla" and not plan.case.quick
        assert full.compile_options is None and "quick start" not in full.what
        assert full.key != quick.key


@pytest.mark.parametrize("args", [
    ("model=toy_trailing_arm", "loadcase.t_start=4.95", "loadcase.t_end=5.05"),
    ("model=toy_trailing_arm", "loadcase=rough_road", "loadcase.t_end=3.0", "loadcase.settle=0.5",
     "loadcase.resolution=1.0"),
])
def test_the_record_a_job_waits_for_is_the_one_its_background_build_writes(unpinned, tmp_path, args):
    """The cache record a short job on XLA names (its plan's case) is the one
    the background build's runner loads or writes: the same job planned on
    the generated backend, its key, sweep parameters, values' pattern and
    lanes - for a time response and for a rough road (whose case gets the
    road's harmonics after the time response's plan)."""
    from tests.jobs import cfg_of
    from sweep.kinds import kind_of
    unpinned.setattr(build, "compiler", lambda: "/usr/bin/cc")
    unpinned.setenv("AXLE_JAX_CACHE_DIR", str(tmp_path / "jax"))
    cfg = cfg_of(*args)
    kind = kind_of(cfg)
    cfg = kind.prepare(cfg)
    plan = kind.plan(cfg)
    assert plan.case.backend == "xla" and plan.case.prebuild
    cfg.integrator.backend = "generated"         # what sweep.prebuild.build plans
    plan_g = kind.plan(cfg)
    runner = kind.runner(plan_g)
    W = 1 if plan_g.chunk == 1 else generated.LANES
    assert plan.case.prebuild == build.prekey_record(
        generated.whole_prekey(runner.key, len(plan_g.pset), runner.fn.values_key), W, shared=(1,), fold=True)


def test_one_background_build_per_structure_at_a_time(tmp_path):
    """The build's lock holds its host and process id: a live holder keeps
    it, a lock whose process is gone is taken over, one of another host (a
    shared cache) is believed - unless it is older than a build could be
    (a process id reused after a reboot)."""
    import socket
    import subprocess
    import sys
    from sweep import prebuild
    host = socket.gethostname()
    lock = str(tmp_path / "x.key.building")
    assert prebuild._claim(lock) and not prebuild._claim(lock)          # this process holds it
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    with open(lock, "w") as f:
        f.write(f"{host} {proc.pid}")                                   # a builder that is gone
    assert prebuild._claim(lock)
    with open(lock) as f:
        assert f.read() == f"{host} {os.getpid()}"
    with open(lock, "w") as f:
        f.write(f"{host}-other-node 12345")                             # another host's builder
    assert not prebuild._claim(lock)
    old = os.path.getmtime(lock) - prebuild.STALE_LOCK_S - 60
    os.utime(lock, (old, old))
    assert prebuild._claim(lock)


def test_a_failed_background_build_is_not_started_again(tmp_path, monkeypatch, caplog):
    """A structure whose background build failed (recorded beside its cache
    record) starts no build in later jobs; a clean one does (the process is
    stubbed: nothing is built here)."""
    from sweep import prebuild
    started = []
    monkeypatch.setattr(prebuild.subprocess, "Popen", lambda *a, **k: started.append(a) or "proc")
    record = str(tmp_path / "abc.key")
    with caplog.at_level(logging.INFO, logger="sweep"):
        assert prebuild.spawn("a: 1\n", record) == "proc" and len(started) == 1
        prebuild._failed(record, "Unsupported: a primitive")
        assert prebuild.spawn("a: 1\n", record) is None and len(started) == 1
    assert "not built - Unsupported: a primitive" in caplog.text
    assert (tmp_path / "abc.key.failed").read_text().startswith("Unsupported")
    # a build that cannot even start (no cache folder) is a warning, never an error of the finished job
    with caplog.at_level(logging.INFO, logger="sweep"):
        assert prebuild.spawn("a: 1\n", str(tmp_path / "missing" / "abc.key")) is None
    assert "background build of the generated C could not start" in caplog.text
