"""Benchmark: our reader against smdebug 1.0.34's on the same run, local and on S3 (moto).

    make bench                                   # default size, ~700 MB local run
    .venv/bin/python bench/read_vs_smdebug.py --steps 50 --tensors 10 --s3-steps 10 --s3-tensors 5

Why this shape: smdebug is slow where users feel it (pure-Python protobuf,
one ``open`` per value locally, a full ``events/`` listing per value on S3);
the point of Tornasole's reader is to read the same bytes much faster. So:

1. generate a run with OUR writer (``tornasole.format.writer``): ``--steps`` x
   ``--tensors`` float32 tensors of 1k-10k elements (sizes geometric between
   the two, fixed per tensor, like a model's layers), every other tensor with
   saved ``abs_mean`` and ``l2`` reduction records, in a temp dir removed at the end;
2. time both readers on it, each in a fresh interpreter of its own venv running
   ``bench/trial_read_timings.py`` (the identical calls on both sides):
   create_trial + steps(); every value; reduction_value(step, "mean", abs=True)
   everywhere; peak memory of reading one value against the largest event file;
3. copy a smaller run (``--s3-steps`` x ``--s3-tensors``) to a bucket of a moto
   ``ThreadedMotoServer`` on 127.0.0.1 and time the same calls on ``s3://``
   (both readers get the endpoint through the standard ``AWS_ENDPOINT_URL_S3``).

Prints one line per measurement, ``<name>: ours X s, smdebug Y s, ratio Y/X``.
Targets (reported, not asserted): local full read >= 10x, S3 read >= 50x.
Not a test: nothing here fails on a slow ratio.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TIMINGS = HERE / "trial_read_timings.py"
sys.path.insert(0, str(REPO / "tests" / "oracle"))

from smdebug_runner import check_smdebug_venv, child_env, run_smdebug_script  # noqa: E402

MB = 1024 * 1024


def generate(trial_dir: str, steps: int, tensors: int, seed: int = 0) -> dict:
    """Write the run with our writer; returns sizes for the report."""
    from tornasole.format.reductions import compute, reduction_tag
    from tornasole.format.writer import StepWriter, TrialWriter
    from tornasole.modes import TRAIN

    sizes = np.geomspace(1000, 10000, tensors).round().astype(int) if tensors > 1 else np.array([1000])
    rng = np.random.default_rng(seed)
    base = [rng.standard_normal(int(n)).astype(np.float32) for n in sizes]
    names = [f"layer{i:03d}/weight" for i in range(tensors)]
    tw = TrialWriter(trial_dir, worker="worker_0")
    t0 = time.perf_counter()
    for step in range(steps):
        sw = StepWriter(step, "worker_0", mode=TRAIN, mode_step=step)
        scale = np.float32(1.0 + step * 1e-3)
        for i, name in enumerate(names):
            value = base[i] * scale
            if i % 2 == 0:
                for red, absolute in (("mean", True), ("l2", False)):
                    sw.add_tensor(reduction_tag(name, red, absolute), compute(value, red, absolute))
            sw.add_tensor(name, value)
        tw.write_step(sw)
    tw.write_collections(_collections(), num_workers=1)
    tw.write_end_marker()
    write_s = time.perf_counter() - t0
    # Flush the dirty pages now: otherwise the kernel writes the run back (30 s after writing it)
    # while the first reader is being timed, which then competes with writeback and the second not.
    os.sync()
    event_sizes = [p.stat().st_size for p in Path(trial_dir, "events").rglob("*.tfevents")]
    return {
        "write_s": write_s,
        "bytes": sum(event_sizes),
        "largest_event_file": max(event_sizes),
        "values": steps * tensors,
        "steps": steps,
        "tensors": tensors,
    }


def _collections() -> dict:
    """The collections the run declares (FORMAT.md 4): all weights, with the saved reductions."""
    from tornasole.core.collection import Collection
    from tornasole.core.reduction_config import ReductionConfig
    from tornasole.core.save_config import SaveConfig

    weights = Collection(
        "weights",
        include_regex=["weight"],
        reduction_config=ReductionConfig(abs_reductions=["mean"], norms=["l2"], save_raw_tensor=True),
        save_config=SaveConfig(save_interval=1),
    )
    return {weights.name: weights.to_json_dict()}


def run_ours(path: str, phases: str, s3_endpoint: str | None, timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-ours-") as out:
        env = child_env(s3_endpoint)  # our defaults: no end-marker delay to switch off
        cmd = [
            sys.executable,
            str(TIMINGS),
            "--impl",
            "tornasole",
            "--path",
            path,
            "--phases",
            phases,
            "--oracle-out",
            out,
        ]
        proc = subprocess.run(cmd, env=env, cwd=out, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"our reader failed (rc={proc.returncode}):\n{proc.stderr[-6000:]}")
        return json.loads(Path(out, "result.json").read_text())


def run_smdebug(path: str, phases: str, s3_endpoint: str | None, timeout: float) -> dict:
    res = run_smdebug_script(
        TIMINGS,
        ["--impl", "smdebug", "--path", path, "--phases", phases],
        s3_endpoint=s3_endpoint,
        timeout=timeout,
    )
    return res.data


def run_both(path: str, phases: str, s3_endpoint: str | None, args: argparse.Namespace) -> tuple[dict, dict]:
    """Both readers ``--repeat`` times, alternating; each timing is the best of its side's runs.

    On a shared machine the load changes from one phase to the next: alternating
    the two sides and keeping each one's best exposes both to the same spells of load.
    """
    ours_runs, theirs_runs = [], []
    for _ in range(args.repeat):
        ours_runs.append(run_ours(path, phases, s3_endpoint, args.timeout))
        theirs_runs.append(run_smdebug(path, phases, s3_endpoint, args.timeout))
    return _best(ours_runs), _best(theirs_runs)


def _best(runs: list[dict]) -> dict:
    out = dict(runs[0])
    for key in out:
        if key.endswith(("_s", "_cpu")) and isinstance(out[key], float):
            out[key] = min(r[key] for r in runs)
    return out


def _line(name: str, ours: dict, theirs: dict, key: str, per: int | None = None) -> str:
    """Wall seconds of both sides and their ratio, per value if ``per``, then the same in CPU seconds."""
    o, t = ours[f"{key}_s"], theirs[f"{key}_s"]
    ratio = t / o if o > 0 else float("inf")
    each = f" ({o / per * 1e6:.1f} us vs {t / per * 1e6:.1f} us each)" if per else ""
    line = f"{name}: ours {o:.3f} s, smdebug {t:.3f} s, ratio {ratio:.1f}{each}"
    oc, tc = ours.get(f"{key}_cpu"), theirs.get(f"{key}_cpu")
    if oc and tc:
        cpu_each = f", {oc / per * 1e6:.1f} us vs {tc / per * 1e6:.1f} us each" if per else ""
        line += f"; CPU ours {oc:.3f} s, smdebug {tc:.3f} s, ratio {tc / oc:.1f}{cpu_each}"
    return line


def _rate(name: str, nbytes: int, seconds: float, cat_mbs: float | None) -> str:
    mbs = nbytes / MB / seconds if seconds > 0 else float("inf")
    share = f", {mbs / cat_mbs:.0%} of cat's {cat_mbs:.0f} MB/s" if cat_mbs else ""
    return f"{name}: {mbs:.0f} MB/s{share}"


def cat_rate(trial_dir: str, repeat: int = 3) -> float:
    """MB/s of ``cat`` over the run's event files (page cache warm): the physical limit of a read."""
    files = sorted(str(p) for p in Path(trial_dir, "events").rglob("*.tfevents"))
    total = sum(os.path.getsize(f) for f in files)
    best = float("inf")
    for _ in range(repeat + 1):  # the first pass warms the page cache
        t0 = time.perf_counter()
        for i in range(0, len(files), 500):
            subprocess.run(["cat", *files[i : i + 500]], stdout=subprocess.DEVNULL, check=True)
        best = min(best, time.perf_counter() - t0)
    return total / MB / best


def report(label: str, info: dict, ours: dict, theirs: dict, cat_mbs: float | None = None) -> list[str]:
    lines = []
    what = f"{info['steps']} steps x {info['tensors']} tensors"
    if "open_s" in ours:
        lines.append(_line(f"{label} create_trial+steps ({what})", ours, theirs, "open"))
    for key, title in (("values", "by tensor then step"), ("bystep", "by step then tensor")):
        if f"{key}_s" not in ours:
            continue
        n = ours[f"{key}_n"]
        assert n == theirs[f"{key}_n"], (n, theirs[f"{key}_n"])
        mb = ours[f"{key}_bytes"] / MB
        lines.append(
            _line(
                f"{label} read every value, {title} ({n} values, {mb:.0f} MB)",
                ours,
                theirs,
                key,
                n,
            )
        )
        lines.append(_rate(f"{label}   ours {title}", ours[f"{key}_bytes"], ours[f"{key}_s"], cat_mbs))
        if ours.get(f"{key}_cpu"):
            title_cpu = f"{label}   ours {title}, per CPU second"
            lines.append(_rate(title_cpu, ours[f"{key}_bytes"], ours[f"{key}_cpu"], cat_mbs))
    if "bulk_s" in ours:
        assert ours["bulk_n"] == theirs["bulk_n"], (ours["bulk_n"], theirs["bulk_n"])
        lines.append(
            _line(
                f"{label} read every value via tensor.values() ({ours['bulk_n']} values)",
                ours,
                theirs,
                "bulk",
                ours["bulk_n"],
            )
        )
    if "reduce_s" in ours:
        lines.append(
            _line(
                f"{label} reduction_value mean abs ({ours['reduce_n']} calls)",
                ours,
                theirs,
                "reduce",
                ours["reduce_n"],
            )
        )
        if not np.isclose(ours["reduce_checksum"], theirs["reduce_checksum"], rtol=1e-4):
            lines.append(
                f"WARNING {label}: reduction checksums differ: ours {ours['reduce_checksum']} "
                f"smdebug {theirs['reduce_checksum']}"
            )
    if "rule_s" in ours:
        assert ours["rule_n"] == theirs["rule_n"], (ours["rule_n"], theirs["rule_n"])
        lines.append(
            _line(
                f"{label} one rule over the run, open included ({ours['rule_n']} values checked)",
                ours,
                theirs,
                "rule",
            )
        )
    if "memory_worst" in ours:
        o, t = ours["memory_worst"], theirs["memory_worst"]
        lines.append(
            f"{label} peak traced memory reading one value (max over {ours['memory_values_sampled']}): "
            f"ours {o['peak'] / MB:.2f} MB, smdebug {t['peak'] / MB:.2f} MB, "
            f"largest event file {info['largest_event_file'] / MB:.2f} MB, "
            f"ours/event file {ours['memory_worst_ratio_to_event_file']:.2f}, "
            f"smdebug/event file {theirs['memory_worst_ratio_to_event_file']:.2f}"
        )
    if "rss_after_values" in ours:
        lines.append(
            f"{label} peak RSS after reading every value: ours {ours['rss_after_values'] / MB:.0f} MB "
            f"(after import {ours['rss_after_import'] / MB:.0f} MB), "
            f"smdebug {theirs['rss_after_values'] / MB:.0f} MB "
            f"(after import {theirs['rss_after_import'] / MB:.0f} MB), run size {info['bytes'] / MB:.0f} MB"
        )
        lines.append(
            f"{label} anonymous RSS (heap, without mapped page-cache pages) after reading every value: "
            f"ours {ours['rss_anon_after_values'] / MB:.0f} MB, "
            f"smdebug {theirs['rss_anon_after_values'] / MB:.0f} MB"
        )
    return lines


def upload(local: str, bucket: str, prefix: str) -> None:
    import boto3

    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    files = [p for p in Path(local).rglob("*") if p.is_file()]

    def put(p: Path) -> None:
        s3.put_object(Bucket=bucket, Key=f"{prefix}/{p.relative_to(local).as_posix()}", Body=p.read_bytes())

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, files))


def bench_local(args: argparse.Namespace, tmp: str) -> list[str]:
    path = os.path.join(tmp, "local-run")
    info = generate(path, args.steps, args.tensors)
    print(
        f"# local run: {info['steps']} steps x {info['tensors']} tensors, {info['bytes'] / MB:.0f} MB, "
        f"written by our writer in {info['write_s']:.1f} s",
        flush=True,
    )
    cat_mbs = cat_rate(path)
    print(f"# cat of the event files (page cache): {cat_mbs:.0f} MB/s", flush=True)
    phases = "open,values,bystep,bulk,reduce,rule,memory"
    ours, theirs = run_both(path, phases, None, args)
    shutil.rmtree(path, ignore_errors=True)
    return report("local", info, ours, theirs, cat_mbs)


def bench_s3(args: argparse.Namespace, tmp: str) -> list[str]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request otherwise
    path = os.path.join(tmp, "s3-run")
    info = generate(path, args.s3_steps, args.s3_tensors, seed=1)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    saved = {k: os.environ.get(k) for k in ("AWS_ENDPOINT_URL_S3", *child_env())}
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        os.environ.update({k: v for k, v in child_env(endpoint).items() if k.startswith("AWS_")})
        upload(path, "tornasole-bench", "run")
        print(
            f"# s3 run: {info['steps']} steps x {info['tensors']} tensors, {info['bytes'] / MB:.1f} MB "
            f"on moto at {endpoint}",
            flush=True,
        )
        url = "s3://tornasole-bench/run"
        ours, theirs = run_both(url, args.s3_phases, endpoint, args)
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return report("s3", info, ours, theirs)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Time our reader against smdebug 1.0.34's (see bench/README.md).")
    p.add_argument("--steps", type=int, default=1000, help="local run: saved steps (default 1000)")
    p.add_argument("--tensors", type=int, default=50, help="local run: tensors per step (default 50)")
    p.add_argument("--s3-steps", type=int, default=50, help="S3 run: saved steps (default 50)")
    p.add_argument("--s3-tensors", type=int, default=20, help="S3 run: tensors per step (default 20)")
    p.add_argument(
        "--s3-phases",
        default="open,values,bystep,bulk,reduce,rule",
        help="phases timed on S3 (default open,values,bystep,bulk,reduce,rule)",
    )
    p.add_argument(
        "--repeat", type=int, default=1, help="runs of each reader, alternating; best time kept (default 1)"
    )
    p.add_argument("--skip-local", action="store_true")
    p.add_argument("--skip-s3", action="store_true")
    p.add_argument("--timeout", type=float, default=600, help="per reader run, seconds")
    p.add_argument(
        "--tmp", default=None, help="parent directory for the generated runs (default: system temp)"
    )
    args = p.parse_args(argv)

    print(
        f"# smdebug {check_smdebug_venv()} vs tornasole, python {sys.version.split()[0]}, "
        f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    t0 = time.perf_counter()
    tmp = tempfile.mkdtemp(prefix="tornasole-bench-", dir=args.tmp)
    lines: list[str] = []
    try:
        if not args.skip_local:
            lines += bench_local(args, tmp)
            print("\n".join(lines), flush=True)
        if not args.skip_s3:
            s3_lines = bench_s3(args, tmp)
            print("\n".join(s3_lines), flush=True)
            lines += s3_lines
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"# total {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
