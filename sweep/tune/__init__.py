"""``python -m sweep.tune``: gradient-based tuning of bushing and damper parameters.

Finds parameter values (``parameters``: the same schema as
``sweep.parameters``, bounded, usually ``scale: log``) such that the axle
reaches target K&C metrics and/or target time-response figures, by
minimising the weighted sum of squared normalised errors

    J(theta) = sum_i w_i ((y_i(theta) - target_i) / s_i)^2,
    s_i = |target_i| unless ``scale`` is given,

plus an augmented-Lagrangian term of the ``constraints`` (bounds on other
responses, e.g. keep bump steer within [lo, hi] while brake steer is tuned;
an exterior quadratic penalty whose multipliers are updated between rounds,
:meth:`TuneProblem.objective`), with an optax optimiser (``adam`` or
``lbfgs``) over an unbounded variable z: theta_i = from_unit_i(sigmoid(z_i)),
where from_unit maps [0, 1] onto the bounds linearly or in the logarithm
(``scale: log``). Every evaluation is differentiated exactly:

* K&C metrics (:mod:`kernels.kc`): through the static equilibrium by the
  implicit function theorem (:func:`kernels.statics.implicit_solution`) and
  through the linearisation at the design position;
* time responses: reverse mode through LSRT2 over ``lax.scan`` in
  checkpointed blocks (``LSRT2.simulate(..., checkpoint_block=B)``, :func:`kernels.integrate.simulate`), started
  from the (implicitly differentiated) static equilibrium.

Several starting points are optimised at once (``jax.vmap`` over starts:
start 0 at ``optimizer.start`` or the nominal values, the others a Latin
hypercube over the bounds); the best is kept. A start whose equilibrium
fails or whose objective is not finite keeps its last parameters. Progress
is printed per iteration, each constraint's value and whether it holds at
the start and at the end; the history (objective, parameters, gradient
norm, responses and constraint values per iteration and start) is written
as a zarr dataset at ``output.path``, the final design as
``<path stem>_design.yaml`` beside it.

Modules: :mod:`sweep.tune.problem` (objectives, constraints, responses of
the axle, :class:`TuneProblem`), :mod:`sweep.tune.optimiser` (the generic
batched multi-start optimiser, start points, gradient check),
:mod:`sweep.tune.cli` (:func:`run`, :func:`main`, history and design
output); the names are re-exported here. Response vocabulary and units:
:mod:`sweep.tune.problem`.
"""
from sweep.tune.optimiser import (ARMIJO, OPTIMIZERS, compiled_step,  # noqa: F401
                                  evaluate, gradient_check, make_optimizer, optimise, parameter_point,
                                  start_points)
from sweep.tune.problem import (CONSTRAINT_KEYS, CONSTRAINT_TOLERANCE, CONSTRAINT_WEIGHT,  # noqa: F401
                                OBJECTIVE_KEYS, SIDE_CHOICES, TIME_METRICS, TuneProblem, metric_units,
                                parse_constraints, parse_objectives, targets_from)
from sweep.tune.cli import design_path, final_design, history_dataset, logger, main, run  # noqa: F401
