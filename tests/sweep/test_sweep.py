"""The sweep engine: designs, parameters, failure isolation, resume, shards, devices."""
import os
import subprocess
import sys

import numpy as np
import pytest
from omegaconf import OmegaConf

from kernels.model import ModelError
from tests.jobs import cfg_of
from tests.conftest import ROOT

# a short window around the step keeps compile and run small
SHORT = ["loadcase.t_start=4.98", "loadcase.t_end=5.03", "output.every=5"]
PARAMS = ["sweep=lhs", "sweep.start=null", "sweep.every=null"]


def _design(*over):
    from sweep.study.design import make_design
    from sweep.axle.builder import model_from_config
    from sweep.axle.params import build_parameters
    cfg = cfg_of(*PARAMS, *over)
    sw = OmegaConf.to_container(cfg.sweep, resolve=True)
    model = model_from_config(cfg.model)
    pset = build_parameters(sw["parameters"], model)
    return make_design(sw, pset), pset


def test_auto_chunk_follows_the_memory_budget_and_the_platform_cap():
    """Auto chunk = budget / per-variant bytes, capped per device where
    throughput stops growing (256 on a CPU), a multiple of the device count,
    never more than the design."""
    from sweep.engine.layout import output_bytes
    from sweep.engine.mapping import estimate_chunk
    from sweep.kinds.time_response import CHANNELS
    # 111 samples of wheel-centre displacement (2 x 3), toe, camber (2 each)
    # and 2 bushings x 6 components: 22 float64 per sample
    shapes = {"wheel_centre_displacement": (2, 3), "toe": (2,), "camber": (2,), "bushing_force": (2, 6)}
    out = output_bytes(CHANNELS, shapes, 111)
    assert out == 8 * 111 * 22
    c, per = estimate_chunk(4096, out, 144, 2.0, 1, platform="cpu")
    assert c == 256 and per == 8 * 111 * 22 + 8 * 144 * 144 * 12
    c, _ = estimate_chunk(4096, out, 144, 2.0, 2, platform="cpu")
    assert c == 512                                   # 256 per device
    c, _ = estimate_chunk(4096, out, 144, 2.0, 1, platform="gpu")
    assert c == 1024
    big = output_bytes(CHANNELS, {**shapes, "bushing_force": (47, 6)}, 100_000)
    c, per = estimate_chunk(4096, big, 144, 2.0, 1, platform="gpu")
    assert c == int(2.0 * 2 ** 30 // per) < 1024        # long manoeuvre: the budget decides
    c, _ = estimate_chunk(3, out, 144, 2.0, 2, platform="cpu")
    assert c == 4                                     # 3 variants, rounded up to 2 devices


def test_default_jobs_split_a_chunk_over_the_cpu_devices_only_when_large_enough(monkeypatch):
    """Default CPU devices (sweep.core.runtime.xla_flags_from_env chose the count):
    a time-response chunk is split only from MIN_VARIANTS_PER_CPU_DEVICE
    variants per device (the quick start's single variant stays on one
    device, unpadded); job kinds that run on one device (max_devices=1: K&C,
    modes, Radau) get one-device chunks; a count the user chose is used as
    given. Two devices faked (this test process has one)."""
    from sweep.engine import mapping as engine
    monkeypatch.setattr(engine.jax, "device_count", lambda backend=None: 2)
    monkeypatch.setattr(engine, "cpu_devices_are_default", lambda: True)
    m = engine.MIN_VARIANTS_PER_CPU_DEVICE
    auto = {"chunk_size": "auto"}
    out, n_dof = 8 * 111 * 22, 144

    def chunks(n, sw=auto, **kw):
        return engine.chunking(sw, n, out, n_dof, **kw)[2:]
    assert chunks(1, max_devices=None) == (1, 1)
    assert chunks(2 * m - 1, max_devices=None) == (1, 2 * m - 1)
    assert chunks(2 * m, max_devices=None) == (2, 2 * m)
    assert chunks(4096, max_devices=None) == (2, 2 * engine.MAX_AUTO_CHUNK_CPU)
    assert chunks(4096) == (1, engine.MAX_AUTO_CHUNK_CPU)                 # one-device kinds
    assert chunks(12, {"chunk_size": 2}, max_devices=None) == (1, 2)
    assert chunks(4 * m, {"chunk_size": 2 * m + 1}, max_devices=None) == (2, 2 * m + 2)
    # a chunk larger than the variants of the design (or of a shard) only pads: capped
    assert chunks(8, {"chunk_size": 100000}, max_devices=None) == (1, 8)
    assert engine.chunking({"chunk_size": 100000, "num_shards": 2, "shard": 1}, 9, out, n_dof)[2:] == (1, 5)
    assert "(default; AXLE_CPU_DEVICES=1 for one)" in engine.devices_note(2, "cpu")
    assert engine.devices_note(1, "cpu").startswith("1 CPU device of 2 (default;")
    monkeypatch.setattr(engine, "cpu_devices_are_default", lambda: False)   # AXLE_CPU_DEVICES / XLA_FLAGS
    assert chunks(1, max_devices=None) == (2, 2)
    assert chunks(12, {"chunk_size": 2}, max_devices=None) == (2, 2)
    assert chunks(4096) == (1, engine.MAX_AUTO_CHUNK_CPU)


def test_resume_keeps_the_store_chunks_whatever_the_device_count(tmp_path, monkeypatch):
    """The auto chunk depends on the device count (not part of a job's
    identity): a store made with chunks of 4 (say one device) and resumed by
    a run that would use 6 (say two devices, or a store from before two
    devices became the default) keeps its chunks of 4; the run's devices drop
    to a count that divides them."""
    from sweep.engine import layout, mapping, stream
    from sweep.engine.stops import RunContext
    from sweep.kinds.base import Plan
    monkeypatch.setattr(mapping.jax, "device_count", lambda backend=None: 4)
    monkeypatch.setattr(mapping, "cpu_devices_are_default", lambda: False)
    X, pset = _design("sweep.n_variants=12")
    cfg = OmegaConf.create({"output": {"path": str(tmp_path / "c.zarr")}, "sweep": {"micro_batch": "auto"}})

    def job(chunk, n_dev):
        plan = Plan(model=None, pset=pset, X=X, shard=0, num_shards=1, chunk=chunk, n_dev=n_dev, micro_batch=None,
                    channels=(), shapes={}, coords={"variant": (np.arange(len(X)), {})}, lead=(),
                    iterations_long_name="iterations")
        return plan, layout.store_spec(plan)
    plan, spec = job(4, 1)
    with RunContext() as ctx:
        _, store, created, todo, plan = stream.open_store(ctx, cfg, plan, spec, {}, "identity")
        assert created and store.chunk == 4 and todo == [0, 1, 2]
    plan, spec = job(6, 2)
    with RunContext() as ctx:
        _, store, created, todo, plan = stream.open_store(ctx, cfg, plan, spec, {}, "identity")
    assert not created and todo == [0, 1, 2]
    assert (plan.chunk, plan.n_dev) == (4, 2) and store.region(2) == (8, 12)
    plan, spec = job(6, 3)
    with RunContext() as ctx:
        plan = stream.open_store(ctx, cfg, plan, spec, {}, "identity")[-1]
    assert (plan.chunk, plan.n_dev) == (4, 2)


DEVICE_COUNT = """
import sys
import sweep.app, sweep.kinds.kinematics_compliance, sweep.tune   # the entry points' modules: none starts a JAX backend
from sweep.core import runtime
runtime.xla_flags_from_env()
import jax
print(jax.device_count(), runtime.cpu_devices_are_default())
"""


def _device_count(**env):
    e = {k: v for k, v in os.environ.items()
         if k not in ("AXLE_CPU_DEVICES", "AXLE_CPU_DEVICES_DEFAULT", "XLA_FLAGS")}
    e.update(env)
    proc = subprocess.run([sys.executable, "-c", DEVICE_COUNT], cwd=ROOT, env=e, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    n, default = proc.stdout.split()
    return int(n), default == "True"


def test_cpu_device_count_default_and_overrides():
    """The entry points' device set-up (no compile): by default one JAX CPU
    device per usable core, at most MAX_DEFAULT_CPU_DEVICES, also when the
    entry point's modules (python -m sweep / sweep.tune, the job kinds) are
    imported first; AXLE_CPU_DEVICES=1 keeps one; a count in XLA_FLAGS wins
    over AXLE_CPU_DEVICES, except one that a parent process set by default."""
    from sweep.core.runtime import MAX_DEFAULT_CPU_DEVICES, usable_cores
    assert _device_count(AXLE_CPU_DEVICES="1") == (1, False)
    assert _device_count(AXLE_CPU_DEVICES="1", XLA_FLAGS="--xla_force_host_platform_device_count=3") == (3, False)
    inherited = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2", "AXLE_CPU_DEVICES_DEFAULT": "2"}
    assert _device_count(AXLE_CPU_DEVICES="1", **inherited) == (1, False)
    if usable_cores() < 2:
        pytest.skip("one usable core: the default is one device")
    assert _device_count() == (min(usable_cores(), MAX_DEFAULT_CPU_DEVICES), True)


@pytest.mark.parametrize("design", ["lhs", "sobol", "random"])
def test_designs_are_deterministic_and_within_bounds(design):
    X1, pset = _design(f"sweep.design={design}", "sweep.n_variants=64", "sweep.seed=3")
    X2, _ = _design(f"sweep.design={design}", "sweep.n_variants=64", "sweep.seed=3")
    X3, _ = _design(f"sweep.design={design}", "sweep.n_variants=64", "sweep.seed=4")
    np.testing.assert_array_equal(X1, X2)
    assert not np.allclose(X1, X3)
    assert X1.shape == (64, len(pset))
    for i, p in enumerate(pset.params):
        assert np.all(X1[:, i] >= p.lower) and np.all(X1[:, i] <= p.upper)
        if design == "lhs":  # one sample per stratum of the sampling space
            strata = np.floor(p.to_unit(X1[:, i]) * 64).astype(int)
            assert sorted(strata) == list(range(64))
    # log scale: uniform in the logarithm -> the geometric midpoint is the median
    i = pset.names.index("longitudinal_link_radial")
    assert abs(np.median(np.log(X1[:, i]))) < 0.15


def test_grid_and_table_designs(tmp_path):
    X, pset = _design("sweep=grid", "sweep.levels=2")
    assert X.shape == (2 ** len(pset), len(pset))
    assert len({tuple(r) for r in X}) == len(X)
    csv = tmp_path / "d.csv"
    rows = [",".join(pset.names)] + [",".join(str(v) for v in X[i]) for i in (0, 5)]
    csv.write_text("\n".join(rows) + "\n")
    T, _ = _design("sweep=table", f"sweep.table={csv}")
    np.testing.assert_allclose(T, X[[0, 5]])
    # saved by Excel as "CSV UTF-8": a byte-order mark before the first column's name
    csv.write_bytes(b"\xef\xbb\xbf" + ("\n".join(rows) + "\n").encode())
    T, _ = _design("sweep=table", f"sweep.table={csv}")
    np.testing.assert_allclose(T, X[[0, 5]])
    with pytest.raises(ModelError, match=rf"sweep.levels = \[2, 2\]: 2 value\(s\) for {len(pset)} parameter"):
        _design("sweep=grid", "sweep.levels=[2,2]")
    csv.write_text(",".join(pset.names) + "\n" + ",".join(["9.0"] * len(pset)) + "\n")
    with pytest.raises(ModelError, match="outside bounds"):
        _design("sweep=table", f"sweep.table={csv}")


@pytest.mark.parametrize("override, message", [
    ("sweep.n_variants=0", "sweep.n_variants = 0 must be >= 1"),
    ("sweep.parameters.spring_rate.bounds=[1.2,0.8]", "sweep.parameters.spring_rate.bounds = [1.2, 0.8] are reversed"),
    ("sweep.parameters.upper_arm_radial.elements=upper_wishbone_*", "matches no bushing"),
    ("+sweep.parameters.spring_rate.scaling=log", "sweep.parameters.spring_rate.scaling: unknown key"),
    ("sweep.parameters.spring_rate.target=spring.stiffness", "target = 'spring.stiffness' is not one of"),
    ("sweep.design=halton", "sweep.design = 'halton' is not one of"),
    ("integrator.solver=cholesky", "integrator.solver = 'cholesky': must be one of block, dense, block32"),
    # semantic checks: values that would be accepted and change the study silently
    ("+sweep.parameters.spring_rate.directions=x", "sweep.parameters.spring_rate.directions = 'x': spring elements"),
    ("+sweep.parameters.upper_arm_radial.mode=value",
     "sweep.parameters.upper_arm_radial.nominal is missing: mode=value needs the nominal value"),
    ("loadcase.nmse_window=[6.0,4.9]", "loadcase.nmse_window = [6.0, 4.9]: is reversed or empty"),
])
def test_bad_sweep_config_is_one_line_before_compute(override, message, capsys, tmp_path):
    from sweep.app import main
    cfg = cfg_of(*SHORT, *PARAMS, override, f"output.path={tmp_path}/c.zarr")
    assert main(cfg, progress=False) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not os.path.exists(tmp_path / "c.zarr"), "nothing may be computed or written"


def test_parameters_act_on_the_model(dw_model):
    from sweep.axle.params import build_parameters
    spec = {"ll": {"target": "bushing.stiffness", "elements": "longitudinal_link_body_*",
                   "directions": "radial", "bounds": [0.1, 10], "scale": "log"},
            "reb": {"target": "damper.rebound", "elements": "damper_*", "bounds": [0.5, 2]},
            "k": {"target": "bushing.stiffness", "elements": "tie_rod_inner_left", "directions": ["z"],
                  "mode": "value", "nominal": 1e8, "bounds": [1e7, 1e9]}}
    pset = build_parameters(spec, dw_model)
    m = pset.apply(dw_model, np.array([3.0, 1.5, 2e8]))
    names = dw_model.topology.bushing_names
    i = names.index("longitudinal_link_body_right")
    np.testing.assert_allclose(np.asarray(m.elements["bushing"]["k_scale"][i]), [3, 3, 1, 1, 1, 1])
    j = dw_model.topology.p2p_names.index("damper_left")
    np.testing.assert_allclose(np.asarray(m.elements["p2p"]["c_scale"][j]), [1.0, 1.5])
    t = names.index("tie_rod_inner_left")
    assert float(m.elements["bushing"]["k"][t, 2]) == 2e8 and float(m.elements["bushing"]["k"][t, 0]) == float(dw_model.elements["bushing"]["k"][t, 0])


# the jobs of this file run as `python -m sweep` subprocesses on one CPU
# device (AXLE_CPU_DEVICES=1; the device count is part of the compilation
# cache key): all of them are the same program, compiled once by the
# reference run and loaded from the persistent compilation and trace caches
# by the others (each compile of the double wishbone's chunk runner is 1-2
# minutes on 2 cores)
ONE_DEVICE = {"AXLE_CPU_DEVICES": "1"}


