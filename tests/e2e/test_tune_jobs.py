"""Tuning jobs (python -m sweep.tune): objective gradients against central differences, recovery of six bushing factors, a constraint that binds, and notebooks/02_tuning.ipynb. One problem is traced and compiled once and shared through the trace cache."""
import os
import subprocess
import sys
import numpy as np
import pytest
import xarray as xr
import yaml
import kernels  # noqa: F401  (float64)
from tests.conftest import ROOT
from tests.sweep.tune.test_tune import CONSTRAINED, CONSTRAINT_TOL, PERTURB, RECOVERY_METRICS, SHARED_XLA_FLAGS, TIME_METRICS, TRUTH  # noqa: F401


def _param(name, target, elements, directions=None, bounds=(0.3, 3.0)):
    d = f", directions: [{directions}]" if directions else ""
    return (f"+parameters.{name}={{target: {target}, elements: '{elements}'{d}, "
            f"bounds: [{bounds[0]}, {bounds[1]}], scale: log}}")


def recovery_overrides(iterations, path):
    """The recovery problem: six bushing stiffness factors of the toy axle
    (x, y, z of the front pivot and of the rear mount), targets = the 14 K&C
    metrics and two figures of a short longitudinal step (0.1 s) of the axle
    with the known factors (targets_from), start 50 % off, 2 starts.
    notebooks/02_tuning.ipynb runs the same problem (same compiled program)."""
    over = ["model=toy_trailing_arm", "~parameters", "~objectives", "optimizer.name=lbfgs",
            "optimizer.n_starts=2", f"optimizer.iterations={iterations}", "optimizer.gtol=1e-10",
            f"output.path={path}", "output.overwrite=true"]
    for n in TRUTH:
        over.append(_param(n, "bushing.stiffness", "pivot_front_*" if n.startswith("pf") else "rear_mount_*",
                           n[-1]))
    over += [f"+objectives.{m}={{metric: {m}, target: 1.0}}" for m in RECOVERY_METRICS]
    over += [f"+objectives.{m}={{metric: {m}, side: left, target: 1.0}}" for m in TIME_METRICS]
    over += ["time_response.t_end=0.1", "time_response.step_time=0.02", "time_response.checkpoint_block=25",
             "time_response.wheel_loads={fz: 3500.0}", "time_response.step={fx: -2000.0}",
             "time_response.settle_window=0.02"]
    over += [f"+targets_from.{n}={v!r}" for n, v in TRUTH.items()]
    over += [f"+optimizer.start.{n}={TRUTH[n] * PERTURB[n]!r}" for n in TRUTH]
    return over


@pytest.fixture(scope="module")
def jax_cache(tmp_path_factory):
    """Persistent compilation cache shared by the recovery run and the notebook."""
    return str(tmp_path_factory.mktemp("jax_cache"))


@pytest.fixture(scope="module")
def recovery(tmp_path_factory, jax_cache):
    """One run of python -m sweep.tune: synthetic targets from the known
    factors, gradient check at the start, optimisation from the start."""
    path = tmp_path_factory.mktemp("recovery") / "history.zarr"
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=jax_cache, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               XLA_FLAGS=SHARED_XLA_FLAGS)
    # cache.dir: python -m sweep.tune sets the cache directory itself (entry.setup: cache.dir, else
    # $AXLE_JAX_CACHE_DIR), so JAX_COMPILATION_CACHE_DIR alone would not reach it
    proc = subprocess.run([sys.executable, "-m", "sweep.tune", *recovery_overrides(60, path),
                           "gradient_check.enabled=true", f"cache.dir={jax_cache}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return path, proc


def test_objective_gradients_match_central_differences(recovery):
    """d(response)/d(z) of every objective - the 14 K&C metrics (implicit
    differentiation of the equilibrium) and the two time responses (reverse
    mode through LSRT2, lax.scan over checkpointed blocks, from the
    implicitly differentiated equilibrium) - against central differences of
    the full nonlinear computation (python -m sweep.tune gradient_check)."""
    path, proc = recovery
    errors = yaml.safe_load(xr.open_zarr(path).attrs["gradient_check"])
    assert set(errors) == set(RECOVERY_METRICS + TIME_METRICS)
    for name, err in errors.items():
        assert err < 1e-5, (name, err)
    assert "gradient check peak_bushing_force" in proc.stdout


def test_recovery_of_six_bushing_factors_from_a_perturbed_start(recovery):
    path, proc = recovery
    design = yaml.safe_load(open(str(path)[:-5] + "_design.yaml"))
    got = design["parameters"]
    for n, v in TRUTH.items():
        assert abs(got[n] / v - 1) < 0.01, (n, got[n], v)
        assert abs(PERTURB[n] - 1) >= 0.49                    # the start really was +-50 % off
    for name, o in design["objectives"].items():
        assert o["target"] != 1.0                             # synthetic targets replaced the dummies
        assert o["reached"] == pytest.approx(o["target"], rel=1e-3, abs=1e-6)
    ds = xr.open_zarr(path)
    assert set(ds.data_vars) >= {"objective", "parameter_value", "grad_norm", "response"}
    assert ds.sizes["start"] == 2 and ds.sizes["parameter"] == 6
    np.testing.assert_allclose(ds.parameter_value.values[0, 0], [TRUTH[n] * PERTURB[n] for n in TRUTH])
    J = ds.objective.values[:, ds.attrs["best_start"]]
    assert np.all(np.diff(J) <= 1e-15 * J[0]) and J[-1] < 1e-8 * J[0]   # monotone, converged
    assert "iter" in proc.stdout and "reached" in proc.stdout


@pytest.fixture(scope="module")
def constrained(recovery, jax_cache, tmp_path_factory):
    """The recovery problem with its last objective (settling displacement,
    left wheel) turned into a one-sided bound halfway between its value at
    start 0 and at the unconstrained optimum (the known factors, which the
    recovery run reaches): start 0 is feasible, the unconstrained optimum is
    not. The responses are the same, in the same order, so the compiled
    step is the recovery run's (bounds and multipliers are data of the
    program, like targets): python -m sweep.tune loads the traced program
    from the trace cache and its compilation from the persistent
    compilation cache that the recovery run left; what remains is the
    rounds of <= 60 iterations."""
    rpath, _ = recovery
    ds = xr.open_zarr(rpath)
    i = list(ds.objective_name.values).index(CONSTRAINED)
    at_start = float(ds.response.values[0, 0, i])
    optimum = yaml.safe_load(open(str(rpath)[:-5] + "_design.yaml"))["objectives"][CONSTRAINED]["reached"]
    bound = optimum + 0.5 * (at_start - optimum)
    side = "upper" if at_start < optimum else "lower"
    path = tmp_path_factory.mktemp("constrained") / "history.zarr"
    over = recovery_overrides(60, path)           # per round (optimizer.constraint_rounds: 5)
    over.remove(f"+objectives.{CONSTRAINED}={{metric: {CONSTRAINED}, side: left, target: 1.0}}")
    over.append(f"+constraints.settle={{metric: {CONSTRAINED}, side: left, {side}: {bound!r}}}")
    over.append(f"cache.dir={jax_cache}")
    # the recovery run's XLA flags (part of the compilation cache key: without
    # them the job would choose its default device count and compile again)
    env = dict(os.environ, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", XLA_FLAGS=SHARED_XLA_FLAGS)
    proc = subprocess.run([sys.executable, "-m", "sweep.tune", *over], cwd=ROOT, capture_output=True,
                          text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return path, proc, dict(bound=bound, side=side, at_start=at_start, optimum=optimum)


def test_constraint_holds_where_the_unconstrained_optimum_violates_it(constrained):
    """The constrained run ends on its bound (within CONSTRAINT_TOL |bound|,
    the reported tolerance) while the unconstrained optimum lies 50 % of the
    start's distance beyond it; the objective of the 15 other responses
    still improves (by more than 10x; measured 2.0 -> 0.041), but cannot
    reach 0 as without the constraint (recovery: 1e-24)."""
    path, proc, c = constrained
    bound, sign = c["bound"], (1.0 if c["side"] == "upper" else -1.0)
    tol = CONSTRAINT_TOL * abs(bound)
    # the unconstrained optimum (recovery run) violates the bound by far more than the tolerance
    assert sign * (c["optimum"] - bound) > 100 * tol
    assert sign * (c["at_start"] - bound) < 0                       # start 0 is feasible
    design = yaml.safe_load(open(str(path)[:-5] + "_design.yaml"))
    con = design["constraints"]["settle"]
    assert con["holds"] and con[c["side"]] == bound and con["units"] == "mm"
    assert sign * (con["reached"] - bound) <= tol                   # within the bound (+ tolerance)
    assert abs(con["reached"] - bound) <= tol                       # active: on the bound
    ds = xr.open_zarr(path)
    best = ds.attrs["best_start"]
    track = ds.objective.values[:, best] - ds.penalty.values[:, best]
    assert track[-1] < 0.1 * track[0]                               # the objective still improves ...
    assert track[-1] > 1e-3                                         # ... to a compromise, not to 0
    # J (the tuner's JAX objective) = tracking + augmented-Lagrangian term, both recomputed
    # here from the stored responses and the reported multiplier (numpy)
    mu = con["multiplier"][c["side"]]
    assert mu > 0                                                   # the bound is active
    t, w, s = (ds[k].values for k in ("target", "weight", "scale"))
    y = ds.response.values[-1, best]
    rho, sigma = 1e2, mu / (2 * 1e2)                                # default weight of a constraint
    g = sign * (con["reached"] - bound) / abs(bound)
    assert ds.objective.values[-1, best] == pytest.approx(
        np.sum(w * ((y - t) / s) ** 2) + rho * (max(g + sigma, 0.0) ** 2 - sigma ** 2), rel=1e-9)
    # the history: constraint values per iteration and start, with units and long name
    v = ds["constraint_settle"]
    assert v.dims == ("iteration", "start") and v.attrs["units"] == "mm"
    assert CONSTRAINED in v.attrs["long_name"] and v.attrs[c["side"]] == bound
    assert v.values[-1, best] == con["reached"]
    assert ds.penalty.attrs["units"] == "1" and "constraint term" in ds.penalty.attrs["long_name"]
    assert ds["round"].dims == ("iteration",) and ds["round"].values[-1] == design["rounds"] - 1
    assert CONSTRAINED not in list(ds.objective_name.values)
    # logged at the start (start 0 holds) and at the end
    out = proc.stdout
    assert "constraints at start 0" in out and "constraints at the end" in out
    assert "optimisation step: traced program from the trace cache" in out      # not traced again
    start_line = out.split("constraints at start 0")[1].splitlines()[1]
    end_line = out.split("constraints at the end")[1].splitlines()[1]
    assert "settle" in start_line and start_line.rstrip().endswith("holds")
    assert "settle" in end_line and ": holds" in end_line


@pytest.mark.notebook
def test_tuning_notebook_executes(recovery, jax_cache, tmp_path, monkeypatch):
    """notebooks/02_tuning.ipynb runs top to bottom on the small recovery
    problem (it reuses the compiled program through the persistent cache)."""
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(os.path.join(ROOT, "notebooks", "02_tuning.ipynb"), as_version=4)
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", jax_cache)
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    monkeypatch.setenv("XLA_FLAGS", SHARED_XLA_FLAGS)
    monkeypatch.setenv("AXLE_TUNE_DIR", str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    import re
    from tests.e2e.test_sweep_jobs import notebook_outputs
    text, png = notebook_outputs(nb)
    assert "reached" in text and png >= 3            # figures are kept in the executed notebook
    m = re.search(r"recovered to (\S+) \(relative\)", text)
    assert m is not None, text[-2000:]
    assert float(m.group(1)) < 0.01                  # the truth recovered to 1 %
