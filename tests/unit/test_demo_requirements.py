"""`make demo` installs only what the demo imports, at the versions the rest of the project pins.

The demo used to run from the development venv (TensorFlow, XGBoost, the CDK libraries: 4.6 GB) for a
demo that imports torch, moto and matplotlib; requirements/demo.txt is its own small set (.venv-demo,
1.3 GB measured). These checks keep it small and keep its pins in step with requirements/dev.txt.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pins(name: str) -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements" / name).read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==([^\s#]+)", line.strip())
        if match:
            pins[match.group(1).lower()] = match.group(3)
    return pins


def test_demo_requirements_pin_what_dev_pins() -> None:
    demo, dev = _pins("demo.txt"), {**_pins("frameworks.txt"), **_pins("dev.txt")}
    assert {"torch", "moto", "boto3", "matplotlib", "numpy"} <= set(demo)
    for package, version in demo.items():
        if package in dev:
            assert version == dev[package], (package, version, dev[package])


def test_demo_requirements_hold_nothing_the_demo_does_not_import() -> None:
    text = (ROOT / "requirements" / "demo.txt").read_text()
    lines = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    assert "-e .[demo]" in lines  # the package with the demo's extras only
    for heavy in ("tensorflow", "keras", "xgboost", "aws-cdk", "cdk-nag", "constructs", "-r "):
        assert not any(line.startswith(heavy) for line in lines), heavy


def test_make_demo_runs_in_its_own_venv_with_cpu_torch() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    assert "$(DEMO_VENV)/bin/tornasole demo" in recipe
    assert "setup-demo" in recipe.splitlines()[0]
    assert "DEMO_VENV := .venv-demo" in makefile
    assert "TORCH_INDEX_URL ?= https://download.pytorch.org/whl/cpu" in makefile
