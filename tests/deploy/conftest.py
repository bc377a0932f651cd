"""Deploy-level tier: the real CDK app deployed into MiniStack (no Docker, no AWS account).

Run by ``make test-deploy`` (which builds .venv-ministack with python3.12, node_modules and the x86_64
layer first); plain ``make test`` deselects this directory. It never skips: a missing python3.12
venv, CDK CLI or layer build fails with the command that fixes it.

Session flow: start MiniStack on 127.0.0.1 (free port, own state dir) -> ``cdk bootstrap`` ->
``cdk deploy`` of the stack with the pinned CLI -> tests drive the deployed resources -> MiniStack
(and the Lambda workers it spawned, same process group) is stopped.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MINISTACK = REPO / ".venv-ministack" / "bin" / "ministack"
CDK = REPO / "node_modules" / ".bin" / "cdk"
LAYER = REPO / "build" / "layer" / "x86_64" / "python" / ".tornasole-layer"
STACK = "TornasoleDeployTest"
ACCOUNT, REGION = "000000000000", "us-east-1"


def _requested(config: pytest.Config) -> bool:
    if os.environ.get("TORNASOLE_DEPLOY_TESTS") == "1":
        return True
    return any(Path(str(a).split("::")[0]).resolve().is_relative_to(HERE) for a in config.args)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Plain ``pytest``/``make test`` leave this tier out (it deploys a stack: ``make test-deploy``)."""
    if _requested(config):
        return
    deploy = [i for i in items if Path(str(i.path)).resolve().is_relative_to(HERE)]
    if deploy:
        config.hook.pytest_deselected(items=deploy)
        items[:] = [i for i in items if i not in deploy]


def _require(path: Path, fix: str) -> None:
    if not path.exists():
        pytest.fail(
            f"{path.relative_to(REPO)} is missing: run `{fix}` (make test-deploy does it)", pytrace=False
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class MiniStack:
    endpoint: str
    log: Path

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to talk to this MiniStack (and nothing real)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
        env.update(
            AWS_ENDPOINT_URL=self.endpoint,
            AWS_ACCESS_KEY_ID="test",
            AWS_SECRET_ACCESS_KEY="test",
            AWS_DEFAULT_REGION=REGION,
            AWS_REGION=REGION,
            CDK_DISABLE_CLI_TELEMETRY="true",
            JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
            PATH=f"{CDK.parent}:{os.environ['PATH']}",  # Node 22 from npm for the CLI and jsii
        )
        return env

    def tail(self, n: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])


@pytest.fixture(scope="session")
def ministack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniStack]:
    _require(MINISTACK, "make setup-ministack")
    version = subprocess.run(
        [str(MINISTACK.parent / "python"), "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if version != "(3, 12)":
        pytest.fail(
            f".venv-ministack runs Python {version}; the deployed Lambdas need 3.12 "
            "(rm -rf .venv-ministack && make setup-ministack PY312=/path/to/python3.12)",
            pytrace=False,
        )
    root = tmp_path_factory.mktemp("ministack")
    port = _free_port()
    log = root / "ministack.log"
    # MiniStack unpacks each Lambda worker's code and layers (~77 MB) under tempfile.gettempdir() and
    # removes them only on a reset, not when it is stopped: kept inside pytest's temporary tree, they
    # go with it instead of piling up in /tmp (9 a run), where they slowed file creation for everything.
    scratch = root / "tmp"
    scratch.mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(scratch),
        "GATEWAY_PORT": str(port),
        "BIND_HOST": "127.0.0.1",
        "STATE_DIR": str(root / "state"),
        "PERSIST_STATE": "0",
        "LOG_LEVEL": "INFO",
    }
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(MINISTACK)], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    stack = MiniStack(f"http://127.0.0.1:{port}", log)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{stack.endpoint}/_ministack/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        f"MiniStack did not start on {stack.endpoint}:\n{stack.tail()}", pytrace=False
                    )
                time.sleep(0.5)
        yield stack
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # MiniStack and the Lambda workers it spawned (our group)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        shutil.rmtree(scratch, ignore_errors=True)  # the unpacked code; the log and state stay


def _cdk(ministack: MiniStack, *args: str, timeout: int) -> str:
    proc = subprocess.run(
        [str(CDK), *args, "--no-notices", "--ci"],
        cwd=REPO,
        env=ministack.env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"cdk {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n"
            f"{proc.stderr[-4000:]}\n--- MiniStack log ---\n{ministack.tail()}",
            pytrace=False,
        )
    return proc.stdout + proc.stderr


@dataclass(frozen=True)
class Deployed:
    ministack: MiniStack
    outputs: dict[str, str]
    seconds: dict[str, float]


@pytest.fixture(scope="session")
def deployed(ministack: MiniStack, tmp_path_factory: pytest.TempPathFactory) -> Deployed:
    _require(CDK, "npm ci")
    _require(LAYER, "make layer ARCH=x86_64")
    out = tmp_path_factory.mktemp("cdk")
    seconds = {}
    t0 = time.monotonic()
    _cdk(ministack, "bootstrap", f"aws://{ACCOUNT}/{REGION}", "--output", str(out / "bootstrap"), timeout=240)
    seconds["bootstrap"] = time.monotonic() - t0
    t0 = time.monotonic()
    _cdk(
        ministack,
        "deploy",
        STACK,
        "--require-approval",
        "never",
        "--output",
        str(out / "cdk.out"),
        "--outputs-file",
        str(out / "outputs.json"),
        "--context",
        f"stack_name={STACK}",
        "--context",
        "removal_policy=destroy",
        "--context",
        "alert_emails=ops@example.com",
        "--context",
        "lambda_architecture=x86_64",
        # MiniStack rejects the template with AWS::EC2::FlowLog ("Unrecognized resource types"); the
        # sandbox VPC's flow log is synthesised and checked in tests/infra instead
        "--context",
        "sandbox_flow_log=false",
        timeout=300,
    )
    seconds["deploy"] = time.monotonic() - t0
    outputs = json.loads((out / "outputs.json").read_text())[STACK]
    timings = ", ".join(f"{k} {v:.1f}s" for k, v in seconds.items())
    print(f"\nMiniStack {ministack.endpoint}: {timings}")
    return Deployed(ministack, outputs, seconds)


@pytest.fixture
def aws(deployed: Deployed, monkeypatch: pytest.MonkeyPatch):
    """boto3 (and tornasole's cached clients) pointed at the deployed MiniStack, per test."""
    import boto3

    from tornasole.aws.clients import clear_client_cache

    for key, value in deployed.ministack.env.items():
        if key.startswith("AWS_"):
            monkeypatch.setenv(key, value)
    clear_client_cache()
    session = boto3.session.Session()
    yield lambda service: session.client(service, endpoint_url=deployed.ministack.endpoint)
    clear_client_cache()
