"""The repository stands on its own: nothing in it points outside the checkout.

People clone Tornasole from GitHub with nothing beside it, so the product, its tests and its docs may
not reach for sibling folders or for paths of the machine it was built on. CI also runs ``make test``
in a clone made into an empty directory (``.ci/run``); this test names the offending line sooner.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SKIP_DIRS = {
    ".git",
    "node_modules",
    "build",
    "cdk.out",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    "demo-output",
}
TEXT_SUFFIXES = {".py", ".md", ".txt", ".toml", ".json", ".sh", ".cfg", ".ini", ".yml", ".yaml", ".ts", ""}
# A sibling folder of the checkout, or an absolute path of a build machine.
OUTSIDE = re.compile(r"\.\./shared\b|(?<![\w.])/work/|/root/\.pyenv")


def _text_files() -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(REPO_ROOT):
        rel = Path(folder).relative_to(REPO_ROOT)
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".venv")]
        if rel.parts[:2] == ("tests", "fixtures"):
            dirs[:] = []
            continue
        for name in files:
            if name == ".git":  # a worktree's pointer to its repository, not content
                continue
            path = Path(folder) / name
            if path.suffix in TEXT_SUFFIXES and path.stat().st_size < 2_000_000:
                found.append(path)
    return found


def test_no_file_refers_outside_the_repository() -> None:
    offenders = []
    for path in _text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line) and path.name != Path(__file__).name:
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()[:120]}")
    assert not offenders, "lines that refer outside the repository:\n" + "\n".join(offenders)


def test_the_smdebug_fixtures_and_their_generators_are_in_the_repository() -> None:
    fixtures = REPO_ROOT / "tests" / "fixtures" / "smdebug"
    for tree in ("core_writer_2workers", "pt_hook_single", "pt_dist_2workers", "pt_hook_tensorboard"):
        assert (fixtures / tree / "index").is_dir(), tree
    for tree in ("core_writer_2workers", "pt_hook_single", "pt_dist_2workers"):
        assert (fixtures / f"{tree}.expected.npz").stat().st_size > 0, tree
    generators = REPO_ROOT / "scripts" / "fixtures"
    for script in (
        "core_tree.py",
        "pytorch_tree.py",
        "distributed_tree.py",
        "tensorboard_tree.py",
        "ground_truth.py",
    ):
        assert (generators / script).is_file(), script
