"""The generated library's cache is as trustworthy as the store: a damaged
library is rebuilt, never loaded (loading damaged machine code crashes the
process without a message); ``CC`` naming no compiler is an error naming
it; the temporary folders of killed builds are removed on the next build,
never a build in progress."""
import logging
import os
import socket
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from sweep.codegen import build

pytestmark = pytest.mark.skipif(build.compiler() is None, reason="no C compiler")


def _small(x):
    return jnp.sin(3.0 * x) + x * x


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AXLE_JAX_CACHE_DIR", str(tmp_path / "jax"))
    return tmp_path / "generated"


def _libraries(folder):
    return sorted(p for p in os.listdir(folder) if p.endswith(".so"))


def _replace(path, data):
    """Damage the cached file as another process would: a new file moved in
    (this process has the old one mapped; writing into it would crash it)."""
    tmp = str(path) + ".new"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def test_a_damaged_library_is_rebuilt_not_loaded(cache, caplog):
    xs = np.linspace(-1.0, 1.0, 8)
    gen, fn, info = build.load_or_build(_small, xs[0], W=4)
    assert not info["cached"]
    (so,) = _libraries(cache)
    path = cache / so
    assert build.intact(str(path)) and (cache / (so + ".sha256")).exists()
    good = path.read_bytes()
    # cut to half (a full disk, a killed copy): detected before loading, rebuilt
    _replace(path, good[: len(good) // 2])
    assert not build.intact(str(path))
    with caplog.at_level(logging.WARNING, logger="sweep"):
        build.build(gen)
    assert "is damaged" in caplog.text and "building it again" in caplog.text
    assert build.intact(str(path)) and len(path.read_bytes()) == len(good)
    # 256 bytes changed in place: the same
    damaged = bytearray(good)
    k = len(good) // 3
    damaged[k: k + 256] = bytes(b ^ 0xFF for b in damaged[k: k + 256])
    _replace(path, bytes(damaged))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sweep"):
        build.build(gen)
    assert "is damaged" in caplog.text and build.intact(str(path))


def test_a_rerun_in_a_new_process_with_a_damaged_library_computes_right(cache):
    """The user's case: a cached library damaged between two runs; the next
    process rebuilds it and gets the right numbers (a damaged library
    loaded would crash it)."""
    xs = np.linspace(-1.0, 1.0, 8)
    build.load_or_build(_small, xs[0], W=4)
    (so,) = _libraries(cache)
    path = cache / so
    _replace(path, path.read_bytes()[:4096])
    code = ("import numpy as np, jax.numpy as jnp\n"
            "from sweep.codegen import build\n"
            "f = lambda x: jnp.sin(3.0 * x) + x * x\n"
            "xs = np.linspace(-1.0, 1.0, 8)\n"
            "gen, fn, info = build.load_or_build(f, xs[0], W=4)\n"
            "print(np.max(np.abs(build.Kernel(gen, fn, threads=1)(xs) - (np.sin(3 * xs) + xs * xs))))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ), cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                              os.path.dirname(os.path.abspath(__file__))))))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert float(proc.stdout.split()[-1]) < 1e-12
    assert build.intact(str(path))


def test_cc_naming_no_compiler_is_an_error_naming_it(monkeypatch):
    from sweep.codegen.runner import resolve
    from sweep.core.config import ConfigError
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.delenv("AXLE_AUTO_BACKEND", raising=False)     # auto decides by itself
    with pytest.raises(build.BuildError, match=r"CC = '/nonexistent/cc' names no compiler"):
        build.compiler()
    for backend in ("auto", "generated"):
        with pytest.raises(ConfigError, match=r"CC = '/nonexistent/cc' names no compiler"):
            resolve(backend, True, platform="cpu")


def test_killed_builds_are_cleaned_and_builds_in_progress_kept(tmp_path):
    host = socket.gethostname()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folders = {"dead": f"build-{host}-{dead.pid}-abc", "alive": f"build-{host}-{os.getppid()}-def",
               "mine": f"build-{host}-{os.getpid()}-ghi", "other_host": f"build-elsewhere-{dead.pid}-x",
               "not_a_build": "tmp123"}
    for name in folders.values():
        (tmp_path / name).mkdir()
        (tmp_path / name / "part0.o").write_bytes(b"x" * 100)
    build.clean_stale_builds(str(tmp_path))
    left = set(os.listdir(tmp_path))
    assert folders["dead"] not in left
    assert {folders[k] for k in ("alive", "mine", "other_host", "not_a_build")} <= left
