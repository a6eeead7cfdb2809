"""Devices, chunks and the mapping of a per-variant function over a chunk.

* :func:`chunking`: the chunk size from a memory budget or the config,
  padded to a multiple of the device count; :func:`job_devices`: on a CPU
  by default every core (at most two, :mod:`sweep.core.runtime`), but one for a
  chunk too small to profit;
* :func:`map_variants`: ``vmap``, ``lax.map`` micro-batches, ``shard_map``
  over several devices; :class:`StagedRunner`: a first stage on one device,
  the second sharded; :func:`host_map`: a per-variant function that cannot
  be traced (a host solver), one variant after another.

One compilation per job: every chunk has the same (padded) size.
"""
from __future__ import annotations

import math
import os

import jax
import jax.numpy as jnp
import numpy as np

from sweep.core.runtime import DEVICES_ENV, LOG, cpu_devices_are_default
from sweep.core.config import ConfigError

# Largest auto chunk per device. On a CPU the throughput peaks near 256
# variants per computation (BENCHMARKS.md, "The suite": batch throughput); accelerators keep
# gaining with larger batches.
MAX_AUTO_CHUNK_CPU = 256
MAX_AUTO_CHUNK_ACCELERATOR = 1024

# A default job (CPU device count chosen by sweep.core.runtime, not by the user)
# splits a chunk over its CPU devices only when every device gets at least
# this many variants; below it the second device does not pay for a second
# compilation and a re-trace (BENCHMARKS.md, "Two CPU devices").
MIN_VARIANTS_PER_CPU_DEVICE = 128

# Variants per micro-batch on a CPU (sweep.micro_batch: auto): lax.map over
# groups of 32 keeps a group's working set in the caches, so large chunks do
# not fall off a cliff (BENCHMARKS.md, "Micro-batching").
AUTO_MICRO_BATCH_CPU = 32


def estimate_chunk(n_variants, out_bytes, n_dof, budget_gb, n_dev, platform=None):
    """Chunk size from a memory budget: a variant's outputs (``out_bytes``)
    plus its working set (~12 dense ``n_dof``-square float64 matrices: J_r,
    J_v, A, LU, blocks, temporaries), capped per device at the batch where
    throughput stops growing (``MAX_AUTO_CHUNK_*``; ``platform`` defaults to
    JAX's default backend), rounded up to a multiple of ``n_dev``. Returns
    (chunk, bytes per variant)."""
    work_bytes = 8 * n_dof * n_dof * 12
    per_variant = int(out_bytes) + work_bytes
    platform = platform or jax.default_backend()
    cap = (MAX_AUTO_CHUNK_CPU if platform == "cpu" else MAX_AUTO_CHUNK_ACCELERATOR) * n_dev
    c = int(budget_gb * 2 ** 30 // per_variant)
    c = max(1, min(c, cap, n_variants))
    c = int(math.ceil(c / n_dev) * n_dev)
    return c, per_variant


def job_devices(chunk=None, max_devices=None, platform=None):
    """Devices a job maps a chunk of ``chunk`` variants over: every JAX
    device (at most ``max_devices``), except for a default CPU job whose
    chunk is too small to profit (:data:`MIN_VARIANTS_PER_CPU_DEVICE`):
    there as many devices as get that many variants each, at least one.
    ``chunk`` None: every device."""
    n = jax.device_count() if max_devices is None else max(1, min(int(max_devices), jax.device_count()))
    platform = platform or jax.default_backend()
    if chunk is not None and n > 1 and platform == "cpu" and cpu_devices_are_default():
        n = max(1, min(n, int(chunk) // MIN_VARIANTS_PER_CPU_DEVICE))
    return n


def devices_note(n_dev, platform=None):
    """The devices a job maps a chunk over, for its log: e.g. "2 CPU devices
    (default; AXLE_CPU_DEVICES=1 for one)"."""
    platform = platform or jax.default_backend()
    if platform != "cpu":
        return f"{n_dev} {platform.upper()} device(s)"
    total = jax.device_count()
    what = f"{n_dev} CPU device{'s' if n_dev != 1 else ''}" + (f" of {total}" if n_dev < total else "")
    if cpu_devices_are_default():
        if n_dev < total:
            return (f"{what} (default; chunks of {MIN_VARIANTS_PER_CPU_DEVICE * total}+ variants "
                    f"are split over {total})")
        return f"{what} (default; {DEVICES_ENV}=1 for one)" if n_dev > 1 else f"{what} (one usable core)"
    if os.environ.get(DEVICES_ENV):
        return f"{what} ({DEVICES_ENV}={os.environ[DEVICES_ENV]})"
    return f"{what} (XLA_FLAGS)" if total > 1 else what


def chunking(sw, n_variants, out_bytes, n_dof, max_devices=1):
    """(shard, num_shards, devices, chunk) from the ``sweep`` config: the
    shard settings checked, the devices (:func:`job_devices`; ``max_devices``:
    the most the job kind can map a chunk over, None = all), the chunk from
    ``sweep.chunk_size`` (at most the variants per shard, rounded up to a
    multiple of the device count) or,
    when ``auto``, from the memory budget (:func:`estimate_chunk`)."""
    shard, nsh = int(sw.get("shard", 0)), int(sw.get("num_shards", 1))
    if nsh < 1 or not 0 <= shard < nsh:
        raise ConfigError(f"sweep.shard = {shard} must be in [0, sweep.num_shards = {nsh})")
    if sw.get("chunk_size", "auto") in ("auto", None):
        budget = float(sw.get("memory_budget_gb", 2.0))
        every = job_devices(None, max_devices)          # the chunk if every device took part
        n_dev = job_devices(min(n_variants, estimate_chunk(n_variants, out_bytes, n_dof, budget, every)[0]),
                            max_devices)
        C, _ = estimate_chunk(n_variants, out_bytes, n_dof, budget, n_dev)
    else:
        C = int(sw["chunk_size"])
        if C < 1:
            raise ConfigError(f"sweep.chunk_size = {C} must be >= 1 or auto")
        per_shard = max(1, math.ceil(n_variants / nsh))
        if C > per_shard:       # a larger chunk only pads (a 100,000-variant chunk for 8 variants)
            LOG.warning(f"warning: sweep.chunk_size = {C} is more than the {per_shard} variant(s) "
                        f"{'of this shard' if nsh > 1 else 'of the design'}: chunks of {per_shard}")
            C = per_shard
        n_dev = job_devices(C, max_devices)
        C = int(math.ceil(C / n_dev) * n_dev)
    return shard, nsh, n_dev, C


def micro_batch_of(sw, chunk, n_dev, platform=None):
    """Variants per ``lax.map`` group inside a device's slice of a chunk, or
    None for one vmap over the slice: ``sweep.micro_batch`` = auto (the
    default: :data:`AUTO_MICRO_BATCH_CPU` on a CPU when a device's slice is
    larger, None on accelerators, which want wide batches), 0 (off) or an
    integer."""
    mb = sw.get("micro_batch", "auto")
    per_dev = -(-chunk // n_dev)
    if mb in ("auto", None):
        platform = platform or jax.default_backend()
        mb = AUTO_MICRO_BATCH_CPU if platform == "cpu" else 0
    mb = int(mb)
    return mb if 0 < mb < per_dev else None


def adopt_chunk(sw, chunk, n_dev_max):
    """(devices, micro-batch) for resuming a store in its own chunks of
    ``chunk`` variants: the devices drop to a number that divides it."""
    n_dev = job_devices(chunk, max_devices=n_dev_max)
    while chunk % n_dev:
        n_dev -= 1
    return n_dev, micro_batch_of(sw, chunk, n_dev)


def mesh(n_dev):
    from jax.sharding import Mesh
    return Mesh(np.array(jax.devices()[:n_dev]), ("variant",))


def place(thetas, n_dev):
    """Put a chunk's parameter rows on the devices, split along ``variant``;
    a pair ``(thetas, values)`` (:func:`map_variants`, ``shared``): the
    values whole on every device."""
    if n_dev <= 1:
        return jax.tree_util.tree_map(jnp.asarray, thetas)
    from jax.sharding import NamedSharding, PartitionSpec
    split = NamedSharding(mesh(n_dev), PartitionSpec("variant"))
    if isinstance(thetas, tuple):
        th, vec = thetas
        return jax.device_put(jnp.asarray(th), split), jax.device_put(jnp.asarray(vec), NamedSharding(
            mesh(n_dev), PartitionSpec()))
    return jax.device_put(jnp.asarray(thetas), split)


def map_variants(variant, n_dev=1, micro_batch=None, shared=False):
    """``jit(vmap(variant))`` over the leading axis; on ``n_dev`` > 1 devices
    every device maps its own slice of the chunk (``jax.shard_map``).

    Why shard_map and not a plain jit of sharded inputs: a vmapped
    ``while_loop`` (the Newton iteration of the static equilibrium) stops when
    *no* variant of the batch wants another iteration, a reduction over
    ``variant``. Left to the SPMD partitioner that becomes an all-reduce
    across devices in every iteration; with shard_map each device tests only
    its own variants, there is no cross-device communication at all (and on
    XLA's CPU client the cross-device all-reduce inside a while loop hung a
    4096-variant job). Results per variant are the same.

    ``micro_batch`` = B: each device runs its slice as ``lax.map`` over groups
    of B variants, vmapped inside (the working set of a group stays in the
    CPU caches). None or 0: one vmap over the slice.

    ``shared``: the chunk is a pair ``(thetas (C, P), values (V,))`` with
    the values shared by every variant (a model's and load case's values read
    at run time, :mod:`sweep.engine.values`), mapped as ``variant(theta,
    values)``: the values are passed once (not repeated per row: a double
    wishbone's are 55,000 numbers) and stay unbatched - batched, every product
    of them is computed per variant (measured: 22 % of the double wishbone's
    chunk time; ``benchmarks/lifted_values.py``)."""
    def over(fn, thetas):
        if micro_batch:
            return jax.lax.map(fn, thetas, batch_size=int(micro_batch))
        return jax.vmap(fn)(thetas)
    if not shared:
        f = lambda thetas: over(variant, thetas)  # noqa: E731
    else:
        f = lambda pair: over(lambda theta: variant(theta, pair[1]), pair[0])  # noqa: E731
    if n_dev > 1:
        from jax.sharding import PartitionSpec as P
        # check_vma=False: the kernels know nothing of meshes (no pcast of loop
        # carries); every value is per-device anyway
        spec = ((P("variant"), P()),) if shared else P("variant")     # shared values: on every device
        f = jax.shard_map(f, mesh=mesh(n_dev), in_specs=spec, out_specs=P("variant"),
                          check_vma=False)
    return jax.jit(f)


class HostRunner:
    """A chunk runner for a per-variant function that runs on the host and
    cannot be traced (e.g. the Radau reference, :class:`kernels.radau.Radau`):
    ``first(theta) -> carry`` mapped and compiled like any chunk runner (the
    static equilibria), then ``second(theta, carry) -> (outputs, status,
    iterations)`` called eagerly for one variant after another and stacked.

    Used like a jitted function by :func:`sweep.engine.stream.compile_runner`:
    ``runner.lower(thetas).compile()(thetas, m)`` runs the first ``m`` rows
    (``key``, the trace-cache key of host runners that use one, is not used:
    the eager stage has nothing to cache)."""
    host = True

    def __init__(self, first, second, micro_batch=None):
        self.first = map_variants(first, 1, micro_batch)
        self.second = second

    def lower(self, thetas, key=None):
        return _Lowered(self, thetas)


class StagedRunner:
    """A chunk runner in two stages for several devices: ``first(theta) ->
    carry`` for the whole chunk on ONE device (e.g. the static-equilibrium
    Newton loop), then ``second(theta, carry) -> outputs`` with the chunk
    sharded over ``n_dev`` devices (:func:`map_variants`; e.g. the time
    integration, a fixed number of steps).

    Why: on XLA's CPU client a chunk runner with the vmapped Newton
    ``while_loop`` inside a multi-device computation stalled, while the
    sharded fixed-step integration alone runs; the first stage is cheap (a
    few Newton iterations against thousands of steps).

    Used like a jitted function: ``runner.lower(thetas).compile()(thetas)``
    (``compile(compiler_options)``: XLA's options for both stages)."""

    def __init__(self, first, second, n_dev, micro_batch=None):
        self.n_dev = n_dev
        self.first = map_variants(first, 1, micro_batch)
        self.second = map_variants(lambda a: second(*a), n_dev, micro_batch)

    def lower(self, thetas):
        return _Lowered(self, thetas)


class _Lowered:
    def __init__(self, runner, thetas):
        self.runner, self.thetas = runner, thetas

    def compile(self, compiler_options=None):
        r = self.runner
        dev0 = jax.devices()[0]
        t0 = jax.device_put(self.thetas, dev0)
        first = r.first.lower(t0).compile(compiler_options)
        if isinstance(r, HostRunner):
            def run_host(thetas, m=None):
                # the padding rows past m are not run (a host solve is expensive)
                carry = jax.device_get(first(jax.device_put(thetas, dev0)))
                rows = [r.second(thetas[i], jax.tree_util.tree_map(lambda a: a[i], carry))
                        for i in range(len(thetas) if m is None else m)]
                return jax.tree_util.tree_map(lambda *a: np.stack([np.asarray(x) for x in a]), *rows)
            return run_host
        carry = jax.eval_shape(r.first, t0)
        from jax.sharding import NamedSharding, PartitionSpec
        sharding = NamedSharding(mesh(r.n_dev), PartitionSpec("variant"))
        spec = lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding)  # noqa: E731
        second = r.second.lower((spec(self.thetas), jax.tree_util.tree_map(spec, carry))).compile(compiler_options)

        def run(thetas):
            c = first(jax.device_put(thetas, dev0))
            return second((jax.device_put(thetas, sharding), jax.device_put(c, sharding)))
        return run
