"""Flexible bodies for the floating-frame-of-reference formulation:
preprocessing (numpy / scipy, no JAX).

A flexible body moves with 6 rigid reference coordinates plus n modal
coordinates. Its shape functions come from a finite-element model by
Craig-Bampton reduction (static constraint modes of the interface nodes
plus fixed-interface normal modes), turned into free-free elastic modes
with the rigid motions removed, plus the inertia invariants the equations of
motion need. The FE model is either a built-in 3D beam frame
(:mod:`~sweep.axle.fe.beam_frame`) or an external FE export
(:mod:`~sweep.axle.fe.fe_import`); :mod:`~sweep.axle.fe.craig_bampton`
reduces it, optionally cached on disk. SI units throughout (m, kg, N, rad,
Hz); node-major DOF, 6 per node (ux uy uz rx ry rz in the body frame).
"""
from sweep.axle.fe.beam_frame import SHEAR_CORRECTION, BeamFrame, Section, assemble, element_matrices
from sweep.axle.fe.craig_bampton import (ReducedBody, cache_key, modal_damping, reduce, reduce_cached,
                                          rigid_body_modes)
from sweep.axle.fe.fe_import import (DOF_PER_NODE, FEModel, FlexibleBodyError, check_model, load_matrix_market,
                                      load_npz)

__all__ = ["BeamFrame", "DOF_PER_NODE", "FEModel", "FlexibleBodyError", "ReducedBody", "SHEAR_CORRECTION",
           "Section", "assemble", "cache_key", "check_model", "element_matrices", "load_matrix_market", "load_npz",
           "modal_damping", "reduce", "reduce_cached", "rigid_body_modes"]
