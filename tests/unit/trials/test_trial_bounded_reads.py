"""A trial reads every file a writer controls with a cap (issue #34: bounded reads, never read-all)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tornasole.exceptions import FormatError


def test_a_trial_reads_a_collections_file_bounded(tmp_path: Path) -> None:
    """Every file a writer controls is read with a cap: an oversized collections file is refused
    after reading at most the cap plus one byte, naming the file."""
    from tornasole.format.collections import MAX_COLLECTIONS_BYTES
    from tornasole.trials import create_trial

    folder = tmp_path / "collections" / "000000000"
    folder.mkdir(parents=True)
    (folder / "worker_0_collections.json").write_bytes(b"{" + b" " * (MAX_COLLECTIONS_BYTES + 10) + b"}")
    with pytest.raises(FormatError, match="collections file larger than 1048576 bytes"):
        create_trial(str(tmp_path)).collections()
