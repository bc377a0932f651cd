"""Statistics mode's fused CPU reduction (one pass over each tensor) gives PyTorch's reductions' values,
on the edge cases too, and its absence (no compiler, switched off) falls back without failing training."""

from __future__ import annotations

import logging
import os
import stat
import tempfile
from pathlib import Path

import pytest
import torch

from tornasole.pytorch import fused_reductions
from tornasole.pytorch.statistics import DEFAULT_STATISTICS, STATISTICS, TensorStatistics

ALL = tuple(STATISTICS)


def _both(tensors: list[torch.Tensor], reducer, statistics=ALL) -> tuple[torch.Tensor, torch.Tensor]:
    fused = TensorStatistics(statistics, fused=reducer)
    reference = TensorStatistics(statistics, fused=None)
    return fused.finish(fused.parts(tensors)), reference.finish(reference.parts(tensors))


def _edge_cases() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    wide = torch.randn(300, 70, generator=g)
    return [
        torch.randn(1, generator=g),  # one value (std 0/0 in both)
        torch.randn(15, generator=g),  # fewer than the loop's 16 lanes
        torch.randn(2048 * 3 + 17, generator=g),  # several blocks and a tail
        torch.zeros(257),  # all zero
        torch.tensor([0.0, -0.0, 1.0, -2.0]),  # -0.0 is a zero, as for count_nonzero
        1.0 + 1e-3 * torch.randn(128, generator=g),  # a LayerNorm weight: the mean dominates (second pass)
        torch.full((1000,), 3.0),  # constant: std exactly 0
        torch.randn(64, 64, generator=g) * 1e-30,  # tiny values
        torch.randn(4096, generator=g) * 1e15,  # large values (squares near float32's range)
        wide.t(),  # not contiguous
        wide[:, ::3],  # strided view
        torch.randn(33, 9, generator=g).to(torch.bfloat16),
        torch.randn(33, 9, generator=g).to(torch.float16),
        torch.randn(100, generator=g).double(),
        torch.empty(0),
        torch.empty(0, 5),
    ]


def test_fused_parts_equal_pytorchs_on_edge_cases(reducer):
    tensors = _edge_cases()
    got, expected = _both(tensors, reducer)
    for i, (g, e) in enumerate(zip(got, expected)):
        torch.testing.assert_close(g, e, rtol=2e-6, atol=1e-37, equal_nan=True, msg=f"tensor {i}")


def test_fused_parts_equal_the_full_tensors_statistics(reducer):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(5000, generator=g) * 0.02 + 0.001
    x[::7] = 0.0
    stats = TensorStatistics(DEFAULT_STATISTICS, fused=reducer)
    row = stats.finish(stats.parts([x]))[0]
    d = x.double()
    expected = [d.norm(), d.abs().max(), d.mean(), d.std(), (d == 0).double().mean(), 0.0]
    assert row.tolist() == pytest.approx([float(v) for v in expected], rel=1e-6)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_non_finite_value_gives_pytorchs_values_for_the_whole_step(reducer, bad):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(100, generator=g)
    x[17] = bad
    x[40] = bad
    healthy = torch.randn(50, generator=g)
    got, expected = _both([healthy, x], reducer)
    torch.testing.assert_close(got, expected, equal_nan=True)
    assert got[1, ALL.index("nonfinite_count")] == 2
    assert got[0, ALL.index("nonfinite_count")] == 0
    if bad != bad:  # NaN propagates into min and max, as torch.aminmax does
        assert torch.isnan(got[1, ALL.index("min")])
        assert torch.isnan(got[1, ALL.index("max")])
    else:
        assert got[1, ALL.index("max_abs")] == float("inf")


def test_values_whose_sums_overflow_float32_keep_their_exact_statistics(reducer):
    # finite values whose float32 sum and squares are not: the loop's float64 sums hold them, so the
    # mean and std are the exact ones (PyTorch's float32 sum gives mean inf and std NaN); the norm is
    # inf as a float32 and no value is counted non-finite
    x = torch.full((10,), 3e38)
    stats = TensorStatistics(ALL, fused=reducer)
    row = dict(zip(ALL, stats.finish(stats.parts([x]))[0].tolist()))
    assert row["mean"] == pytest.approx(3e38, rel=1e-7)
    assert row["std"] == 0.0
    assert row["norm"] == float("inf")
    assert row["nonfinite_count"] == 0
    assert row["max_abs"] == row["max"] == row["min"] == pytest.approx(3e38, rel=1e-7)


def test_reduce_refuses_what_it_cannot_read(reducer):
    with pytest.raises(ValueError, match="contiguous float32 CPU"):
        reducer.reduce([torch.zeros(4, 4).t()])
    with pytest.raises(ValueError, match="float64"):
        reducer.reduce([torch.zeros(4, dtype=torch.float64)])
    assert reducer.reduce([]).shape == (0, len(fused_reductions.COLUMNS))


@pytest.fixture
def fresh_load(monkeypatch, tmp_path):
    """``load`` as in a new process: nothing tried yet, a private cache under ``tmp_path``."""
    monkeypatch.setattr(fused_reductions, "_tried", False)
    monkeypatch.setattr(fused_reductions, "_loaded", None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(fused_reductions._DISABLE_ENV, raising=False)
    return tmp_path


def test_without_a_compiler_statistics_fall_back_with_one_warning(fresh_load, monkeypatch, caplog, reducer):
    monkeypatch.setenv("CC", str(fresh_load / "no-such-compiler"))
    with caplog.at_level(logging.WARNING, logger=fused_reductions.__name__):
        assert fused_reductions.load() is None
        assert fused_reductions.load() is None
    warnings = [r for r in caplog.records if "PyTorch's reductions" in r.getMessage()]
    assert len(warnings) == 1
    assert "no-such-compiler" in warnings[0].getMessage()
    tensors = _edge_cases()
    auto = TensorStatistics(ALL)  # "auto": the failed build falls back
    got = auto.finish(auto.parts(tensors))
    expected, _ = _both(tensors, reducer)
    torch.testing.assert_close(got, expected, rtol=2e-6, atol=1e-37, equal_nan=True)


def test_a_compiler_error_falls_back(fresh_load, monkeypatch, caplog):
    failing = fresh_load / "cc"
    failing.write_text("#!/bin/sh\necho 'cc: internal error' >&2\nexit 3\n")
    failing.chmod(0o755)
    monkeypatch.setenv("CC", str(failing))
    with caplog.at_level(logging.WARNING, logger=fused_reductions.__name__):
        assert fused_reductions.load() is None
    assert any("exited 3" in r.getMessage() and "internal error" in r.getMessage() for r in caplog.records)


def test_switched_off_by_the_environment(fresh_load, monkeypatch):
    monkeypatch.setenv(fused_reductions._DISABLE_ENV, "0")
    assert fused_reductions.load() is None
    assert not (fresh_load / "cache").exists()


def test_the_library_is_built_once_into_a_private_cache(fresh_load):
    first = fused_reductions.load()
    assert first is not None
    kernels = fresh_load / "cache" / "tornasole" / "kernels"
    built = list(kernels.glob("statistics-*.so"))
    assert len(built) == 1
    assert stat.S_IMODE(kernels.stat().st_mode) & 0o077 == 0
    mtime = built[0].stat().st_mtime_ns
    fused_reductions._tried = False
    fused_reductions._loaded = None
    assert fused_reductions.load() is not None
    assert built[0].stat().st_mtime_ns == mtime  # reused, not rebuilt
    assert [p.name for p in kernels.iterdir()] == [built[0].name]  # no temporary left behind


@pytest.fixture
def build_dirs(monkeypatch, fresh_load) -> list[tuple[Path, int, list[str]]]:
    """Each directory ``_build`` is given, with its mode and content after the build; temporaries go
    under ``fresh_load``."""
    monkeypatch.setattr(tempfile, "tempdir", str(fresh_load))
    seen, build = [], fused_reductions._build

    def spy(directory: Path) -> Path:
        try:
            return build(directory)
        finally:
            seen.append((directory, stat.S_IMODE(directory.stat().st_mode), sorted(os.listdir(directory))))

    monkeypatch.setattr(fused_reductions, "_build", spy)
    return seen


def _refuse_the_cache(fresh_load: Path) -> Path:
    kernels = fresh_load / "cache" / "tornasole" / "kernels"
    kernels.mkdir(parents=True)
    os.chmod(kernels, 0o777)
    return kernels


def test_a_cache_others_can_write_is_not_used(fresh_load, build_dirs):
    kernels = _refuse_the_cache(fresh_load)
    reducer = fused_reductions.load()
    assert reducer is not None
    assert not list(kernels.iterdir())
    ((private, mode, content),) = build_dirs  # built in a private temporary directory instead
    assert private.parent == fresh_load
    assert private.name.startswith("tornasole-kernels-")
    assert mode == 0o700
    assert len([name for name in content if name.startswith("statistics-")]) == 1


def test_the_private_temporary_directory_is_removed_once_the_library_is_loaded(fresh_load, monkeypatch):
    _refuse_the_cache(fresh_load)
    monkeypatch.setattr(tempfile, "tempdir", str(fresh_load))
    reducer = fused_reductions.load()
    assert reducer is not None
    assert not list(fresh_load.glob("tornasole-kernels-*"))  # nothing left for the process's lifetime
    x = torch.arange(-3.0, 5.0)  # the loaded library still runs with its file gone
    row = dict(zip(fused_reductions.COLUMNS, reducer.reduce([x])[0].tolist()))
    assert (row["count"], row["mean"], row["min"], row["max"], row["zeros"]) == (8, 0.5, -3, 4, 1)


def test_a_failed_build_in_the_private_temporary_directory_leaves_nothing(fresh_load, monkeypatch):
    _refuse_the_cache(fresh_load)
    monkeypatch.setattr(tempfile, "tempdir", str(fresh_load))
    monkeypatch.setenv("CC", str(fresh_load / "no-such-compiler"))
    assert fused_reductions.load() is None
    assert not list(fresh_load.glob("tornasole-kernels-*"))


@pytest.mark.parametrize("parent", ["cache", "cache/tornasole"])
def test_a_cache_under_a_directory_others_can_write_is_not_used(fresh_load, build_dirs, parent):
    # whoever can write a directory above the cache can rename it and put their own library in its place
    kernels = fresh_load / "cache" / "tornasole" / "kernels"
    kernels.mkdir(parents=True, mode=0o700)
    os.chmod(fresh_load / parent, 0o770)
    assert fused_reductions.load() is not None
    assert not list(kernels.iterdir())
    ((private, mode, _),) = build_dirs
    assert private.parent == fresh_load
    assert mode == 0o700


def test_a_cache_under_a_sticky_shared_directory_is_used(fresh_load, build_dirs):
    # as under /tmp: others may create entries there but not rename or remove this user's
    (fresh_load / "cache").mkdir(mode=0o700)
    os.chmod(fresh_load / "cache", 0o1777)
    assert fused_reductions.load() is not None
    ((directory, _, content),) = build_dirs
    assert directory == (fresh_load / "cache" / "tornasole" / "kernels").resolve()
    assert len(content) == 1


def test_a_cache_reached_through_a_symbolic_link_is_checked_where_it_lies(fresh_load, build_dirs):
    shared = fresh_load / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    (shared / "cache").mkdir(mode=0o700)
    (fresh_load / "cache").symlink_to(shared / "cache")
    assert fused_reductions.load() is not None
    ((private, _, _),) = build_dirs
    assert private.parent == fresh_load  # the shared directory above the link's target is refused
    assert not list((shared / "cache" / "tornasole" / "kernels").iterdir())


def test_the_directories_it_creates_are_private_whatever_the_umask(fresh_load, build_dirs):
    previous = os.umask(0o002)  # a umask that leaves new directories group-writable
    try:
        assert fused_reductions.load() is not None
    finally:
        os.umask(previous)
    for directory in ("cache", "cache/tornasole", "cache/tornasole/kernels"):
        assert stat.S_IMODE((fresh_load / directory).stat().st_mode) == 0o700, directory
    ((directory, _, _),) = build_dirs
    assert directory == (fresh_load / "cache" / "tornasole" / "kernels").resolve()


def _directory_stat(uid: int, mode: int) -> os.stat_result:
    return os.stat_result((stat.S_IFDIR | mode, 0, 0, 2, uid, 0, 4096, 0, 0, 0))


def test_whose_directories_are_trusted():
    me, other = os.getuid(), os.getuid() + 1  # never root: root's uid is 0
    assert fused_reductions._trusted(_directory_stat(me, 0o700), leaf=True)
    assert fused_reductions._trusted(_directory_stat(0, 0o755), leaf=False)  # /, /home
    assert fused_reductions._trusted(_directory_stat(0, 0o1777), leaf=False)  # /tmp
    assert not fused_reductions._trusted(_directory_stat(other, 0o700), leaf=False)
    assert not fused_reductions._trusted(_directory_stat(other, 0o1777), leaf=False)
    assert not fused_reductions._trusted(_directory_stat(me, 0o1777), leaf=True)  # the library's own
    assert not fused_reductions._trusted(_directory_stat(me, 0o720), leaf=False)
    assert not fused_reductions._trusted(_directory_stat(me, 0o702), leaf=False)
    assert not fused_reductions._trusted(_directory_stat(other, 0o700), leaf=True)
    link = os.stat_result((stat.S_IFLNK | 0o777, 0, 0, 1, me, 0, 10, 0, 0, 0))
    assert not fused_reductions._trusted(link, leaf=False)
