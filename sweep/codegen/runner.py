"""The generated backend as a chunk runner: each variant - its static
equilibrium and its integration - as model-specific C generated from the
same per-variant JAX function (:mod:`sweep.codegen.emit`), variants in
groups of W (one SIMD vector), groups spread over the CPU cores by threads;
where the generator cannot translate the equilibrium, the equilibria on
XLA (the first stage of :class:`sweep.engine.mapping.StagedRunner`) and the
integration generated. Which backend a job gets: :func:`resolve`.

When the generated code cannot be built (no C compiler, a primitive the
generator does not know) the runner logs one line saying why and runs
the whole chunk on XLA instead (the ``fallback`` runner): a job never
fails for the backend's sake.
"""
from __future__ import annotations

import concurrent.futures
import logging
import os
import time

import jax
import numpy as np

from sweep.engine import mapping

log = logging.getLogger("sweep")

BACKENDS = ("xla", "generated", "auto")
LANES = 4                 # variants per SIMD vector (AVX2: 4 float64); BENCHMARKS.md "Generated backend"


AUTO_ENV = "AXLE_AUTO_BACKEND"   # xla | generated: what ``auto`` means in this process (the tests pin xla)


# A job of fewer variant-steps runs on XLA under ``auto``: about what XLA
# integrates (single variant, 2,000-3,000 variant-steps/s on the double
# wishbone) in the time a first build of the generated C takes (tracing,
# generating and gcc: 30-40 s). XLA's program is keyed on the structure and
# reads every value at run time, so the next job with a changed load, rate
# or mass reuses it; the generated C is specialised to the values
# (BENCHMARKS.md, "Values as run-time inputs").
GENERATED_MIN_VARIANT_STEPS = 60_000


def resolve(backend, jittable, platform=None, variant_steps=None, built=None):
    """'xla' or 'generated' for the config's ``integrator.backend``
    (:func:`choose`, without its reason)."""
    return choose(backend, jittable, platform, variant_steps, built)[0]


def choose(backend, jittable, platform=None, variant_steps=None, built=None):
    """(backend, why) for the config's ``integrator.backend`` (default auto):
    auto is the generated code on a CPU for a traced (fixed-step) method
    when a C compiler is there and the job has at least
    :data:`GENERATED_MIN_VARIANT_STEPS` variant-steps (``variant_steps``;
    None: a large job) or its generated code is already built (``built()``
    True: an earlier run built it, and the code reads the values at run
    time), XLA otherwise (a short job, accelerators, the host reference
    methods), with one line in the log saying why. On a CPU without a
    compiler, auto logs one line saying so. ``$AXLE_AUTO_BACKEND`` (xla |
    generated) fixes what auto means, for a test run or a machine whose
    compiler should not be used.

    ``why``: "chosen" (the config's own choice), "pinned", "not traced",
    "accelerator", "no compiler", "large", "built" (a short job on code
    already built) or "short" (a short job on XLA, compiled for a quick
    start: :data:`sweep.engine.stream.QUICK_START`; its generated code is
    not built yet: :mod:`sweep.prebuild` builds it after the job)."""
    from sweep.codegen.build import BuildError
    from sweep.codegen.build import compiler as find_compiler

    def compiler():
        try:
            return find_compiler()
        except BuildError as err:       # $CC names no compiler: the user's setting, an error
            from sweep.core.config import ConfigError
            raise ConfigError(str(err)) from None
    backend = backend or "auto"
    if not jittable:
        return "xla", "not traced"
    if backend == "generated":
        compiler()
    if backend != "auto":
        return backend, "chosen"
    pinned = os.environ.get(AUTO_ENV, "").strip()
    if pinned:
        if pinned not in ("xla", "generated"):
            from sweep.core.config import ConfigError
            raise ConfigError(f"environment variable {AUTO_ENV} = {pinned!r} must be xla or generated")
        return pinned, "pinned"
    platform = platform or jax.default_backend()
    if platform != "cpu":
        return "xla", "accelerator"
    if compiler() is None:
        log.info("integrator.backend=auto: no C compiler found (set CC, or install gcc or clang), "
                 "so the integration runs on XLA")
        return "xla", "no compiler"
    if variant_steps is not None and variant_steps < GENERATED_MIN_VARIANT_STEPS:
        if built is not None and built():
            log.info(f"integrator.backend=auto: a short job ({variant_steps:,} variant-steps) runs on the "
                     "generated code that an earlier run built for this structure (it reads the values at "
                     "run time)")
            return "generated", "built"
        log.info(f"integrator.backend=auto: a short job ({variant_steps:,} variant-steps < "
                 f"{GENERATED_MIN_VARIANT_STEPS:,}) runs on XLA, compiled for a quick start (optimisation "
                 "level 0), whose compiled program a rerun with changed values reuses "
                 "(integrator.backend=xla compiles it optimised, integrator.backend=generated builds the C)")
        return "xla", "short"
    return "generated", "large"


def whole_prekey(job_key, n_params, values_key):
    """The prekey of a job's whole-variant generated code
    (:func:`sweep.codegen.build.load_or_build`): the job's trace-cache key,
    its number of sweep parameters and the values' pattern digest."""
    import hashlib
    return hashlib.sha256(f"{job_key}:whole:{(int(n_params),)}:{values_key}".encode()).hexdigest()


def library_record(job_key, n_params, values_key, chunk):
    """The cache record of a job's whole-variant generated code (its key,
    sweep parameters, values' pattern and chunk size):
    :func:`sweep.codegen.build.record_built` tells whether it is built."""
    from sweep.codegen import build
    W = 1 if int(chunk) == 1 else LANES
    return build.prekey_record(whole_prekey(job_key, n_params, values_key), W, shared=(1,), fold=True)


class GeneratedRunner:
    """A chunk runner (host protocol of :class:`sweep.engine.mapping.HostRunner`):
    ``first(theta) -> carry`` mapped and compiled by XLA, ``second(theta,
    carry) -> outputs`` generated as C; ``fallback`` the XLA chunk runner
    used when the C cannot be built. ``values_key``: a digest of the values
    the generated ``second`` folds in (its C is specialised to them, unlike
    the XLA stages, which read them at run time: :mod:`sweep.engine.values`);
    it keys the generated code's cache entry beside the job's key.
    ``shared``: the values are the same for every variant, and a chunk is
    the pair ``(thetas, values)`` (:func:`sweep.engine.mapping.map_variants`):
    the equilibrium stage reads them unbatched, the generated integration
    takes the thetas only.

    ``whole``: the per-variant function ``theta -> outputs`` (equilibrium and
    integration, the values folded in like ``second``'s). When given, the
    whole variant is generated as one C program - the static equilibria's
    Newton iterations on the generated linearisation and block solver, then
    the integration - and XLA compiles nothing; a primitive the generator
    does not know there falls back to the two stages.

    ``fold``: with ``shared``, the job's values vector; the generated code
    then reads the values at run time too (``whole(theta, values)``,
    ``second(theta, values, carry)``) and compiles in only their pattern -
    which are 0 or +-1 (:func:`sweep.codegen.emit.shared_pattern`) - so a
    changed load, rate, mass or hardpoint reuses the built code;
    ``values_key`` is then the pattern's digest. (A chunk's example values
    at lowering are zeros of the right shape, so the pattern is taken from
    this vector.)

    ``rows_fold``: without ``shared``, a chunk's rows are ``[theta |
    values]`` with each variant's own values (a design that moves
    hardpoints: each variant its own geometry); the code reads them per
    variant and compiles in only the pattern ``rows_fold``
    (:func:`sweep.codegen.emit.rows_pattern`: the 0 and +-1 that every
    variant shares); ``values_key`` is its digest. A chunk with a variant
    outside the pattern runs on XLA (one line in the log), never on code
    built for other values."""
    host = True

    def __init__(self, first, second, fallback, micro_batch=None, lanes=LANES, threads=None, values_key="",
                 shared=False, whole=None, fold=False, rows_fold=None):
        self.whole = whole
        self.rows_fold = None if shared or rows_fold is None else np.asarray(rows_fold, np.int64)
        self.fold = np.asarray(fold, np.float64) if shared and fold is not None and fold is not False else None
        self.values_key = values_key
        self.first_fn = first
        self.micro_batch = micro_batch
        self.shared = shared
        self.second = second
        self.fallback = fallback
        self.lanes = lanes
        self.threads = threads
        self.info = {}

    def first_on(self, n_dev):
        """The equilibrium stage mapped over ``n_dev`` CPU devices (each its
        slice of the chunk: :func:`sweep.engine.mapping.map_variants`)."""
        first = self.first_fn
        if not self.shared:
            return mapping.map_variants(first, n_dev, self.micro_batch)
        return mapping.map_variants(lambda theta, vec: first((theta, vec)), n_dev, self.micro_batch,
                                    shared=True)

    def lower(self, thetas, key=None):
        """``key``: the job's trace-cache key (:func:`sweep.core.tracecache.fingerprint`
        of everything the runner closes over). With it a rerun skips tracing:
        the equilibrium stage comes from the trace cache, the generated code
        from the generated-code cache without tracing the integration."""
        return _Lowered(self, thetas, key)


class _Lowered:
    def __init__(self, runner, thetas, key=None):
        pair = isinstance(thetas, tuple)          # (thetas, shared values)
        self.runner, self.key = runner, key
        self.thetas = tuple(np.asarray(a) for a in thetas) if pair else np.asarray(thetas)
        self.theta_rows = self.thetas[0] if pair else self.thetas

    def lanes(self):
        """Variants per vector: the runner's (4, AVX2) for a batch; 1 for a
        chunk of one variant, whose other three lanes would compute padding:
        scalar code steps 10-15 % faster there and gcc builds it in a
        quarter less time (BENCHMARKS.md, "Generated backend, sixth session")."""
        return 1 if len(self.theta_rows) == 1 else self.runner.lanes

    def compile(self):
        import hashlib
        from sweep.codegen import build, emit
        r = self.runner
        sub = (lambda label: hashlib.sha256(f"{self.key}:{label}".encode()).hexdigest()) if self.key else \
            (lambda label: None)
        if r.whole is not None:
            theta0 = np.zeros(self.theta_rows.shape[1:], self.theta_rows.dtype)
            args, opts = ((theta0, r.fold), dict(shared=(1,), fold=True)) if r.fold is not None else \
                ((theta0,), dict(rows_fold=r.rows_fold))
            prekey = whole_prekey(self.key, theta0.shape[0], r.values_key) if self.key else None
            try:
                gen, fn, info = build.load_or_build(r.whole, *args, W=self.lanes(), **opts, prekey=prekey)
            except emit.Unsupported as err:
                log.info(f"generated backend: the static equilibria stay on XLA ({err})")
            except build.BuildError as err:
                return self._on_xla(err)
            else:
                return self._run_whole(gen, fn, info)
        return self._compile_stages(sub)

    def _on_xla(self, err):
        """The whole chunk on XLA (the fallback runner), with one line saying why."""
        r = self.runner
        log.warning(f"warning: generated backend not available ({err}); running on XLA")
        r.info = {"backend": "xla", "why": str(err)}
        return self._xla()

    def _xla(self):
        dev0 = jax.devices()[0]
        compiled = self.runner.fallback.lower(jax.device_put(self.thetas, dev0)).compile()
        return lambda thetas, m=None: jax.device_get(compiled(jax.device_put(thetas, dev0)))

    def _outside_pattern(self, thetas, theta_rows, m):
        """With ``rows_fold``: the outputs (first ``m`` rows) of a chunk whose
        rows leave the compiled pattern, computed on XLA; None for a chunk
        the generated code may run."""
        from sweep.codegen import emit
        r = self.runner
        if r.rows_fold is None:
            return None
        ok = emit.rows_agree(theta_rows[:m], r.rows_fold)
        if ok.all():
            return None
        if getattr(self, "_xla_run", None) is None:
            log.warning(f"warning: generated backend: {int((~ok).sum())} variant(s) of a chunk have a 0 or "
                        "+-1 where the code was built for another value (a moved point made a frame "
                        "axis-parallel?); such chunks run on XLA")
            self._xla_run = self._xla()
        return jax.tree_util.tree_map(lambda a: np.asarray(a)[:m], self._xla_run(thetas, m))

    def _run_whole(self, gen, fn, info):
        from sweep.codegen import build
        r = self.runner
        kernel = build.Kernel(gen, fn, threads=r.threads)
        r.info = {"backend": "generated", "statements": gen.n_statements, "lanes": gen.W,
                  "threads": kernel.threads, "whole": True, **info,
                  "trace_skipped": bool(info.get("trace_skipped"))}
        _log_built(gen, kernel, info, "equilibria and integration")

        def run(thetas, m=None):
            theta_rows = np.asarray(thetas[0] if isinstance(thetas, tuple) else thetas)
            m = len(theta_rows) if m is None else int(m)
            if r.fold is not None:
                return kernel(theta_rows[:m], self._values(thetas[1]))
            outside = self._outside_pattern(thetas, theta_rows, m)
            if outside is not None:
                return outside
            return kernel(theta_rows[:m])
        return run

    def _values(self, vec):
        """The shared values of a chunk, checked once per distinct vector
        against the pattern the code was built for (a differing pattern would
        give wrong numbers, so it is an error, never a silent result)."""
        from sweep.codegen import emit
        vec = np.asarray(vec, np.float64)
        digest = hash(vec.tobytes())
        if digest != getattr(self, "_checked", None):
            pattern = lambda v: emit.shared_pattern((None, v), (1,))      # noqa: E731
            if vec.shape != self.runner.fold.shape or \
                    not np.array_equal(pattern(vec), pattern(self.runner.fold)):
                raise RuntimeError("generated backend: the values' pattern (which are 0 or +-1) differs "
                                   "from the one the code was built for")
            self._checked = digest
        return vec

    def _compile_stages(self, sub):
        from sweep.core import tracecache
        from sweep.codegen import build, emit
        r = self.runner
        dev0 = jax.devices()[0]
        # the equilibria of a chunk over every CPU device (the integration's
        # threads use every core; without this the equilibria ran on one)
        n_eq = equilibrium_devices(len(self.theta_rows))
        place = (lambda t: jax.device_put(t, dev0)) if n_eq == 1 else (lambda t: mapping.place(t, n_eq))
        first_fn, first_loaded = tracecache.traced(r.first_on(n_eq), (self.thetas,),
                                                   sub("equilibria" if n_eq == 1 else f"equilibria:{n_eq}"))
        lowered = first_fn.lower(place(self.thetas))
        carry = jax.eval_shape(first_fn, self.thetas)
        theta0 = np.zeros(self.theta_rows.shape[1:], self.theta_rows.dtype)    # the integration reads thetas only
        carry0 = jax.tree_util.tree_map(lambda a: np.zeros(a.shape[1:], a.dtype), carry)
        # XLA compiles the equilibrium stage (native code, without the GIL)
        # while this thread traces and generates the integration and gcc
        # builds it: a first run pays the longer of the two, not the sum
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="xla-compile") as pool:
            first_job = pool.submit(lowered.compile)
            args, opts = (((theta0, r.fold, carry0), dict(shared=(1,), fold=True)) if r.fold is not None
                          else ((theta0, carry0), dict(rows_fold=r.rows_fold)))
            try:
                gen, fn, info = build.load_or_build(r.second, *args, W=self.lanes(), **opts,
                                                    prekey=sub(f"integration:{theta0.shape}:" + r.values_key))
                err = None
            except (emit.Unsupported, build.BuildError) as e:
                err = e
            first = first_job.result()
        if err is not None:
            return self._on_xla(err)
        kernel = build.Kernel(gen, fn, threads=r.threads)
        r.info = {"backend": "generated", "statements": gen.n_statements, "lanes": gen.W,
                  "threads": kernel.threads, **info,
                  "trace_skipped": bool(first_loaded and info.get("trace_skipped"))}
        _log_built(gen, kernel, info, "integration; equilibria on XLA")

        split = r.info.setdefault("split", {"equilibria_s": 0.0, "integration_s": 0.0})

        def run(thetas, m=None):
            theta_rows = np.asarray(thetas[0] if isinstance(thetas, tuple) else thetas)
            m = len(theta_rows) if m is None else int(m)
            outside = self._outside_pattern(thetas, theta_rows, m)
            if outside is not None:
                return outside
            t0 = time.perf_counter()
            c = jax.device_get(first(place(thetas)))
            rows = jax.tree_util.tree_map(lambda a: np.asarray(a)[:m], c)
            t1 = time.perf_counter()
            out = (kernel(theta_rows[:m], self._values(thetas[1]), rows) if r.fold is not None
                   else kernel(theta_rows[:m], rows))
            split["equilibria_s"] += t1 - t0
            split["integration_s"] += time.perf_counter() - t1
            return out
        return run


def _log_built(gen, kernel, info, what):
    per_vector = "1 variant per vector (scalar code)" if gen.W == 1 else f"{gen.W} variants per vector"
    if info.get("trace_skipped"):
        log.info(f"generated backend ({what}): {gen.n_statements} statements from the cache (not traced: "
                 f"loaded in {info['trace_s']:.1f} s), {per_vector}, {kernel.threads} thread(s)")
    elif info["cached"]:
        log.info(f"generated backend ({what}): {gen.n_statements} statements from the cache (traced in "
                 f"{info['trace_s']:.1f} s), {per_vector}, {kernel.threads} thread(s)")
    else:
        log.info(f"generated backend ({what}): {gen.n_statements} statements, {per_vector}, "
                 f"{kernel.threads} thread(s); traced in {info['trace_s']:.1f} s, generated in "
                 f"{info['generate_s']:.1f} s, compiled in {info['build_s']:.1f} s")


def equilibrium_devices(chunk):
    """CPU devices the equilibrium stage of a chunk of ``chunk`` variants is
    split over: all of this process's CPU devices where they divide it into
    slices of at least 8 variants, else one."""
    n = len(jax.devices("cpu")) if jax.default_backend() == "cpu" else 1
    return n if n > 1 and chunk % n == 0 and chunk // n >= 8 else 1


def default_threads():
    from sweep.core.runtime import usable_cores
    return int(os.environ.get("AXLE_GENERATED_THREADS", 0)) or usable_cores()
