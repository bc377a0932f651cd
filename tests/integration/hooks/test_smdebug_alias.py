"""Unchanged smdebug code (training script, notebook-style reading, rule file) on Tornasole via the alias.

Each run is a fresh interpreter, as a user's would be: the alias is process
wide, and the refusal case needs an interpreter that can see an installed
``smdebug`` distribution.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "smdebug_scripts"
REPO_LAYERS = Path(__file__).resolve().parents[3] / "layers"


def _run(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("TORNASOLE_SMDEBUG_ALIAS", "PYTHONPATH")}
    base.pop("SMDEBUG_CONFIG_FILE_PATH", None)
    base.pop("TORNASOLE_CONFIG_FILE_PATH", None)
    return subprocess.run(
        [sys.executable, *args],
        cwd=tmp_path,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_unchanged_script_notebook_and_rule_file_run_with_the_alias(tmp_path: Path):
    out = tmp_path / "trial"
    train = _run(
        ["-m", "tornasole.compat.smdebug_alias", str(SCRIPTS / "train_smdebug.py"), str(out)], tmp_path
    )
    assert train.returncode == 0, train.stderr[-3000:]
    assert "trained tornasole.pytorch.hook" in train.stdout

    # the notebook turns the alias on with the environment variable and one `import tornasole`
    code = (
        "import runpy, sys, tornasole; sys.argv = sys.argv[1:]; "
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    nb = _run(
        ["-c", code, str(SCRIPTS / "notebook_smdebug.py"), str(out), str(SCRIPTS)],
        tmp_path,
        TORNASOLE_SMDEBUG_ALIAS="1",
    )
    assert nb.returncode == 0, nb.stderr[-3000:]
    result = json.loads(nb.stdout.strip().splitlines()[-1])
    assert result["train_steps"] == [0, 2, 4]
    assert result["eval_steps"] == [0, 1]  # mode steps, as smdebug answers
    assert result["steps"] == [0, 2, 4, 6, 7]
    assert result["loss_name"] == "MSELoss_output_0"
    assert result["weights"] == ["Sequential_0.weight", "Sequential_2.weight"]
    assert result["has_gradients"] is True
    assert result["step1"] == "unavailable"
    assert result["fired_at"] == 4


def test_one_line_import_and_module_identity(tmp_path: Path):
    code = (
        "import tornasole.compat.smdebug_alias\n"
        "import smdebug, smdebug.trials, smdebug.core.modes, smdebug.exceptions, tornasole.trials\n"
        "from smdebug.core.save_config import SaveConfig\n"
        "from smdebug import SaveConfig as S2, modes\n"
        "assert smdebug.trials is tornasole.trials and SaveConfig is S2\n"
        "assert smdebug.core.modes.ModeKeys.TRAIN is modes.TRAIN\n"
        "import sys, tornasole, tornasole.exceptions\n"
        "assert smdebug.SaveConfig is tornasole.SaveConfig and smdebug.modes is tornasole.modes\n"
        "from smdebug.exceptions import SMDebugValueError, StepUnavailable\n"
        "assert StepUnavailable is tornasole.exceptions.StepUnavailable\n"
        "assert tornasole.exceptions is sys.modules['tornasole.exceptions']  # not replaced by the alias\n"
        "assert smdebug.exceptions is sys.modules['smdebug.exceptions']\n"
        "try:\n"
        "    SaveConfig(10)\n"
        "except SMDebugValueError as exc:\n"
        "    print('caught:', type(exc).__name__)\n"
        "from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader\n"
        "from smdebug.trials.profiler_trial import ProfilerTrial\n"
        "import tornasole.profiler.readers as readers, tornasole.profiler.analysis as analysis\n"
        "assert LocalSystemMetricsReader is readers.LocalSystemMetricsReader\n"
        "assert ProfilerTrial is analysis.ProfilerTrial\n"
        "try:\n"
        "    import smdebug.profiler.analysis.utils.pandas_data_analysis\n"
        "except ImportError as exc:\n"
        "    print('missing:', exc)\n"
    )
    res = _run(["-c", code], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    missing = "smdebug.profiler.analysis.utils.pandas_data_analysis (mapped to tornasole.profiler.analysis."
    assert missing in res.stdout
    assert "is not provided by Tornasole" in res.stdout
    assert "caught: ConfigurationError" in res.stdout


def test_refuses_when_the_real_smdebug_is_installed(tmp_path: Path):
    site = tmp_path / "site"
    (site / "smdebug").mkdir(parents=True)
    (site / "smdebug" / "__init__.py").write_text("REAL = True\n")
    dist = site / "smdebug-1.0.34.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: smdebug\nVersion: 1.0.34\n")
    env = {"PYTHONPATH": f"{site}{os.pathsep}{REPO_LAYERS}"}
    res = _run(["-c", "import tornasole.compat.smdebug_alias"], tmp_path, **env)
    assert res.returncode != 0
    assert (
        "SmdebugAliasError: the real smdebug is present (the installed distribution smdebug 1.0.34)"
        in res.stderr
    )
    assert "pip uninstall smdebug" in res.stderr
    # the environment variable path refuses the same way, and the real package stays importable
    res = _run(["-c", "import tornasole"], tmp_path, TORNASOLE_SMDEBUG_ALIAS="1", **env)
    assert "the real smdebug is present" in res.stderr
    res = _run(["-c", "import tornasole, smdebug; print(smdebug.REAL)"], tmp_path, **env)
    assert res.stdout.strip() == "True"


@pytest.mark.parametrize("argv", [[], ["-m"]])
def test_runner_usage(tmp_path: Path, argv: list[str]):
    res = _run(["-m", "tornasole.compat.smdebug_alias", *argv], tmp_path)
    assert res.returncode == 2
    assert "usage: python -m tornasole.compat.smdebug_alias" in res.stderr
