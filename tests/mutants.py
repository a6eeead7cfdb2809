#!/usr/bin/env python
"""Mutation run: do the tests fail when the physics is wrong?

Each mutant is a deliberate bug (a sign, a factor, a frame) in kernels/ and
names the tests that should catch it. Run by hand, not by CI (pytest collects
only ``test_*.py``, so this file is never collected):

    .venv/bin/python tests/mutants.py --list                 # mutants, whether each still applies
    .venv/bin/python tests/mutants.py                        # every mutant against the fast tier
    .venv/bin/python tests/mutants.py --tier all             # ... against every listed test
    .venv/bin/python tests/mutants.py --only a21_055 --only 'kc_*'
    .venv/bin/python tests/mutants.py --only a21_055 --tests tests/kernels/test_lsrt2.py
    .venv/bin/python tests/mutants.py --all --markdown /tmp/table.md
    .venv/bin/python tests/mutants.py --baseline --only 'kc_*'   # check the tests pass unmutated first

Tiers: by default the listed tests run as the default ``python -m pytest``
selects them (the fast tier, pyproject's ``addopts``: ``-m "not e2e and not
slow and not validation"``); a listed test outside that tier is
deselected and noted. Every mutant must be caught in the fast tier.
``--tier all`` (``-m ""``) runs the e2e / slow / validation tests of the
lists too.

Each mutant is a list of source edits ``(file, exact old text, new text,
count)``: the old text must occur exactly ``count`` times (default 1) in the
current file, else the mutant is reported **stale** (the code it targets
changed: update the mutant), never silently skipped.

Nothing in the working tree is touched. The tree (without .venv, outputs,
.git, caches) is copied into a temporary directory per worker; a
mutant is applied there, the tests listed for it run there with this Python
(``python -m pytest`` with cwd, ``--rootdir`` and ``PYTHONPATH`` = the copy;
a preflight checks that ``kernels``, ``sweep`` and ``tests.conftest`` are
imported from the copy and not from the editable install), and the copy is
restored from the pristine one.

For each mutant the tests run in the order listed (cheap ones first) with
``-x -q -n 0 -p no:cacheprovider``; the first failing test is the one that
*caught* it (``--all``: no ``-x``, every failing test of the list is shown).
A test file named in a list that does not exist is skipped with a note. A
node id that pytest cannot find is reported, not fatal. Results: ``caught``
(a test failed or errored in setup), ``survived`` (all selected tests of the
list passed), ``stale`` (the mutant no longer applies), ``timeout``,
``error`` (pytest could not run, e.g. collection error: see the log).
docs/mutation.md holds the last run's table.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTEST_ARGS = ["-x", "-q", "-n", "0", "-p", "no:cacheprovider"]
DEFAULT_TIMEOUT = 900          # s per mutant


@dataclasses.dataclass
class Mutant:
    name: str
    what: str
    edits: list          # (file, old, new) or (file, old, new, count)
    tests: list          # pytest node ids / files, or "path -k expr", cheapest first
    timeout: int = DEFAULT_TIMEOUT


ENERGY_GRAD = "tests/kernels/test_energy.py::test_energy_oracle_forces_are_its_gradient"
ENERGY_DAMPED = "tests/kernels/test_energy.py::test_damped_axle_energy_balance"
ENERGY_CONSERVED = "tests/kernels/test_energy.py::test_undamped_axle_conserves_energy_short"
P2P = "tests/kernels/test_p2p_analytic.py"
CODEGEN_SMALL = "tests/sweep/codegen/test_codegen.py::test_control_flow_and_variable_indexing_equal_xla"
CODEGEN_TOY = "tests/sweep/codegen/test_codegen_axles.py::test_generated_equals_xla_for_every_fixed_step_method[1-lsrt2]"
VALID_ORDER = "tests/validation/test_orders_double_wishbone.py::test_lsrt2_order_on_the_double_wishbone_step"
VALID_NMSE = "tests/kernels/test_validation.py::test_nmse_against_radau_within_published"
VALID_RESP = "tests/kernels/test_validation.py::test_response_is_a_weakly_damped_oscillation_settling_at_a_few_mm"
ML_NMSE = "tests/validation/test_multilink_step_full.py::test_nmse_against_radau_within_published"
ML_BALANCE = "tests/kernels/test_multilink.py::test_static_equilibrium_force_and_moment_balance"
KC_HAND = "tests/kernels/test_kc.py::test_linear_toy_axle_matches_hand_computed_compliance"
KC_FD = "tests/validation/test_kc_double_wishbone_fd.py::test_double_wishbone_metrics_match_finite_difference_loading"
KC_FD_TOY_TRAVEL = "tests/kernels/test_kc_finite_differences.py::test_toy_travel_metrics_match_finite_differences_in_both_modes"
KC_TOY_DECOUPLED = "tests/kernels/test_kc.py::test_toy_sides_are_decoupled_so_roll_equals_parallel_travel"
KC_SYM = "tests/kernels/test_kc.py::test_compliance_is_symmetric_for_conservative_elements"
KC_FDTOY = "tests/kernels/test_kc.py::test_compliance_matrix_matches_finite_difference_loading"
EXUDYN_EIG = "tests/validation/test_exudyn.py::test_eigenvalues_matched"
LSRT2 = "tests/kernels/test_lsrt2.py"
LSRT2_NONLIN = "tests/kernels/test_lsrt2.py::test_order_two_on_nonlinear_rigid_body"
LSRT2_K = "tests/kernels/test_lsrt2.py::test_model_system_K_is_the_velocity_jacobian_of_the_rates"

KC_SIGN_TESTS = [KC_HAND, KC_TOY_DECOUPLED, KC_FD_TOY_TRAVEL, KC_FD, KC_SYM, "tests/kernels/test_multilink.py::test_equilibrium_is_symmetric_near_design_and_stops_are_clear",
                 "tests/kernels/test_model.py::test_equilibrium_is_mirror_symmetric_and_near_design"]

EVENTS = "tests/kernels/test_methods.py -k keeps_its_order"
EVENTS_ON_GRID = ("tests/kernels/test_methods.py::test_every_method_keeps_its_order_through_load_steps_"
                  "and_ramp_corners[ros34pw2-step_on_grid]")
EVENTS_OFF_GRID = ("tests/kernels/test_methods.py::test_every_method_keeps_its_order_through_load_steps_"
                   "and_ramp_corners[ros34pw2-ramp_and_step_off_grid]")
STATE = "tests/kernels/test_state_events.py"
STATE_ORDER = STATE + "::test_order_is_kept_through_contact_and_lift_off"
STATE_CONTACT = STATE + "::test_contact_time_is_located_to_1e_9_s"
STATE_FRICTION = STATE + "::test_coulomb_friction_stick_slip_on_one_coordinate"
STATE_LANES = STATE + "::test_lanes_with_and_without_events_are_independent"
STATE_RIGS = "tests/kernels/test_state_events_rigs.py"
STATE_MODEL = [STATE_RIGS + "::test_model_stop_with_clearance_keeps_the_order_and_radau_agrees",
               STATE_RIGS + "::test_damper_coulomb_friction_against_the_analytic_stick_slip"]
REPRO = "tests/sweep/test_reproduce.py"
REPRO_TESTS = ["tests/sweep/engine/test_stream_order.py",
               REPRO + "::test_resumed_cube_parameters_reproduce_its_results",
               "tests/sweep/test_reproduce_kc.py::test_kc_cube_parameters_reproduce_its_results",
               "tests/e2e/test_reproduce_two_devices.py::test_two_device_time_response_cube_parameters_reproduce_its_results"]

MUTANTS = [
    # values as run-time inputs (sweep.engine.values) and hardpoint designs
    Mutant("values_vehicle_not_structure", "vehicle data (read while tracing) left out of the program's key: "
           "a changed wheelbase would reuse a stale program",
           [("kernels/model.py", 'TRACED_TABLES = ("steering_joints", "travel_lock", "vehicle", "reference_bushings")',
             'TRACED_TABLES = ("steering_joints", "travel_lock", "reference_bushings")')],
           ["tests/sweep/engine/test_values.py::test_a_changed_structure_changes_the_key"]),
    Mutant("frf_damping_dropped", "frequency response without the velocity Jacobian (no damping)",
           [("kernels/frf.py", "        A = (-(w ** 2) * eye - JrK).astype(jnp.complex128) - 1j * w * lin.J_v",
             "        A = (-(w ** 2) * eye - JrK).astype(jnp.complex128)")],
           ["tests/kernels/test_frf.py"]),
    Mutant("frf_mount_damping_force_dropped", "frequency response: a mount's force without its damping part",
           [("kernels/frf.py", "        bf = ((Fr @ dr + Fv @ dv)", "        bf = ((Fr @ dr)")],
           ["tests/kernels/test_frf.py"]),
    Mutant("p2p_stop_damping_accepted", "model file: a stop's damping accepted (it acts at every length)",
           [("kernels/forces.py", '"bump_stop": ("stiffness", "preload", "damping", "seat_offset"),',
             '"bump_stop": ("stiffness", "preload", "seat_offset"),')],
           ["tests/sweep/axle/test_model_file_checks.py"]),
    Mutant("suffixed_body_in_per_side_element", "model file: `wheel_left` in a per-side element ties both sides "
           "to the left wheel silently",
           [("sweep/axle/builder.py", "        if suffix and isinstance(ref, str) and _without_side(ref) != ref",
             "        if False and suffix and isinstance(ref, str) and _without_side(ref) != ref")],
           ["tests/sweep/axle/test_model_file_checks.py"]),
    Mutant("macpherson_guides_not_free_axially", "the strut's sliding joint stiff along its axis",
           [("configs/model/macpherson.yaml", "    stiffness: [2.0e+7, 2.0e+7, 0.0, 200.0, 200.0, 5.0]",
             "    stiffness: [2.0e+7, 2.0e+7, 2.0e+5, 200.0, 200.0, 5.0]")],
           ["tests/kernels/test_macpherson.py"]),
    Mutant("hardpoint_right_side_not_moved", "a hardpoint offset moves the left side's point only",
           [("sweep/axle/builder.py", "            if side not in (\"both\", s):",
             "            if side not in (\"both\", s) or s == \"right\":")],
           ["tests/sweep/axle/test_hardpoints.py"]),
    Mutant("values_python_floats_folded", "a scalar value (K&C loaded radius, brake lock) compiled in: a "
           "changed value recompiles",
           [("sweep/engine/values.py", "    if isinstance(leaf, (float, np.floating)):\n        return True",
             "    if isinstance(leaf, (float, np.floating)):\n        return False")],
           ["tests/sweep/engine/test_values.py::test_lifted_tree_round_trips_and_keeps_integers_in_the_structure"]),
    # hardpoints as tuning variables, a wrong model that says why
    Mutant("geometry_derivative_dropped", "tuning: the model build's derivative with respect to a hardpoint "
           "offset dropped (gradients see rates only)",
           [("sweep/engine/values.py", "        return values(theta), jac @ dtheta",
             "        return values(theta), jac @ (0.0 * dtheta)")],
           ["tests/sweep/engine/test_values.py", "tests/sweep/tune/test_hardpoint_gradients.py"]),
    Mutant("plausibility_toe_unchecked", "static state: toe beyond the limit not flagged",
           [("kernels/kc.py", "    ok = jnp.all(dtoe <= limits.alignment_change) & jnp.all(dcamber <= limits.alignment_change)",
             "    ok = jnp.all(dcamber <= limits.alignment_change)")],
           ["tests/sweep/axle/test_diagnose.py"]),
    Mutant("unrestrained_never_found", "diagnosis: no mode counts as unrestrained (a free wheel spin unnamed)",
           [("sweep/axle/diagnose.py", "FREE_BELOW_HZ = 0.05 ", "FREE_BELOW_HZ = 0.0 ")],
           ["tests/sweep/axle/test_diagnose.py"]),
    Mutant("flexible_fusion_barrier_removed", "flexible interface elements without the fusion barrier (XLA CPU "
           "miscompiles their batched chain rule)",
           [("kernels/flexible.py", "        d11, d12, d21, d22, dx = jax.lax.optimization_barrier((d11, d12, d21, d22, dx))",
             "        pass")],
           ["tests/kernels/test_flexible.py"]),
    # ------------------------------------------------------------ element laws, integrator
    Mutant("bushing_rot_stiffness_sign", "rotational bushing stiffness sign flipped (rx, ry, rz)",
           [("kernels/forces.py",
             'elastic = prm["k"] * e + jax.vmap(curves.evaluate)(',
             'elastic = prm["k"] * e * jnp.array([1.0, 1.0, 1.0, -1.0, -1.0, -1.0]) + jax.vmap(curves.evaluate)(')],
           ["tests/kernels/test_elements.py", ENERGY_GRAD, KC_HAND, KC_SYM, "tests/kernels/test_dynamics.py",
            "tests/kernels/test_model.py", VALID_RESP]),
    Mutant("p2p_damping_halved", "P2P damping force halved",
           [("kernels/forces.py",
             'damp = damp * (prm["c_scale"][0]',
             'damp = 0.5 * damp * (prm["c_scale"][0]')],
           [P2P, "tests/kernels/test_elements.py", ENERGY_DAMPED, VALID_NMSE, VALID_RESP, ML_NMSE, EXUDYN_EIG]),
    Mutant("p2p_damping_removed", "P2P damping force removed (spring and stops only)",
           [("kernels/forces.py", "    return damp - push + friction_tension(prm, L, Ldot)\n",
             "    return 0.0 * damp - push + friction_tension(prm, L, Ldot)\n")],
           [P2P, "tests/kernels/test_elements.py", ENERGY_DAMPED, VALID_NMSE, VALID_RESP, ML_NMSE, EXUDYN_EIG]),
    Mutant("lsrt2_klin_frozen_rhs", "K_lin instead of K(r~) in the stage right-hand side (method.md pitfall)",
           [("kernels/integrate.py", "rate = system.rates(r_i, v_i) ", "rate = _kmul(K, v_i) ")],
           [LSRT2, VALID_ORDER, VALID_NMSE, ML_NMSE]),
    # ------------------------------------------------------------ time events
    Mutant("event_input_inclusive", "time events: the step's input read at its end (a switch at t_n + h "
           "already on for the whole step)",
           [("kernels/integrate.py", "    ref = t + 0.5 * h\n", "    ref = t + h\n")],
           [EVENTS_ON_GRID, EVENTS_OFF_GRID, EVENTS]),
    Mutant("event_no_split", "time events: a step with a switch inside is not split",
           [("kernels/integrate.py", "out = jax.lax.cond(inside, lambda *a: split_step(sysz, *a), "
             "lambda *a: whole_step(sysz, *a),", "out = jax.lax.cond(False, lambda *a: split_step(sysz, *a), "
             "lambda *a: whole_step(sysz, *a),")],
           [EVENTS_OFF_GRID, EVENTS]),
    Mutant("event_ramp_rate_ignored", "time events: the ramp's rate du/dt of a step taken as zero",
           [("kernels/loads.py", "running = (exc.durations > 0) & (t_ref >= exc.times)",
             "running = (exc.durations < 0) & (t_ref >= exc.times)")],
           # (an equivalent mutant for the orders: ROS34PW2 and LSRT2 are W-methods, whose
           # order holds for any approximation of the input's rate; the rate is checked directly)
           ["tests/kernels/test_methods.py::test_one_sided_input_is_the_piece_inside_the_step",
            EVENTS_OFF_GRID, EVENTS]),
    # ------------------------------------------------------------ state events
    Mutant("state_event_tolerance_coarse", "state events: the crossing located only to 0.1 ms",
           [("kernels/integrate.py", "EVENT_TOL = 1e-12\n", "EVENT_TOL = 1e-4\n")],
           [STATE_CONTACT, STATE_ORDER, *STATE_MODEL]),
    Mutant("state_event_switch_at_step_start", "state events: the mode switched at the start of the "
           "rest of the step instead of at the located crossing",
           [("kernels/integrate.py", 'ta = jnp.where(switch_now, s["hi"], s["ta"])',
             'ta = jnp.where(switch_now, s["lo"], s["ta"])'),
            ("kernels/integrate.py", 'ra = jnp.where(switch_now, s["rhi"], s["ra"])',
             'ra = jnp.where(switch_now, s["ra"], s["ra"])'),
            ("kernels/integrate.py", 'va = jnp.where(switch_now, s["vhi"], s["va"])',
             'va = jnp.where(switch_now, s["va"], s["va"])')],
           [STATE_CONTACT, STATE_ORDER, STATE_FRICTION, *STATE_MODEL]),
    Mutant("state_event_loop_ignores_done", "state events: the location loop runs on after the "
           "step is done (every step spends all its iterations)",
           [("kernels/integrate.py", 'return ~s["done"] & (s["it"] < EVENT_MAX_ITER)',
             'return s["it"] < EVENT_MAX_ITER')],
           [STATE_LANES, STATE_ORDER, STATE_FRICTION]),
    # (not a mutant: the sign of the contact law's continuation beyond
    # engagement - it is evaluated only past a located root, in trial
    # sub-steps that are discarded or within EVENT_TOL of the switch, so
    # flipping it moves results by ~1e-12: an equivalent mutant, tried)
    Mutant("friction_anchor_kept", "damper friction: a sliding damper that sticks keeps its old "
           "anchor (the stick spring starts loaded)",
           [("kernels/forces.py", "new_anchor = jnp.where(contact_event | (slip == 0.0), anchor, L)",
             "new_anchor = jnp.where(contact_event | (slip == 0.0), anchor, anchor)")],
           [STATE_FRICTION, *STATE_MODEL]),
    Mutant("friction_slip_direction", "damper friction: a stuck damper slides against its stick tension",
           [("kernels/forces.py", "jnp.where(slip == 0.0, jnp.sign(stick), 0.0)",
             "jnp.where(slip == 0.0, -jnp.sign(stick), 0.0)")],
           [STATE_FRICTION, *STATE_MODEL]),
    Mutant("a21_055", "LSRT2 a21 = 0.55 (order drops to 1)",
           [("kernels/lsrt2.py", "A21 = 0.5\n", "A21 = 0.55\n")],
           [LSRT2, VALID_ORDER, VALID_NMSE, ML_NMSE]),
    # ------------------------------------------------------------ gravity
    Mutant("gravity_sign", "gravity vector sign flipped at model build",
           [("kernels/model.py", 'gravity=f(tables.get("gravity", [0, 0, -9.81])),',
             'gravity=-f(tables.get("gravity", [0, 0, -9.81])),')],
           ["tests/kernels/test_dynamics.py::test_free_body_newton_euler", ML_BALANCE,
            "tests/kernels/test_model.py", KC_HAND, VALID_RESP]),
    Mutant("gravity_scale", "gravity force doubled in q and in the linearisation",
           [("kernels/dynamics.py", "return Q.at[:, :3].add(model.mass[:, None] * model.gravity[None, :])",
             "return Q.at[:, :3].add(2.0 * model.mass[:, None] * model.gravity[None, :])")],
           ["tests/kernels/test_dynamics.py::test_free_body_newton_euler", ML_BALANCE,
            "tests/kernels/test_model.py", KC_HAND, VALID_RESP]),
    # ------------------------------------------------------------ flexible bodies
    Mutant("flexible_modal_stiffness_scale", "flexible body: modal stiffness doubled in q (not in its Jacobian)",
           [("kernels/flexible.py", 'return -model.flex["k"] * r[ms] - model.flex["c"] * v[ms]',
             'return -2.0 * model.flex["k"] * r[ms] - model.flex["c"] * v[ms]')],
           ["tests/kernels/test_flexible.py"]),
    Mutant("flexible_interface_rotation_dropped", "flexible body: interface nodes do not turn with the modes",
           [("kernels/flexible.py", "R_theta = rotation_matrix(mv(Psi, q))",
             "R_theta = rotation_matrix(0.0 * mv(Psi, q))")],
           ["tests/kernels/test_flexible.py"]),
    # ------------------------------------------------------------ wheel loads
    Mutant("wheel_force_sign", "wheel-centre forces applied with the wrong sign",
           [("kernels/dynamics.py", "return jnp.concatenate([u[:, :3], jnp.einsum(",
             "return jnp.concatenate([-u[:, :3], jnp.einsum(")],
           [ML_BALANCE, "tests/kernels/test_model.py", KC_HAND, VALID_RESP]),
    Mutant("wheel_force_scale", "wheel-centre forces halved",
           [("kernels/dynamics.py", "return jnp.concatenate([u[:, :3], jnp.einsum(",
             "return jnp.concatenate([0.5 * u[:, :3], jnp.einsum(")],
           [ML_BALANCE, "tests/kernels/test_model.py", KC_HAND, VALID_RESP]),
    Mutant("wheel_torque_frame", "wheel torques applied as R M instead of R^T M (frame error)",
           [("kernels/dynamics.py", 'jnp.einsum("sji,sj->si", R, u[:, 3:])',
             'jnp.einsum("sij,sj->si", R, u[:, 3:])')],
           [KC_SYM, ML_BALANCE, KC_HAND, KC_FD, "tests/kernels/test_model.py", "tests/kernels/test_dynamics.py"]),
    Mutant("wheel_torque_sign", "wheel torques with the wrong sign",
           [("kernels/dynamics.py", 'jnp.einsum("sji,sj->si", R, u[:, 3:])',
             '-jnp.einsum("sji,sj->si", R, u[:, 3:])')],
           [ML_BALANCE, KC_HAND, KC_FD, "tests/kernels/test_model.py"]),
    # ------------------------------------------------------------ kinematic matrix K(r)
    Mutant("K_euler_rate_sign", "K(r): sign of one entry of the Euler-rate matrix",
           [("kernels/rotations.py", "jnp.stack([z, cx, -sx], -1),", "jnp.stack([z, cx, sx], -1),")],
           ["tests/kernels/test_rotations.py", "tests/kernels/test_dynamics.py", LSRT2_NONLIN, VALID_ORDER]),
    Mutant("K_euler_rate_scale", "K(r): 1/cos(a_y') dropped in the first row",
           [("kernels/rotations.py", "jnp.stack([z, sx / cy, cx / cy], -1),", "jnp.stack([z, sx, cx], -1),")],
           ["tests/kernels/test_rotations.py", "tests/kernels/test_dynamics.py", LSRT2_NONLIN, VALID_ORDER]),
    Mutant("K_lin_translation_scale", "K_lin blocks (linearisation only): translation block doubled",
           [("kernels/rotations.py", "K = K.at[:, :3, :3].set(jnp.eye(3, dtype=r.dtype))",
             "K = K.at[:, :3, :3].set(2.0 * jnp.eye(3, dtype=r.dtype))")],
           ["tests/kernels/test_rotations.py", LSRT2_K, "tests/kernels/test_blocks.py", LSRT2, VALID_ORDER, VALID_NMSE]),
    # ------------------------------------------------------------ block solver
    Mutant("block_schur_sign", "block LU: Schur update added instead of subtracted",
           [("kernels/blocks.py", "a = a.at[st.upd_slots].add(-st.upd_sum(prod))",
             "a = a.at[st.upd_slots].add(st.upd_sum(prod))")],
           ["tests/kernels/test_blocks.py"]),
    Mutant("block_pivot_unscaled", "block LU: L_ik not scaled by the pivot inverse D_k^-1",
           [("kernels/blocks.py", "L = mm(a[st.low], Di[st.low_piv]) if len(st.low) else None",
             "L = a[st.low] if len(st.low) else None")],
           ["tests/kernels/test_blocks.py"]),
    Mutant("block_forward_sign", "block LU: forward substitution sign",
           [("kernels/blocks.py", "y = y.at[st.low_rows].add(-st.low_sum(mv(L, y[st.low_col])))",
             "y = y.at[st.low_rows].add(st.low_sum(mv(L, y[st.low_col])))")],
           ["tests/kernels/test_blocks.py"]),
    Mutant("block_inv6_pivot", "inv6: pivot row not normalised (1/A_kk dropped)",
           [("kernels/blocks.py", "    for k in range(n):\n        piv = 1.0 / A[..., k, k]",
             "    for k in range(n):\n        piv = 1.0 + 0.0 * A[..., k, k]")],
           ["tests/kernels/test_blocks.py"]),
    Mutant("coefficient_matrix_sign", "model solver eq. (11): sign of the (h g)^2 G_r K term",
           [("kernels/linsolve.py", "MA = -hg * lin.G_v[:n] - hg * hg * mm(",
             "MA = -hg * lin.G_v[:n] + hg * hg * mm(")],
           ["tests/kernels/test_blocks.py::test_block_and_dense_solve_agree_toy_axle", "tests/kernels/test_blocks.py",
            VALID_ORDER, VALID_NMSE]),
    # ------------------------------------------------------------ K&C metric sign conventions
    Mutant("kc_toe_sign", "toe sign convention (metrics.toe_camber)",
           [("kernels/metrics.py", "toe = jnp.arctan2(sign * a[:, 0], a[:, 1])",
             "toe = jnp.arctan2(-sign * a[:, 0], a[:, 1])")],
           KC_SIGN_TESTS + ["tests/validation/test_exudyn.py::test_longitudinal_step_toe_camber"]),
    Mutant("kc_camber_sign", "camber sign convention (metrics.toe_camber)",
           [("kernels/metrics.py", "camber = jnp.arcsin(jnp.clip(-sign * a[:, 2], -1.0, 1.0))",
             "camber = jnp.arcsin(jnp.clip(sign * a[:, 2], -1.0, 1.0))")],
           KC_SIGN_TESTS + ["tests/validation/test_exudyn.py::test_longitudinal_step_toe_camber"]),
    Mutant("kc_wheel_rate_sign", "wheel rate sign (kc_metrics)",
           [("kernels/kc.py", 'out[prefix + "wheel_rate"] = (dfz @ dz) / dz / 1000.0',
             'out[prefix + "wheel_rate"] = -(dfz @ dz) / dz / 1000.0')],
           KC_SIGN_TESTS),
    Mutant("kc_lateral_compliance_sign", "lateral compliance sign (outboard instead of inboard)",
           [("kernels/kc.py", 'out["lateral_compliance"] = -sign * dy[:, 1] * 1000.0',
             'out["lateral_compliance"] = sign * dy[:, 1] * 1000.0')],
           KC_SIGN_TESTS),
    Mutant("kc_longitudinal_compliance_sign", "longitudinal compliance sign (traction)",
           [("kernels/kc.py", 'out["longitudinal_compliance"] = dy[:, 0] * 1000.0',
             'out["longitudinal_compliance"] = -dy[:, 0] * 1000.0')],
           KC_SIGN_TESTS),
    Mutant("kc_braking_compliance_sign", "longitudinal compliance sign (braking)",
           [("kernels/kc.py", 'out["longitudinal_compliance_braking"] = -dy[:, 0] * 1000.0',
             'out["longitudinal_compliance_braking"] = dy[:, 0] * 1000.0')],
           KC_SIGN_TESTS),
    Mutant("kc_wind_up_component", "wind-up read from the carrier's roll instead of its pitch",
           [("kernels/kc.py", 'out["wind_up"] = dy[:, 4] * DEG', 'out["wind_up"] = dy[:, 3] * DEG')],
           [KC_HAND]),
    Mutant("kc_axle_roll_steer_sign", "roll steer coefficient for roll to the left instead of the right",
           [("kernels/kc.py", "dz = -sign                                            # body roll",
             "dz = sign                                            # body roll")],
           [KC_HAND]),
    Mutant("kc_axle_lateral_load_inboard", "axle lateral compliance loaded inboard on both sides "
           "(the mirror load: a rigid axle shows no compliance)",
           [("kernels/kc.py", "dy = (G @ (jnp.tile(jnp.array([0.0, 1.0, 0.0, R, 0.0, 0.0]), 2) * 1000.0)).reshape(2, 6)",
             "dy = (G @ (jnp.asarray(load_direction('lateral_force', R)).reshape(-1) * 1000.0)).reshape(2, 6)")],
           [KC_HAND]),
    Mutant("friction_zero_force_fires", "damper friction of 0 N keeps its switching law (stick-slip "
           "chatter, non-finite)",
           [("kernels/forces.py", 'friction = jnp.where(prm["friction"] > 0.0, friction, -1.0)',
             'friction = jnp.where(prm["friction"] >= 0.0, friction, -1.0)')],
           ["tests/kernels/test_state_events.py::test_zero_friction_force_has_no_law",
            "tests/kernels/test_state_events_rigs.py::test_zero_friction_force_is_no_friction"]),
    Mutant("kc_lateral_load_direction", "lateral force applied outboard (load_direction)",
           [("kernels/kc.py", "cols = (z, -s, z, -s * R, z, z)", "cols = (z, s, z, s * R, z, z)")],
           KC_SIGN_TESTS),
    Mutant("kc_lateral_patch_moment", "lateral force: contact-patch moment sign (Mx = -R Fy)",
           [("kernels/kc.py", "cols = (z, -s, z, -s * R, z, z)", "cols = (z, -s, z, s * R, z, z)")],
           KC_SIGN_TESTS),
    Mutant("kc_braking_patch_moment", "braking force: contact-patch moment sign",
           [("kernels/kc.py", "cols = (z - 1.0, z, z, z, z + R, z)", "cols = (z - 1.0, z, z, z, z - R, z)")],
           KC_SIGN_TESTS),
    Mutant("kc_aligning_torque_sense", "aligning torque in toe-in instead of toe-out sense",
           [("kernels/kc.py", "cols = (z, z, z, z, z, s)", "cols = (z, z, z, z, z, -s)")],
           KC_SIGN_TESTS),
    Mutant("kc_per_kn_scale", "toe/camber per lateral force per N instead of per kN",
           [("kernels/kc.py", 'per = {"lateral_force": 1000.0,', 'per = {"lateral_force": 1.0,')],
           KC_SIGN_TESTS),
    Mutant("kc_roll_opposite_sign", "opposite (roll) travel: per own travel sign",
           [("kernels/kc.py", 'out[prefix + "camber_gain"] = tc[1] * DEG',
             'out[prefix + "camber_gain"] = tc[1] * DEG * (1.0 if mode == "parallel" else -1.0)')],
           KC_SIGN_TESTS),
    # ------------------------------------------------------------ more physics
    Mutant("gyroscopic_sign", "Euler's equation: gyroscopic term sign (q and linearisation)",
           [("kernels/dynamics.py", "Q[:, 3:] - jnp.cross(w, Iw))", "Q[:, 3:] + jnp.cross(w, Iw))"),
            ("kernels/dynamics.py", "q = mv(Minv, Q - jnp.concatenate([jnp.zeros_like(w), jnp.cross(w, Iw)], 1))",
             "q = mv(Minv, Q + jnp.concatenate([jnp.zeros_like(w), jnp.cross(w, Iw)], 1))")],
           ["tests/kernels/test_dynamics.py", ENERGY_CONSERVED, LSRT2_NONLIN]),
    Mutant("bushing_damping_sign", "bushing damping sign flipped (all directions)",
           [("kernels/forces.py", 'damping = prm["c"] * rate + ', 'damping = -prm["c"] * rate + ')],
           ["tests/kernels/test_elements.py", ENERGY_DAMPED, VALID_RESP, VALID_NMSE]),
    Mutant("p2p_spring_rate_scale", "P2P spring rate doubled (preload kept)",
           [("kernels/forces.py", 'push = push0 + prm["k_scale"] * (elastic(s) - push0)',
             'push = push0 + 2.0 * prm["k_scale"] * (elastic(s) - push0)')],
           [P2P, "tests/kernels/test_elements.py", ENERGY_GRAD, KC_SYM, "tests/kernels/test_model.py", VALID_RESP, VALID_NMSE]),
    Mutant("p2p_compression_rebound_swap", "P2P damper: compression and rebound factors swapped",
           [("kernels/forces.py", "w = 0.5 * (1.0 + jnp.tanh(Ldot / DAMPER_BLEND))",
             "w = 0.5 * (1.0 - jnp.tanh(Ldot / DAMPER_BLEND))")],
           [P2P, "tests/kernels/test_elements.py", ENERGY_DAMPED, VALID_NMSE, ML_NMSE]),
    # (not "reaction on body 2 at marker 1 instead of marker 2": F is parallel to
    # pm2 - pm1, so its moment is the same at either end - an equivalent mutant)
    Mutant("p2p_force_point", "P2P force on body 1 applied at the body origin instead of marker 1",
           [("kernels/forces.py", "return _apply(T * e, zero, pm1, p1, R1, p2, R2, at2=pm2)",
             "return _apply(T * e, zero, p1, p1, R1, p2, R2, at2=pm2)")],
           ["tests/kernels/test_elements.py", P2P, ENERGY_GRAD, "tests/kernels/test_dynamics.py"]),
    # ------------------------------------------------------------ the generated backend (sweep/codegen)
    Mutant("codegen_sub_operands", "generated C: subtraction operands swapped",
           [("sweep/codegen/csource.py", 'return f"{a[0]} - {a[1]}"', 'return f"{a[1]} - {a[0]}"')],
           [CODEGEN_SMALL, CODEGEN_TOY]),
    Mutant("codegen_while_mask", "generated C: a variant that is done keeps iterating (no per-variant mask)",
           [("sweep/codegen/emit.py", 'nxt.append(self.p.emit("sel", (act_phi, a, b), kind)',
             'nxt.append(self.p.emit("sel", (1.0, a, b), kind)')],
           [CODEGEN_SMALL, CODEGEN_TOY]),
    Mutant("codegen_scatter_add_drops_duplicates", "generated C: scatter-add keeps only one update per target",
           [("sweep/codegen/emit.py", "                out[t] = self.bin(op, out[t], us[u], kind)",
             "                out[t] = us[u] if op == \"add\" else self.bin(op, out[t], us[u], kind)")],
           [CODEGEN_SMALL, CODEGEN_TOY]),
    # ------------------------------------------------------------ the road and the tyre (kernels/road.py)
    Mutant("road_amplitude_without_two", "road synthesis: harmonic amplitudes sqrt(G df) instead of "
           "sqrt(2 G df) (half the target PSD)",
           [("kernels/road.py", "a = np.sqrt(2.0 * time_psd(f, gd0, speed, waviness) * df)",
             "a = np.sqrt(time_psd(f, gd0, speed, waviness) * df)")],
           ["tests/kernels/test_road.py::test_profile_matches_its_target_psd"]),
    Mutant("tyre_damping_term_sign", "tyre force input: the road's damping term with the wrong sign",
           [("kernels/road.py", "cos[:, :, 2] = rate * road.cos + damping * w * road.sin",
             "cos[:, :, 2] = rate * road.cos - damping * w * road.sin")],
           ["tests/kernels/test_road.py::test_tyre_force_input_and_its_rate"]),
    Mutant("harmonic_rate_sign", "harmonic input: the rate of its cosine part with the wrong sign",
           [("kernels/loads.py", "            - jnp.einsum(\"k,kij->ij\", exc.h_omega * jnp.sin(wt), exc.h_cos))",
             "            + jnp.einsum(\"k,kij->ij\", exc.h_omega * jnp.sin(wt), exc.h_cos))")],
           ["tests/kernels/test_road.py::test_tyre_force_input_and_its_rate",
            "tests/kernels/test_methods.py::test_a_harmonic_input_keeps_the_order"]),
    Mutant("tyres_loaded_in_statics", "statics: the tyres as built carry static load (their rest "
           "position at the design wheel centre, not the static state)",
           [("kernels/statics.py", "    model = unloaded_tyres(model)\n    r0 = model.r_design if r_start is None "
             "else r_start\n    model_c, u_c, r0 =",
             "    r0 = model.r_design if r_start is None else r_start\n    model_c, u_c, r0 =")],
           ["tests/kernels/test_road.py::test_tyres_carry_no_static_load_of_their_own"]),
    Mutant("sprung_body_roll_inertia", "sprung body: roll inertia m s^2 (one wheel's mass) instead of 2 m s^2",
           [("sweep/axle/builder.py", "    i_roll = m * s_half ** 2", "    i_roll = mass_per_wheel * s_half ** 2")],
           ["tests/kernels/test_frf.py::test_sprung_body_is_two_quarter_cars"]),
    Mutant("sprung_body_held_at_rest", "sprung body: the guide keeps its held rate in heave after the static "
           "state (the body never moves)",
           [("kernels/statics.py", '"k": bu["k"].at[g, free].set(0.0)', '"k": bu["k"].at[g, free[1:]].set(0.0)')],
           ["tests/kernels/test_frf.py::test_sprung_body_is_two_quarter_cars"]),
    Mutant("static_blocks_unrefined", "static Newton by blocks: the iterative refinement step left out",
           [("kernels/statics.py", "    dr = dr + blocks.solve(elim, fac, Q - blocks.matvec(elim.pattern, A, dr))\n",
             "")],
           ["tests/kernels/test_blocks.py::test_block_newton_increment_solves_the_dense_system_as_well_as_dense_lu"]),
    Mutant("pivoted_inverse_unpivoted", "inv6_pivoted: the pivot row not swapped in (Gauss-Jordan without pivoting)",
           [("kernels/blocks.py", "        p = k + jnp.argmax(jnp.abs(A[..., k:, k]), axis=-1)",
             "        p = k + 0 * jnp.argmax(jnp.abs(A[..., k:, k]), axis=-1)")],
           ["tests/kernels/test_blocks.py::test_pivoted_inverse_of_blocks_with_zero_diagonal"]),
    # ------------------------------------------------------------ the result cube (sweep/engine)
    Mutant("cube_param_order", "cube: each chunk's parameter values recorded in reverse order "
           "(its results in order): every sensitivity read from the wrong variant",
           [("sweep/engine/stream.py",
             "data.update({p.name: X[a:b, i] for i, p in enumerate(pset.params)})",
             "data.update({p.name: X[a:b, i][::-1] for i, p in enumerate(pset.params)})")],
           REPRO_TESTS),
    # ------------------------------------------------------------ generated code, programs kept in memory
    Mutant("codegen_argmax_ties", "generated argmax: a tie takes the later index (XLA keeps the first)",
           [("sweep/codegen/emit.py", 'cmp = "gt" if name == "argmax" else "lt"',
             'cmp = "ge" if name == "argmax" else "le"')],
           ["tests/sweep/codegen/test_codegen.py::test_argmax_and_argmin_follow_xla"]),
    Mutant("programs_ignore_folded_values", "workbench: a generated program (holding a values pattern) kept "
           "for another pattern's values",
           [("sweep/engine/stream.py", 'getattr(runner.fn, "values_key", None) if host else None',
             "None")],
           ["tests/sweep/test_workbench.py::test_programs_are_kept_by_structure_devices_and_chunk_shape"]),
    Mutant("pattern_folds_minus_one_as_one", "generated values pattern: an exact -1 compiled in as +1",
           [("sweep/codegen/emit.py", "cv[e] = (0.0, 1.0, -1.0, -0.0)[-1 - c]",
             "cv[e] = (0.0, 1.0, 1.0, -0.0)[-1 - c]")],
           ["tests/sweep/codegen/test_codegen.py::test_a_folded_pattern_build_serves_every_value_of_its_pattern"]),
    Mutant("rows_pattern_nominal_only", "generated rows pattern: the nominal row's 0 and +-1 compiled in "
           "even where another probe row differs",
           [("sweep/codegen/emit.py", "same = np.all(codes == codes[0], axis=0) & (codes[0] < 0)",
             "same = codes[0] < 0")],
           ["tests/sweep/codegen/test_codegen.py::test_a_rows_pattern_build_reads_each_variants_values"]),
    Mutant("rows_outside_pattern_run_anyway", "generated rows: a chunk outside the compiled pattern run on "
           "the code built for other values",
           [("sweep/codegen/runner.py", "        if ok.all():\n            return None\n",
             "        if True:\n            return None\n")],
           ["tests/sweep/codegen/test_codegen.py::test_a_rows_pattern_build_reads_each_variants_values"]),
    Mutant("pattern_ignores_zeros", "generated values pattern: a value that becomes 0 keeps the key "
           "(the code built for a nonzero value would run on it)",
           [("sweep/codegen/emit.py", "    code[zero & ~np.signbit(v)] = -1\n", "")],
           ["tests/sweep/codegen/test_codegen.py::test_a_folded_pattern_build_serves_every_value_of_its_pattern"]),
    Mutant("tables_stored_every_step", "generated code: a loop-invariant table stored in every step "
           "(placed in the innermost enclosing scope)",
           [("sweep/codegen/emit.py",
             "        d = max([self.p.depth(a) for a in items if not isinstance(a, float)] + [0])",
             "        d = len(self.p.loops)")],
           ["tests/sweep/codegen/test_codegen.py::test_a_loop_invariant_table_is_stored_once_not_every_step"]),
    Mutant("store_digest_uncast", "cube store: a chunk's digest taken from the values as handed over, "
           "not as the store holds them (float64 into a float32 variable)",
           [("sweep/results/store.py", "np.broadcast_to(np.asarray(arr, dtype=z.dtype),",
             "np.broadcast_to(np.asarray(arr),")],
           ["tests/sweep/results/test_store_heal.py::"
            "test_digests_taken_while_writing_match_what_the_store_reads_back"]),
    Mutant("auto_ignores_built_code", "integrator.backend=auto: a short job never uses the generated "
           "code an earlier run built",
           [("sweep/codegen/runner.py", "        if built is not None and built():",
             "        if built is not None and False:")],
           ["tests/sweep/codegen/test_backend_choice.py::test_auto_runs_a_short_job_on_generated_code_already_built"]),
    Mutant("prebuild_retries_failures", "a background build that failed is started again by every later job",
           [("sweep/prebuild.py", '    if os.path.exists(record + ".failed"):', "    if False:")],
           ["tests/sweep/codegen/test_backend_choice.py::test_a_failed_background_build_is_not_started_again"]),
    Mutant("group_table_key_clash_accepted", "element registry: a second group on a section another group "
           "reads is accepted (one model-file section, two laws)",
           [("kernels/forces.py", "    if group.table_key in RESERVED_TABLE_KEYS or any(g.table_key == group.table_key for g in groups):",
             "    if group.table_key in RESERVED_TABLE_KEYS:")],
           ["tests/kernels/test_element_registry.py::test_registry_holds_the_builtin_groups_and_refuses_clashes"]),
    Mutant("group_numbers_sign_ignored", "model config: a negative value where a group declares non_negative "
           "(a bushing's damping) passes the check",
           [("sweep/core/config.py", 'non_negative=keys[k] == "non_negative")', "non_negative=False)")],
           ["tests/sweep/axle/test_user_elements.py"]),
    Mutant("placement_right_side_not_mirrored", "model file: the right side's bushing preload and offset "
           "taken as the left side's (not mirrored into its element frame)",
           [("sweep/axle/builder.py", 'MIRROR_LOCAL if self.side == "right" else np.ones(6)', "np.ones(6)")],
           ["tests/sweep/axle/test_model_builder.py::test_per_side_preload_and_offset_are_mirrored"]),
    Mutant("group_output_in_body_frame", "a group's force channel: the element's generalised force (torque in "
           "the body frame) instead of its output (vehicle frame)",
           [("kernels/metrics.py", "    return forces.map_elements(g.output, prm, x[b[:, 0]], x[b[:, 1]])",
             "    return forces.map_elements(lambda *a: g.element(*a)[0] if g.name != \"bushing\" else g.output(*a),"
             " prm, x[b[:, 0]], x[b[:, 1]])")],
           ["tests/kernels/test_element_registry.py::test_the_groups_output_is_its_element_force_and_equals_the_twin_bushings"]),
    Mutant("group_input_rate_dropped", "a group's time-varying input without its rate in the linear-implicit "
           "methods' J_u du/dt term",
           [("kernels/linsolve.py", """            y = y.at[b[:, 0]].add(jnp.einsum("nik,nk->ni", d1, dw)).at[b[:, 1]].add(
                jnp.einsum("nik,nk->ni", d2, dw))""", "            y = y")],
           ["tests/kernels/test_group_input.py"]),
    Mutant("group_output_input_at_rest", "a time response's outputs computed with the groups' inputs at "
           "rest instead of at the sample's time",
           [("kernels/response.py", "        if input_groups(model.topology):    # outputs see",
             "        if False and input_groups(model.topology):    # outputs see")],
           ["tests/kernels/test_group_input.py::test_the_time_responses_outputs_see_the_input_at_the_samples_time"]),
]


# ----------------------------------------------------------------------------- machinery
def _edits(m):
    for e in m.edits:
        f, old, new = e[:3]
        yield f, old, new, (e[3] if len(e) > 3 else 1)


def check_applies(m, tree):
    """None if every edit applies to ``tree``, else the reason it is stale."""
    texts = {}
    for f, old, new, count in _edits(m):
        path = os.path.join(tree, f)
        if not os.path.exists(path):
            return f"{f} missing"
        text = texts.get(f) or open(path).read()
        n = text.count(old)
        if n != count:
            return f"{f}: {old.strip()[:60]!r} found {n}x, expected {count}x"
        texts[f] = text.replace(old, new)
    return None


def apply(m, tree):
    texts = {}
    for f, old, new, _ in _edits(m):
        texts[f] = (texts.get(f) or open(os.path.join(tree, f)).read()).replace(old, new)
    for f, text in texts.items():
        with open(os.path.join(tree, f), "w") as fh:
            fh.write(text)
    return list(texts)


def restore(files, tree, pristine):
    for f in files:
        shutil.copy2(os.path.join(pristine, f), os.path.join(tree, f))


EXCLUDE_TOP = {".venv", ".git", "outputs", "multirun", ".pytest_cache"}
EXCLUDE_ANY = ("__pycache__", "*.egg-info", ".pytest_cache")


def copy_tree(src, dst):
    """Copy the working tree (uncommitted work included) without .venv, .git,
    outputs, caches; ``dst`` is replaced."""
    src = os.path.abspath(src)

    def ignore(d, names):
        out = set(shutil.ignore_patterns(*EXCLUDE_ANY)(d, names))
        if os.path.abspath(d) == src:
            out |= EXCLUDE_TOP & set(names)
        return out
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=ignore, symlinks=True)
    os.makedirs(os.path.join(dst, "outputs"), exist_ok=True)


def env_for(tree):
    env = dict(os.environ)
    env["PYTHONPATH"] = tree + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def preflight(tree):
    """The copy's modules, not the editable install's, are the ones imported."""
    code = ("import kernels, sweep, tests.conftest as c; "
            "print(kernels.__file__); print(sweep.__file__); print(c.__file__)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env_for(tree),
                         capture_output=True, text=True)
    paths = out.stdout.split()
    real = os.path.realpath(tree)
    if out.returncode or len(paths) != 3 or not all(os.path.realpath(p).startswith(real + os.sep) for p in paths):
        raise SystemExit(f"preflight: modules not imported from the copy {tree}:\n{out.stdout}{out.stderr}")
    return paths


def _groups(tests, tree):
    """Split a test list into pytest invocations: consecutive node ids / files
    share one; a "path -k expr" entry is its own. Missing files -> notes."""
    groups, notes, cur = [], [], []
    for entry in tests:
        path, _, kexpr = entry.partition(" -k ")
        fpath = path.split("::")[0]
        if not os.path.exists(os.path.join(tree, fpath)):
            notes.append(f"{fpath} missing, skipped")
            continue
        if kexpr:
            if cur:
                groups.append(cur)
                cur = []
            groups.append([path, "-k", kexpr.strip()])
        elif path not in cur:
            if any(c.split("::")[0] == fpath and ("::" in c) != ("::" in path) for c in cur):
                # pytest merges node ids of one file given twice and runs them in
                # file order: a new invocation keeps the listed (cheapest-first) order
                groups.append(cur)
                cur = []
            cur.append(path)
    if cur:
        groups.append(cur)
    return groups, notes


FAILED_RE = re.compile(r"^(FAILED|ERROR) (\S+)", re.M)


def _run_pytest(tree, args, extra, timeout, log):
    """One pytest run in ``tree``; its output streams into ``log`` (tail -f it)."""
    cmd = [sys.executable, "-m", "pytest", "--rootdir", tree, *extra, *args]
    t0 = time.time()
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    start = log.tell()
    proc = subprocess.Popen(cmd, cwd=tree, env=env_for(tree), stdout=log,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        rc = None
    log.flush()
    log.seek(start)
    out = log.read()
    log.seek(0, os.SEEK_END)
    log.write(f"\n[rc={rc}, {time.time() - t0:.0f} s]\n\n")
    log.flush()
    return rc, out, time.time() - t0


TIER_ARGS = {"fast": [], "all": ["-m", ""]}     # fast: pyproject's addopts select the fast tier


def run_tests(tree, tests, stop_first, timeout, log, tier="fast"):
    """Run the mutant's tests; returns (status, catching tests, notes)."""
    groups, notes = _groups(tests, tree)
    if not groups:
        return "no tests", [], notes
    extra = list(PYTEST_ARGS) + ["-rfE"] + TIER_ARGS[tier]
    if not stop_first:
        extra.remove("-x")
    caught, t_left = [], timeout
    for g in groups:
        if t_left <= 0:
            return "timeout", caught, notes
        rc, out, dt = _run_pytest(tree, g, extra, t_left, log)
        t_left -= dt
        if rc is None:
            return ("caught" if caught else "timeout"), caught, notes
        if rc == 4 and len(g) > 1 and "-k" not in g:      # a node id not found: one by one
            for entry in g:
                rc1, out1, dt1 = _run_pytest(tree, [entry], extra, t_left, log)
                t_left -= dt1
                if rc1 == 4:
                    notes.append(f"{entry}: not found")
                elif rc1 == 1:
                    caught += [m.group(2) for m in FAILED_RE.finditer(out1)] or [entry]
                    if stop_first:
                        return "caught", caught, notes
                elif rc1 is None:
                    return ("caught" if caught else "timeout"), caught, notes
            continue
        if rc == 4:
            notes.append(f"{' '.join(g)}: not found")
        elif rc == 5:
            notes.append(f"{' '.join(g)}: no test selected" + (" (not in the fast tier)" if tier == "fast" else ""))
        elif rc == 1:
            caught += [m.group(2) for m in FAILED_RE.finditer(out)] or [" ".join(g)]
            if stop_first:
                return "caught", caught, notes
        elif rc not in (0, 5):
            return "error", caught, notes + [f"pytest rc={rc} on {' '.join(g)} (see log)"]
    return ("caught" if caught else "survived"), caught, notes


def run_mutant(m, tree, pristine, args, log_dir):
    t0 = time.time()
    stale = check_applies(m, tree)
    if stale:
        return {"name": m.name, "what": m.what, "status": "stale", "by": [], "notes": [stale], "seconds": 0.0}
    files = apply(m, tree)
    log_path = os.path.join(log_dir, f"{m.name}.log")
    try:
        with open(log_path, "w+") as log:
            status, by, notes = run_tests(tree, args.tests or m.tests, not args.all,
                                          args.timeout or m.timeout, log, args.tier)
    finally:
        restore(files, tree, pristine)
    return {"name": m.name, "what": m.what, "status": status, "by": by, "notes": notes,
            "seconds": round(time.time() - t0, 1), "log": log_path}


def table(results):
    lines = ["| mutant | what | result | caught by | s | notes |", "|---|---|---|---|---|---|"]
    for r in results:
        by = "<br>".join(f"`{b}`" for b in r["by"]) or "-"
        lines.append(f"| `{r['name']}` | {r['what']} | **{r['status']}** | {by} | {r['seconds']:.0f} | "
                     f"{'; '.join(r['notes'])} |")
    return "\n".join(lines)


def git_state():
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.split("\n")
        dirty = [d[3:] for d in dirty if d.strip()]
        return f"{head}" + (f" + uncommitted changes in {', '.join(dirty)}" if dirty else " (clean)")
    except OSError:
        return "unknown"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="list the mutants, whether each applies, and exit")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="run only this mutant (repeatable; fnmatch patterns allowed)")
    ap.add_argument("--jobs", type=int, default=1, help="mutants in parallel (one tree copy each; default 1)")
    ap.add_argument("--tests", nargs="+", help="override the test list of the selected mutants")
    ap.add_argument("--all", action="store_true", help="no -x: report every failing test of the list")
    ap.add_argument("--tier", choices=sorted(TIER_ARGS), default="fast",
                    help="fast (default): the listed tests of the fast tier only; all: every listed test")
    ap.add_argument("--timeout", type=int, help=f"seconds per mutant (default: the mutant's, {DEFAULT_TIMEOUT})")
    ap.add_argument("--baseline", action="store_true",
                    help="first run the union of the selected test lists on the unmutated copy "
                         "(a test failing there does not count as catching)")
    ap.add_argument("--baseline-timeout", type=int, default=3600, help="seconds for the baseline run")
    ap.add_argument("--tree", default=ROOT, help="the tree to mutate (copied, never modified)")
    ap.add_argument("--markdown", help="also write the table here")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--keep", action="store_true", help="keep the temporary copies and logs")
    args = ap.parse_args(argv)

    import fnmatch
    names = [m.name for m in MUTANTS]
    assert len(set(names)) == len(names), "duplicate mutant names"
    sel = [m for m in MUTANTS if not args.only or any(fnmatch.fnmatch(m.name, p) for p in args.only)]
    unknown = [p for p in args.only if not any(fnmatch.fnmatch(n, p) for n in names)]
    if unknown:
        raise SystemExit(f"--only: no mutant named {', '.join(unknown)} (see --list)")
    if args.list:
        for m in sel:
            st = check_applies(m, args.tree)
            missing = [t.split("::")[0].split(" -k ")[0] for t in m.tests
                       if not os.path.exists(os.path.join(args.tree, t.split("::")[0].split(" -k ")[0]))]
            print(f"{m.name:34s} {'STALE: ' + st if st else 'applies':10s}  {m.what}"
                  + (f"  [missing: {', '.join(sorted(set(missing)))}]" if missing else ""))
        return 0

    work = tempfile.mkdtemp(prefix="mutants-")
    pristine = os.path.join(work, "pristine")
    copy_tree(args.tree, pristine)
    log_dir = os.path.join(work, "logs")
    os.makedirs(log_dir)
    jobs = max(1, min(args.jobs, len(sel)))
    trees = []
    for j in range(jobs):
        t = os.path.join(work, f"tree{j}")
        copy_tree(pristine, t)
        preflight(t)
        trees.append(t)
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, tree {git_state()}; "
          f"copies under {work}; {len(sel)} mutants, {jobs} job(s), {args.tier} tier", flush=True)
    print(f"preflight: kernels imported from {preflight(trees[0])[0]}", flush=True)

    baseline_failures = set()
    if args.baseline:
        union = []
        for m in sel:
            for t in (args.tests or m.tests):
                if t not in union:
                    union.append(t)
        with open(os.path.join(log_dir, "baseline.log"), "w+") as log:
            t1 = time.time()
            status, failed, notes = run_tests(trees[0], union, False, args.baseline_timeout, log, args.tier)
        baseline_failures = set(failed)
        print(f"baseline (unmutated copy, {len(union)} entries, {time.time() - t1:.0f} s): "
              f"{'no failure' if status == 'survived' else status + ': ' + ', '.join(failed)}"
              f"{'; ' + '; '.join(notes) if notes else ''}", flush=True)

    results = [None] * len(sel)
    free = list(trees)

    def one(i):
        tree = free.pop()
        try:
            r = run_mutant(sel[i], tree, pristine, args, log_dir)
        finally:
            free.append(tree)
        bad = [b for b in r["by"] if b in baseline_failures]
        if bad:
            r["notes"].append(f"{', '.join(bad)} fails unmutated too (baseline)")
        print(f"  {r['name']:34s} {r['status']:9s} {r['seconds']:6.0f} s  "
              f"{', '.join(r['by'][:1])} {'; '.join(r['notes'])}", flush=True)
        results[i] = r

    t0 = time.time()
    if jobs == 1:
        for i in range(len(sel)):
            one(i)
    else:
        with ThreadPoolExecutor(jobs) as ex:
            list(ex.map(one, range(len(sel))))
    print()
    md = table(results)
    print(md)
    counts = {s: sum(r["status"] == s for r in results) for s in ("caught", "survived", "stale", "timeout", "error")}
    print(f"\n{', '.join(f'{v} {k}' for k, v in counts.items() if v)}; {time.time() - t0:.0f} s; logs in {log_dir}")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(md + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "tree": git_state(),
                       "results": results}, f, indent=1)
    if not args.keep:
        for t in [pristine, *trees]:
            shutil.rmtree(t, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
