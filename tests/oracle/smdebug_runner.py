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
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
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
        proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise SmdebugRunError(
            f"smdebug child timed out after {timeout}s", -9, str(exc.stdout or ""), str(exc.stderr or "")
        ) from exc
    if proc.returncode != 0:
        raise SmdebugRunError("smdebug child failed", proc.returncode, proc.stdout, proc.stderr)
    return proc


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
