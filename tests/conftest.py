"""Shared, session-scoped fixtures: the double-wishbone and multi-link models and
their equilibria are built and compiled once per test session (compiled
functions such as ``kernels.response.solve`` are cached by their static
arguments, so tests that call them alike share one compilation).

Test tiers (markers registered in pyproject.toml; a test's tier is given by
its folder or by one ``pytestmark`` at the top of its file, see
``_tier_of`` below):

* fast: everything else - the default ``python -m pytest`` (pyproject's
  ``addopts``: ``-m "not e2e and not slow and not validation"``);
* ``e2e`` (tests/e2e/): runs a job in a subprocess or a whole CLI / app job
  in-process, or executes a notebook (labelled ``notebook``);
* ``slow``: too long for the fast tier, run by CI after it (reduced forms of
  the long validations among them);
* ``validation``: long accuracy validations in their full form, on demand:
  ``python -m pytest -m validation``.

``.ci/run`` runs the fast tier, then ``-m "e2e or slow"``; everything:
``python -m pytest -m ""``.
"""
import os
import sys
import tempfile

# the job entry points run LAPACK single-threaded (sweep.core.runtime.single_threaded_lapack);
# so do the tests, whose in-process references are compared bitwise with
# `python -m sweep` subprocesses (OpenBLAS's threads change the round-off of
# a dense solve). Set before NumPy / SciPy load their OpenBLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# Every test run compiles XLA's CPU code at LLVM optimisation level 0 and
# with XLA's older elemental emitter for fusions instead of its MLIR fusion
# emitters: the suite is dominated by compiling many programs once each.
# Level 0 compiles them in about half the time (the fast tier 5:27 -> under
# 5 min on 2 cores; the double wishbone's K&C finite-difference file 215 ->
# 145 CPU-s); the elemental emitter takes another 40 % off a compile (the toy
# axle's static equilibrium by blocks: 5.9 -> 3.4 s; BENCHMARKS.md, "The
# suite's compiles"). The floating-point semantics are LLVM's either way (no
# fast-math), so results are those of the optimised build; the jobs users
# run keep XLA's defaults. Read by XLA when its CPU client starts, after this
# hook; inherited by the xdist workers and the job subprocesses. An
# XLA_FLAGS that sets either flag itself is left as it is for that flag
# (XLA_FLAGS="--xla_backend_optimization_level=3 --xla_cpu_use_fusion_emitters=true"
# runs the suite with XLA's default code).
TEST_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"


def pytest_configure(config):
    if "AXLE_TEST_RSS_LOG" not in os.environ:     # the xdist workers inherit it (RSS_ENV below)
        os.environ["AXLE_TEST_RSS_LOG"] = tempfile.mkdtemp(prefix="axle-test-rss-")
    flags = os.environ.get("XLA_FLAGS", "")
    for flag in TEST_XLA_FLAGS.split():
        if flag.partition("=")[0] not in flags:
            flags = f"{flags} {flag}".strip()
    os.environ["XLA_FLAGS"] = flags


import numpy as np  # noqa: E402
import pytest
import yaml

# integrator.backend=auto (the default) means XLA in the tests and their job
# subprocesses: their references are XLA's, compared bitwise, and a test job
# that generated C would compile its own library (30-60 s each). The generated
# backend has its own tests (tests/sweep/test_codegen.py, which name it), and
# tests/e2e/test_app.py runs the default job without this pin.
os.environ.setdefault("AXLE_AUTO_BACKEND", "xla")

# `python -m sweep` subprocesses of the tests share one persistent compilation
# cache of their own (not the user's ~/.cache/axle-sweep/jax)
os.environ.setdefault("AXLE_JAX_CACHE_DIR", os.path.join(tempfile.gettempdir(), "axle-sweep-tests-jax-cache"))

import kernels  # noqa: F401  (float64)
import jax
import jax.numpy as jnp

# the in-process tests use a persistent compilation cache as well (compilations
# of 1 s or more, as sweep.core.runtime.setup), one directory per pytest-xdist
# worker: the rest tier's worker gw0 loads what gw0 compiled in the fast tier,
# and no two processes write and read one in-process cache at the same time
# (JAX writes an entry in place, not atomically). A `python -m sweep`
# subprocess sets its CPU device count in XLA_FLAGS, part of the cache key;
# the subprocesses share AXLE_JAX_CACHE_DIR itself.
_INPROC_CACHE = os.path.join(os.environ["AXLE_JAX_CACHE_DIR"], "in-process-" + os.environ.get("PYTEST_XDIST_WORKER", "main"))
os.makedirs(_INPROC_CACHE, exist_ok=True)
jax.config.update("jax_compilation_cache_dir", _INPROC_CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the repository root on sys.path also under a plain `pytest` (not only
# `python -m pytest` from the root): tests import `tests.*` and the
# repository-only `validation` package (not installed with kernels/sweep)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
CHECK_CUBE = os.path.join(SHARED, "tools", "check_cube.py")


def pytest_sessionstart(session):
    """A crash (segmentation fault) dumps the crashing thread's stack only:
    short enough to survive a truncated CI log (pytest's own faulthandler
    dumps every thread, the idle ones of zarr, tqdm and the thread pool
    first)."""
    import faulthandler
    faulthandler.enable(file=sys.__stderr__, all_threads=False)


@pytest.fixture(scope="module", autouse=True)
def _free_compiled_programs(request):
    """After each test file, drop JAX's in-memory compiled programs: a
    worker otherwise grows to 6-7 GB by the end of the rest tier, and two
    such workers plus a job subprocess approach the 24 GB of the CI
    machine (a worker died without a Python fault there, 2026-11-26). What
    a later file needs again is read back from the persistent cache.
    The worker's resident memory after each file and its peak are logged
    (printed at the end of the run: ``pytest_terminal_summary``)."""
    yield
    jax.clear_caches()
    _log_memory(request.node.nodeid)


RSS_ENV = "AXLE_TEST_RSS_LOG"     # a folder: one memory log per pytest process (worker)


def _status_kb(field):
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))
    except (OSError, StopIteration, ValueError):
        return None


def _log_memory(where):
    """Append (file, resident kB now, peak resident kB) to this process's log."""
    folder = os.environ.get(RSS_ENV)
    now, peak = _status_kb("VmRSS"), _status_kb("VmHWM")
    if not folder or now is None:
        return
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(folder, f"{name}.tsv"), "a") as f:
        f.write(f"{where}\t{now}\t{peak}\n")


def pytest_terminal_summary(terminalreporter):
    """The largest resident memory of each test process (xdist worker) and
    the test file after which it was reached: a worker must stay under
    4 GB (two workers and a job subprocess share the 24 GB machine)."""
    folder = os.environ.get(RSS_ENV)
    if not folder or not os.path.isdir(folder) or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    lines = []
    for log in sorted(os.listdir(folder)):
        rows = [line.rstrip("\n").split("\t") for line in open(os.path.join(folder, log)) if line.strip()]
        if rows:
            where, now, peak = max(rows, key=lambda r: int(r[1]))
            lines.append(f"{log[:-4]}: peak resident {int(rows[-1][2]) / 2**20:.2f} GiB; largest after a file "
                         f"{int(now) / 2**20:.2f} GiB ({where}); {len(rows)} files")
    if lines:
        terminalreporter.write_sep("-", "test process memory")
        for line in lines:
            terminalreporter.write_line(line)


def load_model_cfg(name="double_wishbone"):
    with open(os.path.join(ROOT, "configs", "model", f"{name}.yaml")) as f:
        return yaml.safe_load(f)


@pytest.fixture(scope="session")
def dw_tables():
    from sweep.axle.builder import build_tables
    return build_tables(load_model_cfg())


@pytest.fixture(scope="session")
def dw_model(dw_tables):
    from kernels.model import build_model
    return build_model(dw_tables)


@pytest.fixture(scope="session")
def step_excitation():
    """The longitudinal_step load case of method.md section 3."""
    from kernels import loads
    u0 = np.zeros((2, 6))
    u0[:, 2] = 5000.0
    amp = np.zeros((2, 6))
    amp[:, 0] = -2500.0
    return loads.excitation(u0, [(5.0, 0.0, amp)])


@pytest.fixture(scope="session")
def dw_equilibrium(dw_model, step_excitation):
    from kernels import loads
    from kernels.statics import equilibrium
    return equilibrium(dw_model, loads.u_at(step_excitation, 4.9))


@pytest.fixture(scope="session")
def ml_cfg():
    return load_model_cfg("multilink")


@pytest.fixture(scope="session")
def ml_model(ml_cfg):
    from kernels.model import build_model
    from sweep.axle.builder import build_tables
    return build_model(build_tables(ml_cfg))


@pytest.fixture(scope="session")
def ml_equilibrium(ml_model, step_excitation):
    from kernels import loads
    from kernels.statics import equilibrium
    return equilibrium(ml_model, loads.u_at(step_excitation, 4.9))


def random_state(model, seed=0, dr=0.003, da=0.02, dv=0.05, dw=0.5):
    """A perturbed, moving state near the design position."""
    rng = np.random.default_rng(seed)
    m = model.topology.n_bodies
    r = np.asarray(model.r_design) + np.hstack([rng.normal(0, dr, (m, 3)), rng.normal(0, da, (m, 3))])
    v = np.hstack([rng.normal(0, dv, (m, 3)), rng.normal(0, dw, (m, 3))])
    return jnp.asarray(r), jnp.asarray(v)


def step_runs_against_radau(name, model, exc, r_eq, **radau_kw):
    """LSRT2 (h = 1 ms, block solver) and the Radau reference over 4.9-6.0 s from
    the equilibrium r_eq: (t, lsrt2 channels, reference channels). The
    reference is the stored one ``name`` where it still solves this problem
    (tests/radau_store.py)."""
    import jax
    from kernels.response import Options, Problem, make_outputs as make_channels, solve
    from tests.radau_store import radau_reference
    channels = make_channels()
    t = 4.9 + np.arange(1101) * 1e-3
    lsrt2 = solve(Problem(model, exc, 4.9, 1e-3), Options(n_samples=1101, every=1, relinearise_every=1), r_eq)
    _, r, v = radau_reference(name, model, exc, r_eq, jnp.zeros_like(r_eq), t, **radau_kw)
    ref = jax.vmap(lambda rr, vv: channels(model, rr, vv, r_eq))(jnp.asarray(r), jnp.asarray(v))
    return t, lsrt2, ref


def single_mount_tables():
    """A 2 kg body on one 6-direction bushing to ground (a toy model for
    gradient and memory tests of the integration)."""
    inertia = [[0.05, 0.0, 0.0], [0.0, 0.08, 0.0], [0.0, 0.0, 0.11]]
    return {"name": "mount", "gravity": [0, 0, -9.81],
            "bodies": [{"index": 1, "name": "b", "mass": 2.0, "inertia": inertia, "position": [0.0, 0.0, 0.0]}],
            "markers": [{"index": 1, "name": "g", "body": 0, "position": [0.05, 0, 0]},
                        {"index": 2, "name": "b", "body": 1, "position": [0.05, 0, 0]}],
            "bushings": [{"index": 1, "name": "mount", "marker_1": 2, "marker_2": 1,
                          "stiffness": [2e4, 3e4, 4e4, 50, 60, 70], "damping": [20, 20, 20, 0.1, 0.1, 0.1]}],
            "p2p": [], "wheels": {"left": 1, "right": 1}}


# ----------------------------------------------------------------------------- test tiers
# A test's tier is given by its folder or by ONE marker at the top of its
# file (``pytestmark = pytest.mark.slow``), never per test: tests/e2e/ is the
# e2e tier; elsewhere a file is in the fast tier unless its ``pytestmark``
# names ``slow`` or ``validation``. ``notebook`` labels the tests that
# execute a notebook (they are e2e tests; ``-m notebook`` selects them).
#   fast        the default ``python -m pytest``
#   e2e, slow   the rest of CI (``-m "e2e or slow"``)
#   validation  long accuracy validations in their full form, on demand
#               (``-m validation``); CI runs their reduced forms (slow tier)
TIER_MARKERS = ("e2e", "slow", "validation")
FOLDER_TIERS = {"e2e": "e2e"}
TESTS = os.path.join(ROOT, "tests")


def _tier_of(item):
    """The tier of a test from its folder and its module's ``pytestmark``; a
    tier marker on a test function, class or parameter is an error."""
    own = [m.name for m in item.own_markers if m.name in TIER_MARKERS]
    cls = getattr(item, "cls", None)
    own += [m.name for m in getattr(cls, "pytestmark", []) if m.name in TIER_MARKERS]
    if own:
        raise pytest.UsageError(f"{item.nodeid}: tier marker {own[0]!r} on a test; a tier is given by the "
                                "test's folder or by one pytestmark at the top of its file (tests/conftest.py)")
    marks = getattr(item.module, "pytestmark", [])
    marks = marks if isinstance(marks, list) else [marks]
    in_file = [m.name for m in marks if m.name in TIER_MARKERS]
    folder = FOLDER_TIERS.get(os.path.relpath(str(item.path), TESTS).split(os.sep)[0])
    tiers = set(in_file) | ({folder} if folder else set())
    if len(tiers) > 1:
        raise pytest.UsageError(f"{item.path}: more than one tier ({', '.join(sorted(tiers))}) from its folder "
                                "and its pytestmark")
    return tiers.pop() if tiers else "fast"


# test files with the longest runs go first (file basenames, longest first;
# the rest of CI, then the fast tier): pytest-xdist's ``--dist loadfile``
# hands out whole files in collection order (``--no-loadscope-reorder`` in
# pyproject's addopts; by default it would order files by their number of
# tests), so a long file started last would run on alone while the other
# worker idles (longest-processing-time-first scheduling). Worker seconds of
# a fresh-clone run on 2 cores (2026-11-28, before XLA's level 0 reached the
# rest of CI; benchmarks/suite_costs.py):
LONGEST_FIRST = ["test_tune_jobs.py",              # 653: recovery run (trace + compile once), constrained run, notebook
                 "test_codegen_axles.py",          # ~435: generated C of the double wishbone and the twist beam, every method
                 "test_sweep_jobs.py",             # 306
                 "test_tune_hardpoint_example.py", # ~250: the double wishbone's hardpoint tuning, its notebook
                 "test_saltelli_jobs.py",          # ~170: Saltelli jobs, notebook 01's sensitivity section
                 "test_app.py",                    # 271
                 "test_kc_geometry_axles.py",      # ~250
                 "test_methods_orders.py",         # ~236
                 "test_leaf_spring_axle.py",       # ~174
                 "test_faults.py",                 # ~160
                 "test_kc_finite_differences.py",  # ~124
                 "test_state_events_rigs.py", "test_axle_kinematics.py", "test_modes_job.py", "test_tracecache.py",
                 "test_validation.py", "test_twist_beam_axle.py", "test_exudyn.py", "test_lsrt2_gradient.py",
                 "test_kc_jobs.py", "test_reproduce_two_devices.py", "test_channel_job.py", "test_blocks_axles.py",
                 "test_reproduce.py", "test_diagnosis_jobs.py", "test_hardpoint_gradients.py",
                 # the fast tier (worker seconds of a fresh-cache run on a slow day, 2026-11-30)
                 "test_blocks.py",         # 58
                 "test_inputs.py",         # 44
                 "test_kc.py",             # 38
                 "test_group_input.py", "test_dynamics.py", "test_frf.py", "test_road.py",   # 28 - 23
                 "test_state_events.py", "test_flexible.py", "test_sweep.py",
                 "test_diagnose.py", "test_lsrt2.py", "test_codegen.py"]


@pytest.hookimpl(tryfirst=True)       # before the -m selection of pytest's mark plugin
def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = _tier_of(item)
        if tier != "fast" and item.get_closest_marker(tier) is None:
            item.add_marker(tier)
    # the files of LONGEST_FIRST first, the others by their number of tests
    # (xdist's own order otherwise); a stable sort by file: files stay whole
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    count = {}
    for item in items:
        count[item.path] = count.get(item.path, 0) + 1
    items.sort(key=lambda i: (rank.get(os.path.basename(str(i.path)), len(rank)), -count[i.path], str(i.path)))
