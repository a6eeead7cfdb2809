"""Gradient-based tuning (sweep/tune.py): exact gradients of equilibrium-based
and time-response objectives against central differences (the memory of the
checkpointed reverse pass: tests/kernels/test_checkpoint.py), recovery of known bushing scale factors by
``python -m sweep.tune``, bad configs, and notebooks/02_tuning.ipynb.

Compilation is the cost here, so one problem (the toy axle, six bushing
factors, K&C and time-response objectives) is traced and compiled once: the
gradient check, the recovery run, the constrained run and the notebook
share it through the trace cache and the persistent compilation cache
(targets, weights, bounds and multipliers are data of the compiled step)."""
import os

import pytest

import kernels  # noqa: F401  (float64)
from tests.conftest import ROOT, TEST_XLA_FLAGS


def tune_cfg(*over):
    from hydra import compose, initialize_config_dir
    with initialize_config_dir(config_dir=os.path.join(ROOT, "configs"), version_base="1.3"):
        return compose(config_name="tune", overrides=list(over))


# --------------------------------------------------------------------------- bad config

@pytest.mark.parametrize("override, message", [
    ("objectives.toe_braking.metric=toe_per_brake", "objectives.toe_braking.metric = 'toe_per_brake' is not"),
    ("+objectives.toe_braking.side=both", "objectives.toe_braking.side = 'both' is not one of left, right, mean"),
    ("objectives.toe_braking.target=0.0", "objectives.toe_braking.scale = None: needs a positive normalisation"),
    ("+optimizer.start.spring=1.0", "optimizer.start.spring: not a tuned parameter"),
    ("+parameters.tie_rod_z={target: hardpoint, points: [QQ], axis: z, bounds: [-0.01, 0.01]}",
     "parameters.tie_rod_z.points: 'QQ' matches no hardpoint of model 'double_wishbone'"),
    ("optimizer.name=sgd", "optimizer.name = 'sgd' is not one of adam, lbfgs"),
    ("parameters.upper_arm_radial.bounds=[2.0,0.5]", "parameters.upper_arm_radial.bounds = [2.0, 0.5] are reversed"),
    # constraints
    ("+constraints.bs={metric: bump_stear, upper: 3.0}", "constraints.bs.metric = 'bump_stear' is not a K&C metric"),
    ("+constraints.bs={metric: bump_steer, lower: 3.0, upper: 2.0}",
     "constraints.bs.lower = 3.0: must be <= constraints.bs.upper = 2.0"),
    ("+constraints.bs={metric: bump_steer, upper: nan}", "constraints.bs.upper = nan: must be a finite number"),
    ("+constraints.bs={metric: bump_steer, lower: -inf}", "constraints.bs.lower = -inf: must be a finite number"),
    ("+constraints.bs={metric: bump_steer}", "constraints.bs: give lower and/or upper"),
    ("+constraints.bs={metric: bump_steer, side: both, upper: 1.0}", "constraints.bs.side = 'both' is not one of"),
    ("+constraints.bs={metric: bump_steer, upper: 1.0, weight: 0}", "constraints.bs.weight = 0: must be > 0"),
    ("+constraints.bs={metric: bump_steer, upper: 0.0}", "constraints.bs.scale = null: the bounds are 0"),
    ("+constraints.bs={metric: bump_steer, max: 1.0}", "constraints.bs.max: unknown key"),
    ("+constraints.toe_braking={metric: bump_steer, upper: 1.0}",
     "constraints.toe_braking: the name is taken by objectives.toe_braking"),
])
def test_bad_tune_config_is_one_line_before_compute(override, message, capsys, tmp_path):
    from sweep.tune import main
    cfg = tune_cfg(override, f"output.path={tmp_path}/h.zarr")
    assert main(cfg, progress=False) == 2
    err = capsys.readouterr().err.strip()
    assert message.replace("sweep.", "") in err.replace("sweep.", "") and len(err.splitlines()) == 1, err
    assert not os.path.exists(tmp_path / "h.zarr")


def test_a_tune_problem_built_from_python_names_a_zero_step():
    """``TuneProblem`` from a script (no command-line schema check): a time
    step of 0 is one error naming the field, not a division by zero."""
    from sweep.core.config import ConfigError
    from sweep.tune.problem import TuneProblem
    cfg = tune_cfg("model=toy_trailing_arm", "~parameters", "~objectives", "~constraints",
                   "+parameters.pf={target: bushing.stiffness, elements: 'pivot_front_*', directions: radial, "
                   "bounds: [0.5, 2.0]}",
                   "+objectives.peak={metric: peak_bushing_force, target: 1000.0, scale: 1000.0}",
                   "time_response.dt=0.0")
    with pytest.raises(ConfigError, match=r"time_response.dt = 0.0: must be > 0 \[s\]"):
        TuneProblem(cfg)


# --------------------------------------------------------------------------- recovery by python -m sweep.tune

TRUTH = {"pf_x": 1.3, "pf_y": 0.8, "pf_z": 1.5, "rm_x": 0.7, "rm_y": 1.2, "rm_z": 0.9}
PERTURB = {"pf_x": 1.5, "pf_y": 0.5, "pf_z": 0.5, "rm_x": 1.5, "rm_y": 0.5, "rm_z": 1.5}   # +-50 %
RECOVERY_METRICS = ["bump_steer", "camber_gain", "wheel_rate", "toe_per_lateral_force",
                    "camber_per_lateral_force", "lateral_compliance", "toe_per_traction_force",
                    "camber_per_traction_force", "longitudinal_compliance", "toe_per_braking_force",
                    "camber_per_braking_force", "longitudinal_compliance_braking",
                    "toe_per_aligning_torque", "camber_per_aligning_torque"]
TIME_METRICS = ["peak_bushing_force", "settling_displacement"]


# the XLA flags are part of the compilation cache key: the recovery run and the
# notebook's kernel get the same ones (the job would otherwise set its device
# count, the kernel none), so that the notebook loads the optimiser step
# compiled by the recovery run (a 3-minute compilation on 2 cores)
SHARED_XLA_FLAGS = "--xla_force_host_platform_device_count=1 " + TEST_XLA_FLAGS


# --------------------------------------------------------------------------- constraints (side-effect bounds)

CONSTRAINED = "settling_displacement"      # the recovery problem's last response (time response, left)
CONSTRAINT_TOL = 1e-3                       # relative to |bound|: the default tolerance of a constraint


def test_constraint_errors_are_config_errors():
    from sweep.core.config import ConfigError
    from sweep.tune import parse_constraints
    with pytest.raises(ConfigError, match=r"^constraints.c.lower = 2.0: must be <= constraints.c.upper = 1.0$"):
        parse_constraints({"c": {"metric": "bump_steer", "lower": 2.0, "upper": 1.0}})
    with pytest.raises(ConfigError, match=r"^constraints.c.metric = 'steer' is not a K&C metric"):
        parse_constraints({"c": {"metric": "steer", "upper": 1.0}})
    c, = parse_constraints({"c": {"metric": "compliance.x.fx", "side": "left", "lower": -2.0, "upper": 0.5}})
    assert (c["scale"], c["tolerance"], c["weight"], c["compliance"]) == (2.0, 2e-3, 1e2, (0, 0))


# --------------------------------------------------------------------------- notebook

