"""Shared pieces for the format-layer tests: the smdebug fixture trees, read once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def fixture_trees(fixtures_dir: Path) -> list[Path]:
    """Every trial tree under tests/fixtures/smdebug (with or without ground truth)."""
    trees = sorted(p for p in fixtures_dir.iterdir() if p.is_dir() and (p / "events").is_dir())
    assert {t.name for t in trees} >= {"pt_hook_single", "pt_dist_2workers", "core_writer_2workers"}
    return trees


@pytest.fixture(scope="session")
def expected_manifest(fixtures_dir: Path) -> dict[str, list[dict]]:
    """``tree -> records`` of each ``<tree>.expected.json``."""
    return {
        p.name.removesuffix(".expected.json"): json.loads(p.read_text())["records"]
        for p in sorted(fixtures_dir.glob("*.expected.json"))
    }
