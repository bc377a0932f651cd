"""One pass over each CPU tensor for statistics mode: sum, sum of squares, min, max and zero count together.

PyTorch has no fused multi-statistic reduction on a CPU: the norm, the sum,
``aminmax`` and ``count_nonzero`` are four passes over every weight and
gradient, each memory-bound (~1.7 ms a step for the 1 M values of
``bench/statistics_overhead.py``'s LM, 4 % of its step). A ~40-line C loop
reads each value once and keeps all five accumulators in vector registers
(0.1 ms for the same tensors). ``torch.compile`` of the same five reductions
was measured as well: 0.58 ms steady (its wrapper calls a kernel per tensor),
8-34 s to compile on the first step; so the loop is compiled directly.

It is built once per machine with the system C compiler (``$CC``, ``cc`` or
``gcc``: the compiler ``torch.compile``'s CPU backend needs too), for this CPU
(``-march=native``), into a private cache directory (mode 0700, keyed by the
source, the compiler and the CPU's flags; a cache that anyone but this user or
root could change on the way from ``/`` is refused for a temporary directory
removed once the library is loaded), and called through ``ctypes``
(which releases the GIL). Where anything of that fails, or
``TORNASOLE_FUSED_STATISTICS=0``, :func:`load` returns ``None`` once, with one
warning, and statistics mode keeps PyTorch's reductions: training never fails
for it.

The loop sums in float32 lanes per block of 2,048 values and the blocks in
float64 (as exact as PyTorch's cascade sum), and writes statistics mode's
mergeable parts directly (count, mean, sum of squared deviations, with a second
pass only where the mean dominates, as ``statistics._cpu_moments`` decides;
norm, min, max, zeros). Its min/max ignore NaN, so a caller must fall back to
PyTorch's reductions where a sum is not finite (``reduce`` returns ``None``;
:meth:`TensorStatistics.parts` then reduces the whole step with PyTorch).

The statistics are finished from the parts in the same library (``finish_statistics``: std, max_abs,
zero_fraction in float32, as torch computes them, with correctly rounded ``sqrt``), and so are the
total norms (summed in float64): a CPU step of statistics mode is one call (``tensor_statistics``)
that writes its values into one numpy array. Inside a training loop a small torch operation costs
10-15 us, its caches cold after the step's own work (``bench/statistics_overhead.py``), so the two
dozen that finished a step cost more than the loop's pass over the tensors.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from array import array
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

__all__ = ["FusedReducer", "load", "COLUMNS", "STATISTIC_CODES"]

logger = logging.getLogger(__name__)

#: the columns of :meth:`FusedReducer.reduce`'s result
COLUMNS = ("count", "mean", "m2", "norm", "min", "max", "zeros", "nonfinite")
#: the statistics :meth:`FusedReducer.finish` computes from them, by code (their index here)
STATISTIC_CODES = ("norm", "max_abs", "mean", "std", "min", "max", "zero_fraction", "nonfinite_count")

_SOURCE = r"""
#include <stdint.h>
#include <math.h>
#define LANES 16
#define BLOCK 2048
/* parts[8*t + 0..7] for the n[t] float32 values at x[t]: count, mean, sum of squared deviations
   from the mean (M2), L2 norm, min, max, zero count, non-finite count (0). M2 is sum of squares -
   n * mean^2 where the mean carries at most 1% of the energy (two digits of float32's seven lost at
   most), else a second pass over the centred values (a LayerNorm's weights near 1). Returns how many
   tensors have a sum or sum of squares that is not finite (a NaN or Inf: their parts are undefined). */
int64_t tensor_parts(int64_t k, const float *const *xs, const int64_t *ns, float *parts) {
    int64_t bad = 0;
    for (int64_t t = 0; t < k; t++) {
        const float *x = xs[t];
        int64_t n = ns[t], i = 0, zeros = 0;
        double sum = 0.0, sq = 0.0;
        float mn[LANES], mx[LANES];
        int32_t zc[LANES];
        for (int j = 0; j < LANES; j++) { mn[j] = INFINITY; mx[j] = -INFINITY; zc[j] = 0; }
        while (i + LANES <= n) {
            float s[LANES], q[LANES];
            for (int j = 0; j < LANES; j++) { s[j] = 0.f; q[j] = 0.f; }
            int64_t end = i + BLOCK <= n ? i + BLOCK : n - (n - i) % LANES;
            for (; i < end; i += LANES) {
                for (int j = 0; j < LANES; j++) {
                    float v = x[i + j];
                    s[j] += v;
                    q[j] += v * v;
                    mn[j] = v < mn[j] ? v : mn[j];
                    mx[j] = v > mx[j] ? v : mx[j];
                    zc[j] += (v == 0.f);
                }
            }
            double bs = 0.0, bq = 0.0;
            for (int j = 0; j < LANES; j++) { bs += s[j]; bq += q[j]; zeros += zc[j]; zc[j] = 0; }
            sum += bs;
            sq += bq;
        }
        float lo = INFINITY, hi = -INFINITY;
        for (int j = 0; j < LANES; j++) { lo = mn[j] < lo ? mn[j] : lo; hi = mx[j] > hi ? mx[j] : hi; }
        for (; i < n; i++) {
            float v = x[i];
            sum += v;
            sq += (double)v * v;
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            zeros += (v == 0.f);
        }
        double mean = n ? sum / (double)n : 0.0, m2 = sq - (double)n * mean * mean;
        if (n && (double)n * mean * mean > 0.01 * sq) {
            float c = (float)mean;
            m2 = 0.0;
            for (i = 0; i < n; i += BLOCK) {
                int64_t end = i + BLOCK <= n ? i + BLOCK : n;
                float q[LANES];
                for (int j = 0; j < LANES; j++) q[j] = 0.f;
                int64_t m = i;
                for (; m + LANES <= end; m += LANES)
                    for (int j = 0; j < LANES; j++) { float d = x[m + j] - c; q[j] += d * d; }
                double bq = 0.0;
                for (int j = 0; j < LANES; j++) bq += q[j];
                for (; m < end; m++) { double d = (double)x[m] - c; bq += d * d; }
                m2 += bq;
            }
        }
        if (!isfinite(sum) || !isfinite(sq) || !isfinite(m2)) bad++;
        float *o = parts + 8 * t;
        o[0] = (float)n; o[1] = (float)mean; o[2] = (float)(m2 > 0.0 ? m2 : 0.0); o[3] = (float)sqrt(sq);
        o[4] = lo; o[5] = hi; o[6] = (float)zeros; o[7] = 0.f;
    }
    return bad;
}

/* stats[m*t + j]: statistic codes[j] (the order of STATISTIC_CODES) of the parts of tensor t, in float32
   as torch computes them from the parts (std = sqrt(M2 / (n - 1)); a NaN in either of min, max makes
   max_abs NaN, as torch.maximum); then totals[i] = the L2 norm of the norms of tensors ranges[2i] to
   ranges[2i+1] - 1, summed in float64 (the total norm of a group is the root of the sum of its tensors'
   squared norms). */
void finish_statistics(int64_t k, const float *parts, int64_t m, const int32_t *codes, float *stats,
                       int64_t nt, const int64_t *ranges, float *totals) {
    for (int64_t t = 0; t < k; t++) {
        const float *p = parts + 8 * t;
        float *o = stats + m * t;
        for (int64_t j = 0; j < m; j++) {
            float v, a, b;
            switch (codes[j]) {
            case 0: v = p[3]; break;
            case 1:
                a = fabsf(p[4]); b = fabsf(p[5]);
                v = a != a ? a : b != b ? b : a > b ? a : b;
                break;
            case 2: v = p[1]; break;
            case 3: v = sqrtf(p[2] / (p[0] - 1.0f)); break;
            case 4: v = p[4]; break;
            case 5: v = p[5]; break;
            case 6: v = p[6] / p[0]; break;
            default: v = p[7]; break;
            }
            o[j] = v;
        }
    }
    for (int64_t i = 0; i < nt; i++) {
        double sq = 0.0;
        for (int64_t t = ranges[2 * i]; t < ranges[2 * i + 1]; t++) {
            double norm = parts[8 * t + 3];
            sq += norm * norm;
        }
        totals[i] = (float)sqrt(sq);
    }
}

/* tensor_parts into parts, then (where every sum was finite) finish_statistics: a CPU step's statistics
   and total norms in one call. Returns tensor_parts' count of tensors with a non-finite sum (then
   nothing is finished). */
int64_t tensor_statistics(int64_t k, const float *const *xs, const int64_t *ns, float *parts, int64_t m,
                          const int32_t *codes, float *stats, int64_t nt, const int64_t *ranges,
                          float *totals) {
    int64_t bad = tensor_parts(k, xs, ns, parts);
    if (!bad) finish_statistics(k, parts, m, codes, stats, nt, ranges, totals);
    return bad;
}
"""

_FLAGS = ("-O3", "-march=native", "-shared", "-fPIC")
_COMPILE_TIMEOUT_S = 120
_DISABLE_ENV = "TORNASOLE_FUSED_STATISTICS"

_lock = threading.Lock()
_loaded: FusedReducer | None = None
_tried = False


class FusedReducer:
    """The compiled loop, callable on contiguous float32 CPU tensors."""

    def __init__(self, library: ctypes.CDLL) -> None:
        i64, ptr = ctypes.c_int64, ctypes.c_void_p
        self._parts = library.tensor_parts
        self._parts.restype = i64
        self._parts.argtypes = [i64, ptr, ptr, ptr]
        self._finish = library.finish_statistics
        self._finish.restype = None
        self._finish.argtypes = [i64, ptr, i64, ptr, ptr, i64, ptr, ptr]
        self._statistics = library.tensor_statistics
        self._statistics.restype = i64
        self._statistics.argtypes = [i64, ptr, ptr, ptr, i64, ptr, ptr, i64, ptr, ptr]

    def reduce(self, tensors: Sequence[torch.Tensor]) -> torch.Tensor | None:
        """``[len(tensors), 8]`` float32: the :data:`COLUMNS` of each tensor, in one pass over each.

        ``None`` where a tensor holds a NaN or an Inf (or its sums overflow float64): the loop's
        min/max ignore NaN, so the caller reduces that step with PyTorch. An empty tensor gives
        count, sums and norm 0, min +inf, max -inf.
        """
        k = len(tensors)
        ptrs, sizes = [], []
        for t in tensors:
            if t.dtype != torch.float32 or t.device.type != "cpu" or not t.is_contiguous():
                raise ValueError(
                    f"FusedReducer.reduce: expected contiguous float32 CPU tensors, got {t.dtype} on "
                    f"{t.device} (contiguous={t.is_contiguous()})"
                )
            ptrs.append(t.data_ptr())
            sizes.append(t.numel())
        out = torch.empty((k, len(COLUMNS)), dtype=torch.float32)
        # ``tensors`` keeps each tensor (and its memory) alive during the call, the names the arrays
        pointers, counts = array("Q", ptrs), array("q", sizes)
        if k and self._parts(k, _address(pointers), _address(counts), out.data_ptr()):
            return None
        return out

    def finish(
        self, parts: np.ndarray, codes: Sequence[int], ranges: Sequence[tuple[int, int]] = ()
    ) -> tuple[np.ndarray, np.ndarray]:
        """The statistics ``codes`` (indices into :data:`STATISTIC_CODES`) of ``parts`` ``[k, 8]``
        (:data:`COLUMNS`), ``[k, len(codes)]`` float32, and the total norm of each ``(start, stop)``
        range of rows: the same values as ``TensorStatistics.finish`` in torch (NaN included), the
        totals summed in float64."""
        parts = np.ascontiguousarray(parts, dtype=np.float32)
        if parts.ndim != 2 or parts.shape[1] != len(COLUMNS):
            raise ValueError(f"FusedReducer.finish: expected parts [k, {len(COLUMNS)}], got {parts.shape}")
        k, m = parts.shape[0], len(codes)
        ranges_array = _ranges(ranges, k, "finish")
        out = np.empty(k * m + len(ranges), dtype=np.float32)
        codes_array = _codes(tuple(codes))
        base = out.ctypes.data
        self._finish(
            k,
            parts.ctypes.data,
            m,
            _address(codes_array),
            base,
            len(ranges),
            _address(ranges_array),
            base + 4 * k * m,
        )
        return out[: k * m].reshape(k, m), out[k * m :]

    def statistics(
        self,
        pointers: Sequence[int],
        sizes: Sequence[int],
        codes: Sequence[int],
        ranges: Sequence[tuple[int, int]] = (),
    ) -> np.ndarray | None:
        """:meth:`reduce` and :meth:`finish` in one call, for a CPU step: ``[k * len(codes)]`` float32,
        the statistics of each tensor in turn, then the total norm of each ``(start, stop)`` range of
        tensors; ``None`` as :meth:`reduce`.

        ``pointers`` and ``sizes`` are the ``data_ptr()`` and ``numel()`` of contiguous float32 CPU
        tensors that the caller checked and keeps alive during the call.
        """
        k, m, nt = len(pointers), len(codes), len(ranges)
        if len(sizes) != k:
            raise ValueError(f"FusedReducer.statistics: {k} pointers but {len(sizes)} sizes")
        rows = _ranges(ranges, k, "statistics")
        buffer = np.empty(k * (len(COLUMNS) + m) + nt, dtype=np.float32)  # the parts, then the result
        base = buffer.ctypes.data
        stats = base + 4 * k * len(COLUMNS)
        # named: an array passed by address must outlive the call
        xs, ns, statistic_codes = array("Q", pointers), array("q", sizes), _codes(tuple(codes))
        bad = self._statistics(
            k,
            _address(xs),
            _address(ns),
            base,
            m,
            _address(statistic_codes),
            stats,
            nt,
            _address(rows),
            stats + 4 * k * m,
        )
        return None if bad else buffer[k * len(COLUMNS) :]


def _ranges(ranges: Sequence[tuple[int, int]], k: int, caller: str) -> array:
    """The flat ``start, stop`` pairs of ``ranges``, each within ``k`` rows (read unchecked by the loop)."""
    for start, stop in ranges:
        if not 0 <= start <= stop <= k:
            raise ValueError(f"FusedReducer.{caller}: range ({start}, {stop}) is not within {k} rows")
    return array("q", [i for r in ranges for i in r])


def _address(values: array) -> int:
    """The address of an ``array``'s items (valid while it is alive and not resized)."""
    return values.buffer_info()[0]


@functools.lru_cache(maxsize=64)
def _codes(codes: tuple[int, ...]) -> array:
    if any(not 0 <= c < len(STATISTIC_CODES) for c in codes):
        raise ValueError(
            f"FusedReducer: statistic codes {codes} are not all in 0..{len(STATISTIC_CODES) - 1}"
        )
    return array("i", codes)


def load() -> FusedReducer | None:
    """The reducer, compiled on first use (thread-safe); ``None`` where it cannot be (warned once)."""
    global _loaded, _tried
    with _lock:
        if not _tried:
            _tried = True
            if os.environ.get(_DISABLE_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
                logger.info("Tornasole: %s=0: statistics mode uses PyTorch's reductions", _DISABLE_ENV)
            else:
                try:
                    _loaded = FusedReducer(_open_library())
                except Exception as exc:  # noqa: BLE001 - any failure falls back to PyTorch's reductions
                    logger.warning(
                        "Tornasole: statistics mode could not build its fused CPU reduction (%s); it uses "
                        "PyTorch's reductions (about 4 passes over each tensor instead of 1)",
                        exc,
                    )
        return _loaded


def _compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise RuntimeError("no C compiler found ($CC, cc or gcc)")
    return cc


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return line
    except OSError:
        pass
    return platform.processor()


def _open_library() -> ctypes.CDLL:
    """The built library, loaded; a private temporary directory it was built in is removed at once.

    Once loaded the library stays mapped after its file is unlinked (Linux), so a process that could not
    use the shared cache leaves nothing behind, whether the build succeeded or not.
    """
    if not sys.platform.startswith("linux"):
        raise RuntimeError(f"the fused reduction is built on Linux only (this is {sys.platform})")
    directory, temporary = _cache_dir()
    try:
        return ctypes.CDLL(str(_build(directory)))
    finally:
        if temporary:
            shutil.rmtree(directory, ignore_errors=True)


def _cache_dir() -> tuple[Path, bool]:
    """A directory only this user (or root) can change: a library loaded from any other could be anyone's.

    ``(directory, True)`` for a private temporary directory (mode 0700, this process only) where the
    cache cannot be trusted: the caller removes it.
    """
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(root) / "tornasole" / "kernels"
    try:
        _make_private(path)
        real = Path(os.path.realpath(path))
        if all(_trusted(os.lstat(p), leaf=p == real) for p in (real, *real.parents)):
            return real, False
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="tornasole-kernels-")), True


def _make_private(path: Path) -> None:
    """Creates ``path`` and each missing directory above it with mode 0700 (not the umask's mode)."""
    missing = []
    while not os.path.lexists(path):
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass  # made meanwhile by another process: checked like any other component


def _trusted(st: os.stat_result, *, leaf: bool) -> bool:
    """Whether nobody but this user (or root) can replace what the directory ``st`` holds.

    Whoever can write a directory can rename its entries, so a path is only as safe as its least safe
    component: each one must be a real directory (not a symbolic link) owned by this user or root and
    not writable by group or others. Above the leaf a sticky directory such as ``/tmp`` is accepted
    (others cannot rename or remove entries they do not own); the leaf, where the library itself is
    looked up by name, must be this user's and writable by no one else.
    """
    if not stat.S_ISDIR(st.st_mode):
        return False
    if leaf:
        return st.st_uid == os.getuid() and not st.st_mode & 0o022
    if st.st_uid not in (os.getuid(), 0):
        return False
    return not st.st_mode & 0o022 or bool(st.st_mode & stat.S_ISVTX)


def _build(directory: Path) -> Path:
    """The library for this source, compiler and CPU in ``directory``: built there unless it is already."""
    cc = _compiler()
    key = hashlib.sha256(
        "\0".join((_SOURCE, cc, *_FLAGS, platform.machine(), _cpu_flags())).encode()
    ).hexdigest()[:16]
    library = directory / f"statistics-{key}.so"
    if library.exists():
        return library
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        source = Path(tmp) / "statistics.c"
        source.write_text(_SOURCE)
        built = Path(tmp) / "statistics.so"
        proc = subprocess.run(
            [cc, *_FLAGS, "-o", str(built), str(source), "-lm"],
            capture_output=True,
            text=True,
            timeout=_COMPILE_TIMEOUT_S,
            check=False,
        )
        if proc.returncode:
            raise RuntimeError(f"{cc} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
        os.replace(built, library)  # atomic: a concurrent rank loads a whole library or builds its own
    return library
