"""The oracle runner itself: a clean child environment, results back, and loud failures.

Why: every oracle test trusts this runner; if it leaked our package into
smdebug's interpreter, or quietly passed when smdebug is missing, the oracle
would prove nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from smdebug_runner import SmdebugRunError, check_smdebug_venv, run_smdebug


def test_runner_environment_is_clean(moto_endpoint: str) -> None:
    """No `tornasole`, no PYTHONPATH, fake credentials; S3 goes to the endpoint we give it."""
    res = run_smdebug(
        """
        import os, importlib.util, boto3
        c = boto3.client("s3")
        emit({"tornasole": importlib.util.find_spec("tornasole") is not None,
              "key": os.environ.get("AWS_ACCESS_KEY_ID"), "pythonpath": os.environ.get("PYTHONPATH"),
              "endpoint": c.meta.endpoint_url})
        """,
        s3_endpoint=moto_endpoint,
    )
    assert res.data == {"tornasole": False, "key": "testing", "pythonpath": None, "endpoint": moto_endpoint}


def test_arrays_and_json_round_trip() -> None:
    res = run_smdebug(
        """
        import numpy as np
        save_array("a/b|1|worker_0", np.arange(6, dtype=np.int32).reshape(2, 3))
        save_array("s", np.array(["ab", "héllo"]))
        save_array("o", np.array(["x", "yz"], dtype=object))
        save_array("z", np.float16(1.5))
        emit({"got": INPUT["x"] * 2})
        """,
        inputs={"x": 21},
    )
    assert res.data == {"got": 42}
    assert res.arrays["a/b|1|worker_0"].dtype == np.int32
    assert res.arrays["a/b|1|worker_0"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert res.arrays["s"].tolist() == ["ab", "héllo"]
    assert res.arrays["o"].tolist() == ["x", "yz"]
    assert res.arrays["z"].dtype == np.float16
    assert res.arrays["z"].shape == ()


def test_child_failure_raises_with_its_traceback() -> None:
    with pytest.raises(SmdebugRunError, match="ZeroDivisionError"):
        run_smdebug("1 / 0")


def test_missing_or_broken_venv_fails_loudly(tmp_path: Path) -> None:
    with pytest.raises(SmdebugRunError, match="make setup-smdebug"):
        check_smdebug_venv(python=tmp_path / "nope" / "bin" / "python")
    # an interpreter without smdebug (ours) is as unusable as none
    with pytest.raises(SmdebugRunError, match="make setup-smdebug"):
        check_smdebug_venv(python=Path(sys.executable))


def test_forked_children_share_nothing_and_exit_normally() -> None:
    """Children forked from the warm server: one call's module state and variables never reach the next,
    and the exit runs atexit handlers (smdebug's writers flush there)."""
    first = run_smdebug(
        """
        import atexit, os, smdebug
        smdebug.LEFT_BY_FIRST_CALL = 1
        os.environ["LEFT_BY_FIRST_CALL"] = "1"
        out = os.environ["TORNASOLE_ORACLE_OUT"]
        atexit.register(lambda: open(os.path.join(out, "atexit.txt"), "w").write("ran"))
        emit({"pid": os.getpid()})
        """
    )
    second = run_smdebug(
        """
        import os, smdebug
        emit({"pid": os.getpid(), "module": hasattr(smdebug, "LEFT_BY_FIRST_CALL"),
              "env": "LEFT_BY_FIRST_CALL" in os.environ, "cwd": os.path.basename(os.getcwd())[:8]})
        """
    )
    assert first.files == {"atexit.txt": b"ran"}
    assert second.data["pid"] != first.data["pid"]
    left = {k: second.data[k] for k in ("module", "env", "cwd")}
    assert left == {"module": False, "env": False, "cwd": "smd-run-"}


def test_child_timeout_is_killed_and_reported() -> None:
    with pytest.raises(SmdebugRunError, match="timed out after 2"):
        run_smdebug("import time\ntime.sleep(120)", timeout=2)
    # the runner is still usable afterwards
    assert run_smdebug("emit(7)").data == 7
