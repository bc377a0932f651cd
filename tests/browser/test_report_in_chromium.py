"""The report in a real browser: Debian's headless Chromium opens it, with no console message, and the
elements a person looks for are in the DOM it built; a screenshot is kept as a test artefact.

Apart from the other tests because of what it needs: the ``chromium`` binary (``make setup-browser``
installs it; without it this test fails and says so, it is never skipped). The screenshot goes to the
test's tmp dir and, when ``$TORNASOLE_TEST_ARTIFACTS`` is set, is copied there.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "reports"))
from report_trials import write_report_trial  # noqa: E402

from tornasole.cli.main import main  # noqa: E402

KEY_IDS = (
    "report",
    "job-summary",
    "rule-verdicts",
    "loss-chart",
    "layer-stats",
    "profiler",
    "utilisation-chart",
    "step-time-histogram",
    "step-outliers",
    "phase-breakdown",
    "profiler-rules",
)
TIMEOUT_S = 120


def _chromium() -> str:
    found = (
        os.environ.get("TORNASOLE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    )
    if not found:
        pytest.fail("chromium is not installed: run `make setup-browser` (Debian's chromium package)")
    return found


def _run(page: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    args = [
        _chromium(),
        "--headless",
        "--no-sandbox",  # CI containers run as root
        "--disable-gpu",
        "--no-first-run",
        "--enable-logging=stderr",
        "--v=0",
        *flags,
        page.as_uri(),
    ]
    done = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def _console(stderr: str) -> list[str]:
    """The page's console messages (errors, CSP refusals, uncaught exceptions) in Chromium's log."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def test_the_harness_sees_console_errors(tmp_path: Path) -> None:
    """The negative control: a page that throws is caught, so a clean run below means something."""
    page = tmp_path / "bad.html"
    page.write_text('<html><body><p id="x">x</p><script>undefined_function();</script></body></html>')
    assert any("undefined_function" in m for m in _console(_run(page, "--dump-dom").stderr))


def test_the_report_renders_in_chromium_without_console_messages(tmp_path: Path) -> None:
    trial = write_report_trial(str(tmp_path / "run"), 400, slow_steps=[123])
    page = tmp_path / "report.html"
    assert main(["report", trial, "-o", str(page)]) == 0

    dom = _run(page, "--dump-dom")
    assert _console(dom.stderr) == []
    ids = set(re.findall(r'\bid="([^"]+)"', dom.stdout))
    assert set(KEY_IDS) <= ids, sorted(set(KEY_IDS) - ids)
    assert dom.stdout.count('class="verdict"') >= 10
    assert "<svg" in dom.stdout  # the charts are in the DOM Chromium built, not only in the file

    shot = tmp_path / "report.png"
    taken = _run(page, f"--screenshot={shot}", "--window-size=1280,4000", "--hide-scrollbars")
    assert _console(taken.stderr) == []
    assert shot.stat().st_size > 20_000  # a page with content, not a blank one
    artefacts = os.environ.get("TORNASOLE_TEST_ARTIFACTS")
    if artefacts:
        Path(artefacts).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(artefacts) / "report.png")
        shutil.copy(page, Path(artefacts) / "report.html")
