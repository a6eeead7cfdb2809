"""A reduced flexible body as model-table rows (``kernels.model``): the
frame body, the interface markers and the ``flexible_bodies`` row.

The kernels put the body frame at the centre of mass (the mean-axis frame
of the zeroth-order floating-frame formulation, ``kernels.flexible``), so
the FE node coordinates are shifted by the centre of mass and the inertia
tensor is moved there (parallel axes); the mode shapes do not depend on the
origin. The FE axes are the vehicle axes (the frame body's Euler angles are
zero); ``origin`` places the FE coordinates' origin in the vehicle frame.
"""
from __future__ import annotations

import numpy as np

from sweep.axle.fe.craig_bampton import ReducedBody
from sweep.axle.fe.fe_import import FlexibleBodyError

COUPLING_TOL = 1e-8     # |I3|, |I4| relative to sqrt(m) (and sqrt(m) * size): the modes must be mean-axis


def check_mean_axis(body: ReducedBody, name):
    """Raise unless the mode count fills whole state slots and the modes are
    M-orthogonal to rigid motion (I3 = I4 = 0 about the centre of mass)."""
    n = body.n_modes
    if n == 0 or n % 6:
        raise FlexibleBodyError(f"{name}: {n} elastic modes; the kernels need a positive multiple of 6 "
                                f"(change the number of fixed-interface modes by {(-n) % 6})")
    m = float(body.mass)
    size = float(np.max(np.abs(body.interface_positions - body.centre_of_mass))) or 1.0
    for what, value, scale in (("translational coupling I3", body.translational_coupling, np.sqrt(m)),
                               ("rotational coupling I4 about the centre of mass",
                                body.rotational_coupling - _skew(body.centre_of_mass) @ body.translational_coupling,
                                np.sqrt(m) * size)):
        if np.max(np.abs(value)) > COUPLING_TOL * scale:
            raise FlexibleBodyError(f"{name}: {what} = {np.max(np.abs(value)):.3g} is not zero; the kernels' "
                                    "mean-axis frame needs modes M-orthogonal to rigid motion "
                                    "(sweep.axle.fe.reduce makes them so)")


def frame_row(body: ReducedBody, *, name, index, origin):
    """The ``bodies`` row of the reference frame: mass, inertia about the
    centre of mass (parallel axes from the FE origin), position = FE origin
    ``origin`` (vehicle frame, m) plus the centre of mass."""
    m, c = float(body.mass), body.centre_of_mass
    J = body.inertia - m * (float(c @ c) * np.eye(3) - np.outer(c, c))
    return {"index": index, "name": name, "mass": m, "inertia": (0.5 * (J + J.T)).tolist(),
            "position": (np.asarray(origin, float) + c).tolist(), "euler": [0.0, 0.0, 0.0]}


def interface_entry(body: ReducedBody, k, marker):
    """An ``interfaces`` entry: ``marker`` at the body's k-th interface node."""
    return {"marker": marker, "translation": body.interface_translation[k].tolist(),
            "rotation": body.interface_rotation[k].tolist()}


def flexible_row(body: ReducedBody, *, name, index, flex_index, interfaces, damping_ratio=0.0):
    """The ``flexible_bodies`` row (``interfaces`` from :func:`interface_entry`)."""
    check_mean_axis(body, name)
    return {"index": flex_index, "name": name, "body": index,
            "frequencies": np.asarray(body.frequencies_hz, float).tolist(),
            "damping_ratio": np.asarray(damping_ratio, float).tolist(), "interfaces": interfaces}


def body_tables(body: ReducedBody, *, name, index, flex_index, origin, markers, damping_ratio=0.0):
    """(body row, marker rows, flexible_bodies row) of a :class:`ReducedBody`
    with one marker at each interface node.

    ``index``: the body's index in ``bodies``; ``flex_index``: its row
    index in ``flexible_bodies``; ``origin`` (3,): where the FE origin lies
    in the vehicle frame (m); ``markers``: one (index, name) per interface
    node, in the order of ``body.interface_nodes``; ``damping_ratio``: one
    modal damping ratio or one per mode. Raises
    :class:`~sweep.axle.fe.FlexibleBodyError` when the mode count is not a
    multiple of 6 (the kernels' state slots; choose the fixed-interface
    mode count accordingly) or the modes are not M-orthogonal to rigid motion."""
    check_mean_axis(body, name)
    if len(markers) != len(body.interface_nodes):
        raise FlexibleBodyError(f"{name}: markers has {len(markers)} entries for "
                                f"{len(body.interface_nodes)} interface nodes")
    origin = np.asarray(origin, float)
    marker_rows = [{"index": mi, "name": mn, "body": index, "position": (origin + p).tolist()}
                   for (mi, mn), p in zip(markers, body.interface_positions)]
    flex_row = flexible_row(body, name=name, index=index, flex_index=flex_index,
                            interfaces=[interface_entry(body, k, mi) for k, (mi, _) in enumerate(markers)],
                            damping_ratio=damping_ratio)
    return frame_row(body, name=name, index=index, origin=origin), marker_rows, flex_row


def _skew(v):
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])
