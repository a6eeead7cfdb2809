"""Shared, session-scoped fixtures: the double-wishbone and multi-link models and
their equilibria are built and compiled once per test session (compiled
functions such as ``sweep.kinds.time_response.lsrt2_run`` are cached by their static
arguments, so tests that call them alike share one compilation)."""
import os
import sys
import tempfile

# the job entry points run LAPACK single-threaded (sweep.runtime.single_threaded_lapack);
# so do the tests, whose in-process references are compared bitwise with
# `python -m sweep` subprocesses (OpenBLAS's threads change the round-off of
# a dense solve). Set before NumPy / SciPy load their OpenBLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest
import yaml

# `python -m sweep` subprocesses of the tests share one persistent compilation
# cache of their own (not the user's ~/.cache/axle-sweep/jax)
os.environ.setdefault("AXLE_JAX_CACHE_DIR", os.path.join(tempfile.gettempdir(), "axle-sweep-tests-jax-cache"))

import kernels  # noqa: F401  (float64)
import jax.numpy as jnp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the repository root on sys.path also under a plain `pytest` (not only
# `python -m pytest` from the root): tests import `tests.*` and the
# repository-only `validation` package (not installed with kernels/sweep)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
CHECK_CUBE = os.path.join(SHARED, "tools", "check_cube.py")


def load_model_cfg(name="double_wishbone"):
    with open(os.path.join(ROOT, "configs", "model", f"{name}.yaml")) as f:
        return yaml.safe_load(f)


@pytest.fixture(scope="session")
def dw_tables():
    from sweep.model_builder import build_tables
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
    from sweep.model_builder import build_tables
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


def step_runs_against_radau(model, exc, r_eq, **radau_kw):
    """LSRT2 (h = 1 ms, block solver) and the Radau reference over 4.9-6.0 s from
    the equilibrium r_eq: (t, lsrt2 channels, reference channels)."""
    import jax
    from sweep.kinds.time_response import lsrt2_run, make_channels
    channels = make_channels()
    from kernels.radau import solve as radau
    t = 4.9 + np.arange(1101) * 1e-3
    lsrt2 = lsrt2_run(model, exc, r_eq, 4.9, 1e-3, n_samples=1101, every=1, relinearise_every=1)
    _, r, v = radau(model, exc, r_eq, jnp.zeros_like(r_eq), t, **radau_kw)
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
