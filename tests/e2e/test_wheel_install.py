"""The product on its own: build the wheel, install it into a clean venv outside the checkout, use it.

One venv (module fixture) serves every check, in the order a new user goes:
``pip install 'tornasole[demo]'`` (local + pytorch + plot) with the newest numpy/protobuf the
ranges allow, ``tornasole local up`` (serves, then stops on Ctrl-C),
``tornasole demo``, a hook write and ``create_trial`` read, ``pip check``;
then the oldest numpy/protobuf/google-crc32c the ranges allow, the same
write + read and ``pip check``. Nothing runs from the source tree: the
commands run in a temporary directory with no ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.version import Version

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ROUNDTRIP = Path(__file__).resolve().parent / "wheel_scripts" / "hook_roundtrip.py"
TORCH = "torch==2.13.0"
CORE = ("numpy", "protobuf", "google-crc32c")
# The public index only: a machine's pip configuration may cap releases to those it keeps on disk.
PUBLIC_INDEX = {"PIP_CONFIG_FILE": os.devnull}


@dataclass(frozen=True)
class Installed:
    root: Path
    bin: Path
    env: dict[str, str]
    wheel: Path

    def run(
        self, *args: str, timeout: float = 300, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            list(args),
            cwd=self.root,
            env=self.env | (env or {}),
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def lower_bounds() -> dict[str, str]:
    """``name -> oldest version`` from the library's ``dependencies`` (``name>=X,<Y``)."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    bounds = dict(re.fullmatch(r"([\w-]+)>=([\w.]+),<[\w.]+", d).groups() for d in deps)
    assert set(bounds) == set(CORE), bounds
    return bounds


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("wheel-user")
    assert not root.resolve().is_relative_to(REPO)
    dist = root / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(REPO)],  # sdist, then the wheel from it
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    (wheel,) = dist.glob("tornasole-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=120)
    bin_ = root / "venv" / "bin"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "TORNASOLE_", "PYTHON", "VIRTUAL_ENV"))
    }
    env |= {"PATH": f"{bin_}{os.pathsep}{env.get('PATH', '')}", "MPLBACKEND": "Agg"}
    box = Installed(root, bin_, env, wheel)
    # --no-compile: byte-compiling torch's thousands of files at install time triples the install time.
    pip = box.run(
        *(str(bin_ / "python"), "-m", "pip", "install", "-q", "--no-compile"),
        f"{wheel}[demo]",
        TORCH,
        timeout=600,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    return box


def test_the_wheel_is_what_runs(installed: Installed) -> None:
    out = installed.run(str(installed.bin / "python"), "-c", "import tornasole; print(tornasole.__file__)")
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).is_relative_to(installed.root / "venv"), out.stdout
    # The handlers ship inside the package (the local mode needs no functions/ directory).
    handlers = installed.run(
        str(installed.bin / "python"),
        "-c",
        "from tornasole.lambda_support.handlers import load_handler; print(load_handler('publish_events'))",
    )
    assert handlers.returncode == 0, handlers.stderr
    assert "<function handler" in handlers.stdout


def test_local_up_serves_then_stops(installed: Installed) -> None:
    proc = subprocess.Popen(
        [str(installed.bin / "tornasole"), "local", "up", "--port", "0"],
        cwd=installed.root,
        env=installed.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Ctrl-C to stop"):
                break
        text = "".join(lines)
        endpoint = re.search(r"export AWS_ENDPOINT_URL=(\S+)", text)
        assert endpoint, text
        # The endpoint answers and holds the trial bucket it announced.
        with urllib.request.urlopen(endpoint.group(1) + "/tornasole-local?list-type=2", timeout=10) as r:
            assert r.status == 200
            assert b"<Name>tornasole-local</Name>" in r.read()
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, text + rest
        assert "local mode stopped" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_demo_passes(installed: Installed) -> None:
    demo = installed.run(str(installed.bin / "tornasole"), "demo", "--output-dir", "demo-out", timeout=240)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "demo passed" in demo.stdout
    assert (installed.root / "demo-out" / "broken_run.png").stat().st_size > 10_000


def test_hook_write_and_trial_read_then_pip_check(installed: Installed) -> None:
    out = installed.run(str(installed.bin / "python"), str(ROUNDTRIP), str(installed.root / "run-newest"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("roundtrip ok numpy=2."), out.stdout
    check = installed.run(str(installed.bin / "python"), "-m", "pip", "check")
    assert check.returncode == 0, check.stdout


def newest_release(installed: Installed, name: str) -> str:
    """The newest release of ``name`` on the public index, whatever this machine's pip config caps."""
    out = installed.run(
        str(installed.bin / "python"), "-m", "pip", "index", "versions", name, env=PUBLIC_INDEX, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    found = re.search(rf"^{re.escape(name)} \(([^)]+)\)", out.stdout, re.MULTILINE)
    assert found, out.stdout
    return found.group(1)


@pytest.mark.parametrize("core", ["newest", "oldest"])
def test_newest_torch_resolves_with_the_wheel(installed: Installed, core: str) -> None:
    """``pip check`` at resolution time: the wheel's ``pytorch`` extra with the newest torch on the index.

    The newest torch's Linux wheel pulls gigabytes of CUDA libraries, so it is resolved, not installed:
    pip's resolver reads every candidate's metadata (PEP 658, no wheel download) and accepts the set only
    if every requirement of every package in it holds, which is what ``pip check`` verifies once installed.
    Run with the newest numpy/protobuf the ranges allow and with their lower bounds.
    """
    torch = newest_release(installed, "torch")
    pins = [] if core == "newest" else [f"{n}=={v}" for n, v in lower_bounds().items()]
    report = installed.root / f"resolve-{core}.json"
    out = installed.run(
        *(str(installed.bin / "python"), "-m", "pip", "install", "--dry-run", "--ignore-installed"),
        *("--report", str(report), f"{installed.wheel}[pytorch]", f"torch=={torch}", *pins),
        env=PUBLIC_INDEX,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    chosen = {
        item["metadata"]["name"].lower(): item["metadata"]["version"]
        for item in json.loads(report.read_text())["install"]
    }
    assert chosen["torch"] == torch, chosen
    assert chosen["tornasole"], chosen
    for name, version in [] if core == "newest" else lower_bounds().items():
        assert Version(chosen[name]) == Version(version), (name, chosen)


def test_oldest_supported_core_dependencies(installed: Installed) -> None:
    # Runs last in this module: it downgrades the venv's numpy/protobuf/google-crc32c to the lower bounds.
    bounds = lower_bounds()
    pins = [f"{name}=={version}" for name, version in bounds.items()]
    pip = installed.run(
        str(installed.bin / "python"), "-m", "pip", "install", "-q", "--no-compile", *pins, timeout=300
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    out = installed.run(str(installed.bin / "python"), str(ROUNDTRIP), str(installed.root / "run-oldest"))
    assert out.returncode == 0, out.stderr
    assert f"numpy={bounds['numpy']}" in out.stdout, out.stdout
    assert f"protobuf={bounds['protobuf']}" in out.stdout, out.stdout
    check = installed.run(str(installed.bin / "python"), "-m", "pip", "check")
    assert check.returncode == 0, check.stdout
