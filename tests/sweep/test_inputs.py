"""Bad inputs: every one ends with exit code 2 and ONE line
``error: <key> = <value>: <reason>`` naming the key, before anything is built,
compiled or written; plus the entry-point habits (multirun paths and
failures, job log, --help, compilation cache).

The table runs in-process through the app's ``main`` with the config
composed as on the command line (fast: validation happens before JAX compiles
anything); a handful of the same command lines run as real subprocesses."""
import math
import os
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir

from tests.conftest import ROOT
from tests.jobs import cfg_of

# a design table over two parameters of any axle (independent of element names)
TABLE = ["sweep=table", "~sweep.parameters", "+sweep.parameters.stiff.target=bushing.stiffness",
         "+sweep.parameters.stiff.elements=*", "+sweep.parameters.stiff.bounds=[0.5,2.0]",
         "+sweep.parameters.damp.target=bushing.damping", "+sweep.parameters.damp.elements=*",
         "+sweep.parameters.damp.bounds=[0.5,2.0]"]
HEADER = ["stiff", "damp"]
CSV_ROWS = {   # name -> data rows after the header (line 2 is good, line 3 is bad)
    "csv_nan": [["1.0", "1.0"], ["1.0", "nan"]],
    "csv_word": [["1.0", "1.0"], ["1.0", "soft"]],
    "csv_short": [["1.0", "1.0"], ["1.0"]],
    "csv_long": [["1.0", "1.0"], ["1.0", "1.0", "1.0"]],
    "csv_outside": [["1.0", "1.0"], ["9.0", "1.0"]],
}

# (overrides, key named by the error, text the reason must contain)
BAD = {
    "mass_word": (["model.per_side.bodies.wheel.mass=heavy"], "model.per_side.bodies.wheel.mass", "number"),
    "mass_negative": (["model.per_side.bodies.upper_arm.mass=-1.6"], "model.per_side.bodies.upper_arm.mass", "> 0"),
    "relinearise_word": (["integrator.relinearise_every=often"], "integrator.relinearise_every", "integer"),
    "relinearise_fraction": (["integrator.relinearise_every=1.5"], "integrator.relinearise_every", "integer"),
    "relinearise_zero": (["integrator.relinearise_every=0"], "integrator.relinearise_every", ">= 1"),
    "dt_word": (["integrator.dt=abc"], "integrator.dt", "number"),
    "dt_negative": (["integrator.dt=-0.001"], "integrator.dt", "> 0"),
    "dt_not_dividing": (["loadcase.t_start=5.8", "integrator.dt=0.0007"], "integrator.dt",
                        "duration 0.2 s (5.8 to 6 s)"),
    "n_variants_word": (["sweep=lhs", "sweep.n_variants=many"], "sweep.n_variants", "integer"),
    "n_variants_fraction": (["sweep=lhs", "sweep.n_variants=2.7"], "sweep.n_variants", "integer"),
    "seed_word": (["sweep=lhs", "sweep.seed=abc"], "sweep.seed", "integer"),
    "bounds_words": (["sweep=lhs", "sweep.parameters.spring_rate.bounds=[low,high]"],
                     "sweep.parameters.spring_rate.bounds", "two numbers"),
    "bounds_inf": (["sweep=lhs", "sweep.parameters.spring_rate.bounds=[0.85,inf]"],
                   "sweep.parameters.spring_rate.bounds", "finite"),
    "bounds_nan": (["sweep=lhs", "sweep.parameters.spring_rate.bounds=[nan,1.2]"],
                   "sweep.parameters.spring_rate.bounds", "finite"),
    "bounds_three": (["sweep=lhs", "sweep.parameters.spring_rate.bounds=[0.8,1.0,1.2]"],
                     "sweep.parameters.spring_rate.bounds", "[lower, upper]"),
    "nominal_word": (["sweep=lhs", "+sweep.parameters.spring_rate.nominal=abc"],
                     "sweep.parameters.spring_rate.nominal", "number"),
    "chunk_word": (["sweep.chunk_size=big"], "sweep.chunk_size", "integer >= 1 or auto"),
    "chunk_zero": (["sweep.chunk_size=0"], "sweep.chunk_size", "integer >= 1 or auto"),
    "memory_nan": (["sweep.memory_budget_gb=nan"], "sweep.memory_budget_gb", "finite"),
    "memory_negative": (["sweep.memory_budget_gb=-1"], "sweep.memory_budget_gb", "> 0"),
    "every_zero": (["sweep=lhs", "sweep.every=0"], "sweep.every", ">= 1"),
    "every_not_dividing": (["sweep=lhs", "sweep.every=7"], "sweep.every", "divide"),
    "output_every_zero": (["output.every=0"], "output.every", ">= 1"),
    "start_word": (["sweep=lhs", "sweep.start=early"], "sweep.start", "number"),
    "start_after_end": (["sweep=lhs", "sweep.start=7.0"], "sweep.start", "before loadcase.t_end"),
    "progress_word": (["sweep.progress=maybe"], "sweep.progress", "true or false"),
    "shard_word": (["sweep.shard=first"], "sweep.shard", "integer"),
    "levels_fraction": (["sweep=grid", "sweep.levels=1.5"], "sweep.levels", "integer"),
    "overwrite_word": (["output.overwrite=please"], "output.overwrite", "true or false"),
    "t_end_word": (["loadcase.t_end=late"], "loadcase.t_end", "number"),
    "wheel_load_word": (["loadcase.wheel_loads.left.fz=heavy"], "loadcase.wheel_loads.left.fz", "number"),
    "change_without_time": (["loadcase.changes=[{duration:0.0,left:{fx:-2500.0}}]"], "loadcase.changes[0].time",
                            "missing"),
    "change_time_word": (["loadcase.changes=[{time:soon,left:{fx:-2500.0}}]"], "loadcase.changes[0].time",
                         "number"),
    "change_duration_negative": (["loadcase.changes=[{time:5.0,duration:-1.0}]"],
                                 "loadcase.changes[0].duration", ">= 0"),
    "stiffness_negative": (["model.bushing_types.ball_joint.stiffness=[1e8,1e8,-1e8,5,5,5]"],
                           "model.bushing_types.ball_joint.stiffness[2]", ">= 0"),
    "stiffness_word": (["model.bushing_types.ball_joint.stiffness=[1e8,1e8,stiff,5,5,5]"],
                       "model.bushing_types.ball_joint.stiffness[2]", "number"),
    "damping_negative": (["+model.bushing_types.ball_joint.damping=[-1,0,0,0,0,0]"],
                         "model.bushing_types.ball_joint.damping[0]", ">= 0"),
    "loss_factor_negative": (["model.bushing_types.upper_arm_bushing.loss_factor=-0.05"],
                             "model.bushing_types.upper_arm_bushing.loss_factor", ">= 0"),
    # a misspelt key in the model file: never dropped silently
    "model_key_typo": (["+model.per_side.bushings.upper_arm_rear.stifness=[1e6,1e6,1e6,1e3,1e3,1e3]"],
                       "model.per_side.bushings.upper_arm_rear.stifness", "did you mean 'stiffness'?"),
    "model_seat_offset_typo": (["+model.per_side.p2p.main_spring.seat_ofset=0.0189"],
                               "model.per_side.p2p.main_spring.seat_ofset", "did you mean 'seat_offset'?"),
    "model_three_levels_typo": (["+model.bushing_types.ball_joint.stiffness_curves="
                                 "{z: {x: [0.0, 1.0], y: [0.0, 1.0e8], interp: linear}}"],
                                "model.bushing_types.ball_joint.stiffness_curves.z.interp",
                                "did you mean 'interpolation'?"),
    "model_top_level_typo": (["+model.reference_bushings=lower_link_chassis"], "model.reference_bushings",
                             "did you mean 'reference_bushing'?"),
    # a misspelt key in a job config file (or added with +): never dropped silently
    "loadcase_key_typo": (["+loadcase.nmse_windo=[4.9,6.0]"], "loadcase.nmse_windo",
                          "did you mean 'nmse_window'?"),
    "integrator_key_typo": (["+integrator.rtoll=1e-3"], "integrator.rtoll", "did you mean 'rtol'?"),
    "sweep_key_typo": (["+sweep.n_variant=3"], "sweep.n_variant", "did you mean 'n_variants'?"),
    "output_key_typo": (["+output.evry=2"], "output.evry", "did you mean 'every'?"),
    "gravity_two": (["model.gravity=[0.0,-9.81]"], "model.gravity", "3 values"),
    "gravity_word": (["model.gravity=[0.0,0.0,down]"], "model.gravity[2]", "number"),
    "hardpoint_two": (["model.hardpoints.WC=[0.0,0.768]"], "model.hardpoints.WC", "3 values"),
    "path_proc": (["output.path=/proc/x/y.zarr"], "output.path", "cannot create"),
    "path_parent_file": (["output.path={tmp}/afile/y.zarr"], "output.path", "is a file"),
    "path_not_zarr": (["output.path={tmp}/x.nc"], "output.path", ".zarr"),
    "csv_nan": ([*TABLE, "sweep.table={csv_nan}"], "sweep.table", "line 3, column 'damp' = nan is not finite"),
    "csv_word": ([*TABLE, "sweep.table={csv_word}"], "sweep.table", "line 3, column 'damp' = 'soft' is not a number"),
    "csv_short": ([*TABLE, "sweep.table={csv_short}"], "sweep.table",
                  "line 3 has 1 fields, the header 2: column 'damp' is missing"),
    "csv_long": ([*TABLE, "sweep.table={csv_long}"], "sweep.table",
                 "line 3 has 3 fields, the header 2: 1 value(s) after the last column 'damp'"),
    "csv_outside": ([*TABLE, "sweep.table={csv_outside}"], "sweep.table", "row 1 stiff = 9.0 is outside bounds"),
    "csv_missing_file": ([*TABLE, "sweep.table={tmp}/none.csv"], "sweep.table", "cannot be read"),
}


@pytest.fixture
def inputs(tmp_path):
    """Files the bad command lines refer to; output.path inside ``out``."""
    (tmp_path / "afile").write_text("not a directory")
    files = {"tmp": str(tmp_path)}
    for name, rows in CSV_ROWS.items():
        path = tmp_path / f"{name}.csv"
        path.write_text("\n".join(",".join(r) for r in [HEADER, *rows]) + "\n")
        files[name] = str(path)
    out = tmp_path / "out"
    return files, out


def _overrides(over, files, out):
    for name, value in files.items():
        over = [o.replace("{" + name + "}", value) for o in over]
    if not any(o.startswith("output.path=") for o in over):
        over.append(f"output.path={out}/c.zarr")
    return over


def _assert_one_line(err, key, reason):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {key} = ") or lines[0].startswith(f"error: {key} is missing") or \
        lines[0].startswith(f"error: {key}: "), lines[0]
    assert reason in lines[0], lines[0]
    assert "Traceback" not in err


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_naming_the_key(case, inputs, capsys, monkeypatch):
    from sweep import app
    from sweep.engine import stream
    files, out = inputs
    over, key, reason = BAD[case]
    cfg = cfg_of(*_overrides(over, files, out))
    for name in ("compile_runner", "stream_chunks"):     # nothing may be compiled or run
        monkeypatch.setattr(stream, name, lambda *a, **k: pytest.fail("computed before validation"))
    capsys.readouterr()
    assert app.main(cfg, progress=False) == 2
    captured = capsys.readouterr()
    _assert_one_line(captured.err, key, reason)
    assert not out.exists(), "nothing may be written"


def tune_cfg(*over):
    with initialize_config_dir(config_dir=os.path.join(ROOT, "configs"), version_base="1.3"):
        return compose(config_name="tune", overrides=list(over))


@pytest.mark.parametrize("over, key, reason", [
    ("objectives.toe_braking.target=small", "objectives.toe_braking.target", "number"),
    ("objectives.toe_braking.target=nan", "objectives.toe_braking.target", "finite"),
    ("objectives.toe_braking.weight=-1", "objectives.toe_braking.weight", ">= 0"),
    ("+objectives.toe_braking.scale=big", "objectives.toe_braking.scale", "number"),
    ("optimizer.iterations=many", "optimizer.iterations", "integer"),
    ("optimizer.n_starts=2.5", "optimizer.n_starts", "integer"),
    ("time_response.dt=abc", "time_response.dt", "number"),
    ("parameters.upper_arm_radial.bounds=[0.2,inf]", "parameters.upper_arm_radial.bounds", "finite"),
    ("kc.loaded_radius=-0.3", "kc.loaded_radius", "> 0"),
    ("output.path=/proc/x/h.zarr", "output.path", "cannot create"),
    ("+optimizer.iteration=5", "optimizer.iteration", "did you mean 'iterations'?"),
    ("+time_response.settle_windo=0.1", "time_response.settle_windo", "did you mean 'settle_window'?"),
])
def test_bad_tune_input_is_one_line_naming_the_key(over, key, reason, capsys, tmp_path):
    from sweep.tune import main
    out = tmp_path / "out"
    extra = [] if over.startswith("output.path") else [f"output.path={out}/h.zarr"]
    assert main(tune_cfg(over, *extra), progress=False) == 2
    _assert_one_line(capsys.readouterr().err, key, reason)
    assert not out.exists()


# --------------------------------------------------------------------------- real command lines

def cli(*args, module="sweep", cwd=ROOT, env=None):
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env=env)


@pytest.mark.parametrize("value, reason", [("small", "must be a number"), ("nan", "must be a finite number")])
def test_tune_command_line_exits_2_with_one_line(value, reason, tmp_path):
    proc = cli(f"objectives.toe_braking.target={value}", f"output.path={tmp_path}/out/h.zarr",
               f"hydra.run.dir={tmp_path}/hydra", module="sweep.tune")
    assert proc.returncode == 2, proc.stderr
    _assert_one_line(proc.stderr, "objectives.toe_braking.target", reason)
    assert not (tmp_path / "out").exists()


def test_help_is_short_and_lists_groups():
    proc = cli("--help")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert len(lines) < 80, len(lines)
    for text in ("integrator: linear_implicit_euler, lsrt2, radau, ros34pw2", "model: double_wishbone", "sweep.n_variants", "cache.enabled"):
        assert text in proc.stdout
    head = proc.stdout.split("Examples")[0]       # not the model config dumped (its hardpoint table)
    assert "hardpoints:" not in head and "WC:" not in head


@pytest.mark.parametrize("script, code, text", [("axle-sweep", 0, "axle-sweep"), ("axle-tune", 0, "sweep.tune"),
                                                ("axle-verify", 0, "usage"), ("axle-align", 0, "align")])
def test_console_scripts_answer_help(script, code, text):
    """The console scripts of pyproject.toml: ``--help`` answers (exit code,
    a line that names the program) without running a job."""
    exe = os.path.join(os.path.dirname(sys.executable), script)
    if not os.path.exists(exe):
        pytest.skip(f"console script not installed (pip install -e . installs {script})")
    proc = subprocess.run([exe, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert text in (proc.stdout + proc.stderr)


# --------------------------------------------------------------------------- paths, cache, logging

def test_default_output_path_holds_the_overrides_that_change_results():
    base = "outputs/double_wishbone/longitudinal_step/nominal-1"
    assert os.path.normpath(cfg_of().output.path) == f"{base}/lsrt2.zarr"
    one, four = (os.path.normpath(cfg_of(f"integrator.relinearise_every={n}").output.path) for n in (1, 4))
    assert one == f"{base}/integrator.relinearise_every=1/lsrt2.zarr" and one != four
    # shards of one store, bookkeeping and the cache do not change the path
    same = cfg_of("sweep.shard=1", "sweep.num_shards=2", "sweep.progress=false", "cache.enabled=false",
                  "output.overwrite=true")
    assert os.path.normpath(same.output.path) == f"{base}/lsrt2.zarr"
    assert os.path.normpath(cfg_of("integrator=radau").output.path) == f"{base}/radau.zarr"


def test_job_config_leaves_out_the_cache_and_normalises_the_path():
    from sweep.app import job_config
    cfg = job_config(cfg_of("cache.enabled=false"))
    assert "cache" not in cfg and "//" not in cfg.output.path


def test_cache_directory(monkeypatch, tmp_path):
    from omegaconf import OmegaConf

    from sweep.core.runtime import CACHE_ENV, cache_dir
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir(None) == str(tmp_path / "xdg" / "axle-sweep" / "jax")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "env"))
    assert cache_dir(OmegaConf.create({"cache": {"enabled": True, "dir": None}})) == str(tmp_path / "env")
    assert cache_dir(OmegaConf.create({"cache": {"enabled": True, "dir": str(tmp_path / "cfg")}})) == \
        str(tmp_path / "cfg")
    assert cache_dir(OmegaConf.create({"cache": {"enabled": False, "dir": None}})) is None


def test_the_generated_code_follows_the_cache_directory_of_the_job(monkeypatch, tmp_path):
    """``cache.dir`` places the generated C's libraries too (``generated/``
    beside it), also with ``cache.enabled=false``, and a background build
    started by the job is told that directory (its config has no cache
    section); without ``cache.dir``, ``$AXLE_JAX_CACHE_DIR`` as read now."""
    import jax
    from omegaconf import OmegaConf

    from sweep import prebuild
    from sweep.codegen import build
    from sweep.core import runtime
    monkeypatch.setattr(runtime, "_CONFIGURED", {"dir": None})
    monkeypatch.setenv(runtime.CACHE_ENV, str(tmp_path / "env" / "jax"))
    old = jax.config.jax_compilation_cache_dir
    try:
        assert build.cache_dir() == str(tmp_path / "env" / "generated")
        for enabled in (False, True):
            jax.config.update("jax_compilation_cache_dir", None)
            runtime.setup(OmegaConf.create({"cache": {"enabled": enabled, "dir": str(tmp_path / "mine" / "jax")}}))
            assert build.cache_dir() == str(tmp_path / "mine" / "generated")
            assert bool(jax.config.jax_compilation_cache_dir) == enabled
        seen = {}

        class Popen:
            def __init__(self, args, env=None, **kw):
                seen.update(args=args, env=env)
        monkeypatch.setattr(prebuild.subprocess, "Popen", Popen)
        record = os.path.join(build.cache_dir(), "record")
        assert prebuild.spawn("model: {}\n", record) is not None
        assert seen["env"][runtime.CACHE_ENV] == str(tmp_path / "mine" / "jax")
        runtime.setup(OmegaConf.create({"cache": {"enabled": True, "dir": None}}))
        assert build.cache_dir() == str(tmp_path / "env" / "generated")
    finally:
        jax.config.update("jax_compilation_cache_dir", old)


def test_durations_without_float_noise():
    from sweep.core.config import ConfigError, duration, fmt
    from sweep.study.loadcase import sample_grid
    assert duration(6.0 - 5.8) == "0.2" and fmt(0.0007) == "0.0007" and fmt(math.nan) == "nan"
    with pytest.raises(ConfigError, match=r"^sweep.every = 3: must be >= 1 and divide the 200 steps"):
        sample_grid(5.8, 6.0, 0.001, 3, every_key="sweep.every")


def test_model_tables_reject_negative_bushing_rates_and_two_component_gravity():
    """The same checks on plain model tables (models built without a config)."""
    import copy

    from kernels.model import ModelError, validate_tables
    from sweep.axle.builder import build_tables
    from tests.conftest import load_model_cfg
    tables = build_tables(load_model_cfg("toy_trailing_arm"))
    bad = copy.deepcopy(tables)
    bad["bushings"][0]["damping"][1] = -1.0
    with pytest.raises(ModelError, match=r"damping = .*: y = -1.0 must be >= 0"):
        validate_tables(bad)
    bad = copy.deepcopy(tables)
    bad["bushings"][0]["stiffness"][5] = -10.0
    with pytest.raises(ModelError, match=r"stiffness = .*: rz = -10.0 must be >= 0"):
        validate_tables(bad)
    bad = copy.deepcopy(tables)
    bad["gravity"] = [0.0, -9.81]
    with pytest.raises(ModelError, match=r"model.gravity = \[0.0, -9.81\] must have 3 values"):
        validate_tables(bad)


def test_a_load_change_after_the_window_is_named_in_one_warning(caplog):
    """A pothole whose far edge comes after the end of the run: the change
    that never acts is named (key, its time, the window's end); the ones
    inside the window are not."""
    import logging
    from omegaconf import OmegaConf
    from sweep.study.loadcase import build_excitation
    cfg = OmegaConf.to_container(cfg_of("loadcase=pothole", "loadcase.t_end=0.16").loadcase, resolve=True)
    with caplog.at_level(logging.WARNING, logger="sweep.study.loadcase"):
        build_excitation(cfg)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == ["warning: loadcase.changes[2].time = 0.175 s is at or after the end of the simulated "
                      "window (loadcase.t_end = 0.16 s): this load change never acts"], warned
