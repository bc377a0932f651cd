"""Run code inside the smdebug 1.0.34 peer venv (``.venv-smdebug``) and get its results back.

Why a subprocess: smdebug needs numpy<2.3 and protobuf 3.20 (pure Python), so it
cannot share our interpreter. Every oracle test (reader, writer bytes, hook)
and the benchmark go through this one module so the child environment is the
same everywhere:

* a clean environment: no ``PYTHONPATH``/``VIRTUAL_ENV`` from the parent (our
  ``tornasole`` package must never leak into the oracle), ``PYTHONNOUSERSITE``,
  a temporary working directory, fake AWS credentials, smdebug's end-of-training
  delay set to 0 and its logging at ERROR;
* S3: pass ``s3_endpoint=`` (a moto server URL); smdebug 1.0.34 builds plain
  ``boto3.client("s3", region_name=$AWS_REGION)`` clients (``S3Handler.client``,
  ``TSAccessS3``) and has no endpoint setting of its own, so the child gets the
  standard ``AWS_ENDPOINT_URL_S3`` that boto3 (>=1.28) honours itself.

Usage, a snippet::

    res = run_smdebug('''
        from smdebug.trials import create_trial
        t = create_trial(INPUT["path"])
        emit({"steps": t.steps()})
        save_array("w0", t.tensor("w").value(0))
    ''', inputs={"path": str(trial_dir)})
    res.data["steps"], res.arrays["w0"]

The snippet is dedented and runs after a prelude that defines ``INPUT`` (the
JSON-decoded ``inputs``), ``emit(obj)`` (JSON result, last call wins) and
``save_array(key, array)`` (numpy arrays, returned as ``res.arrays``; keys are
free-form strings, e.g. ``"gradient/w|5|worker_0"``; string arrays come back
as ``<U`` arrays). A whole script file can be run with ``run_smdebug_script``;
it receives ``--oracle-in IN.json --oracle-out OUTDIR`` after its own args and
may write ``result.json`` / anything else into OUTDIR (returned as paths).

A failure in the child raises ``SmdebugRunError`` with its stderr tail, so a
test shows smdebug's own traceback.

Why a fork server (``use_fork_server``, which the oracle tier's conftest turns on):
each child used to start a fresh interpreter and import numpy, boto3 and smdebug
(smdebug imports torch): 2-5 s a call on 2 cores, paid some fifty times per
``make test``. The server is one interpreter of the peer venv, started with the
same clean environment, that imports those once and forks a child per call. The
child is then a plain smdebug process: it sets the call's environment, working
directory, ``sys.argv`` and ``sys.path[0]`` as ``python script.py`` would, runs
the script as ``__main__`` and leaves as the interpreter's exit does (non-daemon
threads joined, atexit handlers run: smdebug's writers flush there; streams
flushed) but without tearing down torch's modules, which costs about a second. The benchmarks keep a fresh
interpreter per call: their timings must not inherit warm imports.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
SMDEBUG_VENV = Path(os.environ.get("TORNASOLE_SMDEBUG_VENV", REPO_ROOT / ".venv-smdebug"))
SMDEBUG_PYTHON = SMDEBUG_VENV / "bin" / "python"
SETUP_HINT = "run `make setup-smdebug` (requirements/smdebug.txt lists what that venv needs and why)"

__all__ = [
    "SETUP_HINT",
    "SMDEBUG_PYTHON",
    "SmdebugResult",
    "SmdebugRunError",
    "child_env",
    "check_smdebug_venv",
    "run_smdebug",
    "run_smdebug_script",
    "use_fork_server",
]

_FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}

# Written in front of every snippet. Kept free of anything our venv has and smdebug's lacks.
_PRELUDE = r'''
import json as _json, os as _os, sys as _sys
import numpy as _np
_in_path, _out_dir = _os.environ["TORNASOLE_ORACLE_IN"], _os.environ["TORNASOLE_ORACLE_OUT"]
with open(_in_path, encoding="utf-8") as _f:
    INPUT = _json.load(_f)
_ARRAYS = {}

def emit(obj):
    """The snippet's JSON result (last call wins)."""
    with open(_os.path.join(_out_dir, "result.json"), "w", encoding="utf-8") as _f:
        _json.dump(obj, _f)

def save_array(key, value):
    """Keep a numpy value for the parent; stored under a positional name, key in a manifest."""
    arr = _np.asarray(value)
    if arr.dtype.kind == "O":
        arr = arr.astype(str)
    _ARRAYS[str(key)] = arr

def _flush_arrays():
    keys = list(_ARRAYS)
    _np.savez(_os.path.join(_out_dir, "arrays.npz"), **{f"a{i}": _ARRAYS[k] for i, k in enumerate(keys)})
    with open(_os.path.join(_out_dir, "arrays.json"), "w", encoding="utf-8") as _f:
        _json.dump(keys, _f)

import importlib.util as _ilu
if _ilu.find_spec("tornasole") is not None:
    raise SystemExit("oracle environment leak: `tornasole` is importable inside .venv-smdebug")
del _ilu
'''

# The fork server's program (run as ``python -c``). Requests arrive one JSON line at a time on stdin;
# for each it forks, answers {"pid": N}, waits and answers {"rc": N}. The forked child returns from
# ``_serve`` and runs the request's script below, then exits as any ``python script.py`` does.
_FORK_SERVER = r"""
import json, os, sys
import numpy, boto3, botocore.session  # noqa: F401  (what every child imports; warmed once)
try:
    import smdebug, smdebug.trials  # noqa: F401
except Exception:  # a broken smdebug fails in the child, with its own traceback
    pass


def _serve():
    while True:
        line = sys.stdin.readline()
        if not line:
            raise SystemExit(0)
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            return req
        sys.stdout.write(json.dumps({"pid": pid}) + "\n")
        sys.stdout.flush()
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
        sys.stdout.flush()


_req = _serve()
os.setsid()  # its own process group: a timeout kills the child and anything it started
_null = os.open(os.devnull, os.O_RDONLY)
os.dup2(_null, 0)
for _fd, _key in ((1, "stdout"), (2, "stderr")):
    os.dup2(os.open(_req[_key], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), _fd)
sys.stdin = open(0, closefd=False)
os.chdir(_req["cwd"])
os.environ.clear()
os.environ.update(_req["env"])
sys.argv = list(_req["argv"])
sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
del _req, _null, _fd, _key, _serve
import atexit, runpy, threading, traceback
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
    _rc = 0
except SystemExit as _exit:
    _rc = _exit.code if isinstance(_exit.code, int) else (0 if _exit.code is None else 1)
    if not isinstance(_exit.code, (int, type(None))):
        print(_exit.code, file=sys.stderr)
except BaseException:
    traceback.print_exc()
    _rc = 1
# What the interpreter's exit does for a script, without tearing down torch's modules (about a second):
# join non-daemon threads, run atexit handlers (smdebug's writers flush there), flush the streams.
threading._shutdown()
atexit._run_exitfuncs()
sys.stdout.flush()
sys.stderr.flush()
os._exit(_rc)
"""


class _ForkServer:
    """One long-lived peer interpreter that forks a child per call (see the module docstring)."""

    def __init__(self, python: Path) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="smd-forkserver-")
        self._proc = subprocess.Popen(
            [str(python), "-c", _FORK_SERVER],
            cwd=self._dir.name,
            env=child_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self._pending = b""

    def alive(self) -> bool:
        return self._proc.poll() is None

    def _reply(self, timeout: float) -> dict[str, int]:
        """The server's next JSON line; ``TimeoutError`` when none comes within ``timeout`` seconds."""
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(fd, 4096)
            if not chunk:
                raise SmdebugRunError("the smdebug fork server exited", self._proc.wait(), "", "")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return json.loads(line)

    def run(
        self, argv: list[str], env: dict[str, str], cwd: Path, timeout: float
    ) -> subprocess.CompletedProcess:
        out, err = Path(self._dir.name, "stdout"), Path(self._dir.name, "stderr")
        request = {"argv": argv[1:], "env": env, "cwd": str(cwd), "stdout": str(out), "stderr": str(err)}
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(request).encode() + b"\n")
        self._proc.stdin.flush()
        pid = self._reply(60)["pid"]
        try:
            rc = self._reply(timeout)["rc"]
        except TimeoutError:
            os.killpg(pid, signal.SIGKILL)
            self._reply(60)
            raise subprocess.TimeoutExpired(argv, timeout, _read(out), _read(err)) from None
        return subprocess.CompletedProcess(argv, rc, _read(out), _read(err))

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        self._dir.cleanup()


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


_SERVER_LOCK = threading.Lock()
_server: _ForkServer | None = None
_fork_server_on = False


def use_fork_server(on: bool = True) -> None:
    """Run later calls in children forked from one warm peer interpreter (``False`` stops it)."""
    global _fork_server_on, _server
    with _SERVER_LOCK:
        _fork_server_on = on
        if not on and _server is not None:
            _server.close()
            _server = None


class SmdebugRunError(RuntimeError):
    """The child process failed; carries its return code and output tails."""

    def __init__(self, message: str, returncode: int, stdout: str, stderr: str) -> None:
        super().__init__(
            f"{message} (rc={returncode})\n--- stderr (tail) ---\n{stderr[-6000:]}"
            f"\n--- stdout (tail) ---\n{stdout[-2000:]}"
        )
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


@dataclass
class SmdebugResult:
    """What came back: ``data`` from ``emit``, ``arrays`` from ``save_array``, raw output, extra files."""

    data: Any = None
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    stdout: str = ""
    stderr: str = ""
    files: dict[str, bytes] = field(default_factory=dict)


def child_env(s3_endpoint: str | None = None, extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """A minimal environment for the peer interpreter: nothing of ours, fake AWS, optional moto endpoint."""
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER") if k in os.environ}
    env.update(_FAKE_AWS)
    env.update(
        {
            "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
            "SMDEBUG_LOG_LEVEL": "error",
            "SMDEBUG_TRAINING_END_DELAY_REFRESH": "0",
            "MPLBACKEND": "Agg",
        }
    )
    if s3_endpoint:
        env["AWS_ENDPOINT_URL_S3"] = s3_endpoint
    if extra_env:
        env.update(extra_env)
    return env


def check_smdebug_venv(timeout: float = 180, python: Path | None = None) -> str:
    """Return smdebug's version, or raise ``SmdebugRunError`` saying how to build the venv.

    ``python`` defaults to ``.venv-smdebug/bin/python`` (``$TORNASOLE_SMDEBUG_VENV`` overrides the venv).
    """
    python = SMDEBUG_PYTHON if python is None else Path(python)
    if not python.exists():
        raise SmdebugRunError(f"{python} does not exist: {SETUP_HINT}", -1, "", "")
    code = (
        "import smdebug, smdebug.trials, numpy, google.protobuf\n"
        "print('SMDEBUG_VERSION', smdebug.__version__)"
    )
    with tempfile.TemporaryDirectory(prefix="smd-check-") as cwd:
        proc = subprocess.run(
            [str(python), "-c", code],
            cwd=cwd,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    if proc.returncode != 0:
        raise SmdebugRunError(
            f"`import smdebug.trials` failed with {python}: {SETUP_HINT}",
            proc.returncode,
            proc.stdout,
            proc.stderr,
        )
    for line in proc.stdout.splitlines():
        if line.startswith("SMDEBUG_VERSION "):
            return line.split(" ", 1)[1]
    raise SmdebugRunError("smdebug did not report its version", proc.returncode, proc.stdout, proc.stderr)


def _run(
    argv: list[str],
    inputs: Any,
    out_dir: Path,
    in_path: Path,
    *,
    s3_endpoint: str | None,
    extra_env: dict[str, str] | None,
    timeout: float,
    cwd: Path,
) -> subprocess.CompletedProcess[str]:
    if not SMDEBUG_PYTHON.exists():
        raise SmdebugRunError(f"{SMDEBUG_PYTHON} does not exist: {SETUP_HINT}", -1, "", "")
    in_path.write_text(json.dumps(inputs if inputs is not None else {}), encoding="utf-8")
    env = child_env(s3_endpoint, extra_env)
    env["TORNASOLE_ORACLE_IN"] = str(in_path)
    env["TORNASOLE_ORACLE_OUT"] = str(out_dir)
    try:
        proc = _spawn(argv, env, cwd, timeout)
    except subprocess.TimeoutExpired as exc:
        raise SmdebugRunError(
            f"smdebug child timed out after {timeout}s", -9, str(exc.stdout or ""), str(exc.stderr or "")
        ) from exc
    if proc.returncode != 0:
        raise SmdebugRunError("smdebug child failed", proc.returncode, proc.stdout, proc.stderr)
    return proc


def _spawn(
    argv: list[str], env: dict[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    global _server
    if not _fork_server_on or argv[0] != str(SMDEBUG_PYTHON):
        return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    with _SERVER_LOCK:
        if _server is None or not _server.alive():
            _server = _ForkServer(SMDEBUG_PYTHON)
        return _server.run(argv, env, cwd, timeout)


def _collect(proc: subprocess.CompletedProcess[str], out_dir: Path) -> SmdebugResult:
    res = SmdebugResult(stdout=proc.stdout, stderr=proc.stderr)
    result_json = out_dir / "result.json"
    if result_json.exists():
        res.data = json.loads(result_json.read_text(encoding="utf-8"))
    manifest = out_dir / "arrays.json"
    if manifest.exists():
        keys = json.loads(manifest.read_text(encoding="utf-8"))
        with np.load(out_dir / "arrays.npz", allow_pickle=False) as npz:
            res.arrays = {k: npz[f"a{i}"] for i, k in enumerate(keys)}
    for p in sorted(out_dir.rglob("*")):
        if p.is_file() and p.name not in {"result.json", "arrays.json", "arrays.npz"}:
            res.files[str(p.relative_to(out_dir))] = p.read_bytes()
    return res


def run_smdebug(
    code: str,
    inputs: Any = None,
    *,
    s3_endpoint: str | None = None,
    extra_env: dict[str, str] | None = None,
    timeout: float = 600,
) -> SmdebugResult:
    """Run a snippet in the smdebug venv (see the module docstring for ``INPUT``/``emit``/``save_array``)."""
    with tempfile.TemporaryDirectory(prefix="smd-run-") as tmp:
        tmp_path = Path(tmp)
        out_dir = tmp_path / "out"
        out_dir.mkdir()
        script = tmp_path / "snippet.py"
        script.write_text(_PRELUDE + "\n" + textwrap.dedent(code) + "\n_flush_arrays()\n", encoding="utf-8")
        proc = _run(
            [str(SMDEBUG_PYTHON), str(script)],
            inputs,
            out_dir,
            tmp_path / "in.json",
            s3_endpoint=s3_endpoint,
            extra_env=extra_env,
            timeout=timeout,
            cwd=tmp_path,
        )
        return _collect(proc, out_dir)


def run_smdebug_script(
    script: str | os.PathLike[str],
    args: list[str] | None = None,
    inputs: Any = None,
    *,
    s3_endpoint: str | None = None,
    extra_env: dict[str, str] | None = None,
    timeout: float = 600,
) -> SmdebugResult:
    """Run a script file in the smdebug venv; it gets ``--oracle-in``/``--oracle-out`` after ``args``.

    The same paths are also in ``$TORNASOLE_ORACLE_IN`` / ``$TORNASOLE_ORACLE_OUT``.
    ``result.json`` in the out dir becomes ``.data``; other files come back in ``.files``.
    """
    with tempfile.TemporaryDirectory(prefix="smd-run-") as tmp:
        tmp_path = Path(tmp)
        out_dir = tmp_path / "out"
        out_dir.mkdir()
        in_path = tmp_path / "in.json"
        argv = [
            str(SMDEBUG_PYTHON),
            str(Path(script).resolve()),
            *(args or []),
            "--oracle-in",
            str(in_path),
            "--oracle-out",
            str(out_dir),
        ]
        proc = _run(
            argv,
            inputs,
            out_dir,
            in_path,
            s3_endpoint=s3_endpoint,
            extra_env=extra_env,
            timeout=timeout,
            cwd=tmp_path,
        )
        return _collect(proc, out_dir)


if __name__ == "__main__":  # quick manual check: python tests/oracle/smdebug_runner.py
    print("smdebug", check_smdebug_venv(), "at", SMDEBUG_PYTHON, file=sys.stderr)
