"""The layer `make layer` builds: cp312 manylinux wheels for the function's architecture + tornasole."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import aws_cdk as cdk
import pytest

from infra.config import ConfigError, StackConfig
from infra.constructs.evaluator import LAYER_MARKER
from infra.stack import TornasoleStack

REPO_ROOT = Path(__file__).resolve().parents[2]
ELF_MACHINE = {"x86_64": 62, "arm64": 183}  # e_machine: EM_X86_64, EM_AARCH64
SHADOWING = ("boto3", "botocore", "s3transfer", "urllib3", "dateutil")


def _python312() -> str:
    candidates = [os.environ.get("PY312", ""), shutil.which("python3.12") or ""]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))
    for exe in filter(None, candidates):
        ok = subprocess.run(
            [exe, "-c", "import sys; assert sys.version_info[:2] == (3, 12)"], capture_output=True
        )
        if ok.returncode == 0:
            return exe
    pytest.fail(
        "python3.12 is needed to import the layer as Lambda's python3.12 runtime would "
        "(install CPython 3.12, e.g. `pyenv install 3.12`, or set PY312=/path/to/python3.12)"
    )


@pytest.fixture(scope="session")
def layers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("layers")
    env = {**os.environ, "PYTHON": str(REPO_ROOT / ".venv/bin/python")}
    # both architectures at once: each build is mostly waiting on pip
    procs = {
        arch: subprocess.Popen(
            ["scripts/build_layer.sh", arch, str(root / arch)],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for arch in ("x86_64", "arm64")
    }
    built = {}
    for arch, proc in procs.items():
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        built[arch] = root / arch
    return built


def _elf_machine(path: Path) -> int:
    header = path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF", path
    return int.from_bytes(header[18:20], "little")


@pytest.mark.parametrize("arch", ["x86_64", "arm64"])
def test_native_wheels_match_the_architecture(layers: dict[str, Path], arch: str) -> None:
    site = layers[arch] / "python"
    assert (site / LAYER_MARKER.removeprefix("python/")).read_text().split() == [
        f"arch={arch}",
        "python=3.12",
    ]
    extensions = list((site / "numpy").rglob("_multiarray_umath.cpython-312-*.so"))
    assert extensions, "numpy's cp312 core extension is missing"
    assert {_elf_machine(p) for p in extensions} == {ELF_MACHINE[arch]}
    for name in (
        "tornasole",
        "numpy",
        "google/protobuf",
        "google_crc32c",
        "aws_lambda_powertools",
        "aws_xray_sdk",
    ):
        assert (site / name).is_dir(), name
    # The runtime's boto3/botocore must not be shadowed by copies aws-xray-sdk drags in.
    assert not [p.name for p in site.iterdir() if p.name.startswith(SHADOWING)]
    size = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
    assert size < 200 * 2**20, f"{size / 2**20:.0f} MiB unzipped: too close to Lambda's 250 MB limit"


def test_x86_64_layer_imports_and_computes_under_python312(layers: dict[str, Path]) -> None:
    # GIVEN the x86_64 layer on PYTHONPATH of a bare CPython 3.12 (what Lambda's runtime adds: /opt/python)
    code = (
        "import numpy as np, google_crc32c, aws_lambda_powertools, sys\n"
        "from tornasole.format import event_records\n"
        "from tornasole.modes import ModeKeys\n"
        "value = np.arange(6, dtype=np.float32).reshape(2, 3)\n"
        "payload = event_records.encode_event('w', value, step=3, mode=ModeKeys.TRAIN, mode_step=3)\n"
        "rec = event_records.decode_event(payload)\n"
        "assert rec.value.sum() == 15 and rec.step == 3, rec\n"
        "print(np.__version__, sys.version_info[:2])\n"
    )
    # -s: no user site-packages; only the interpreter's stdlib and the layer are importable
    proc = subprocess.run(
        [_python312(), "-s", "-c", code],
        env={"PYTHONPATH": str(layers["x86_64"] / "python"), "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "(3, 12)" in proc.stdout


def test_a_layer_built_for_another_architecture_is_refused(tmp_path: Path) -> None:
    layer = tmp_path / "layer"
    (layer / "python").mkdir(parents=True)
    (layer / LAYER_MARKER).write_text("arch=x86_64\npython=3.12\n")
    config = StackConfig.from_mapping({"lambda_architecture": "arm64"})
    with pytest.raises(ConfigError, match="make layer ARCH=arm64"):
        TornasoleStack(cdk.App(), "Mismatch", config=config, layer_dir=layer)


def test_a_missing_layer_says_how_to_build_it(tmp_path: Path) -> None:
    config = StackConfig.from_mapping({})
    with pytest.raises(ConfigError, match="make layer ARCH=x86_64"):
        TornasoleStack(cdk.App(), "Missing", config=config, layer_dir=tmp_path / "nothing")
