"""Where a profiler file's trial is, from its key (``evaluator.profiler_files``)."""

from __future__ import annotations


def test_where_a_profiler_file_s_trial_is() -> None:
    from tornasole.evaluator.profiler_files import profiler_trial_candidates, relative_of

    key = "trials/run/profiler-output/system/incremental/2023111422/1700000000.algo-1.json"
    assert profiler_trial_candidates("b", key) == (
        "s3://b/trials/run",
        "system/incremental/2023111422/1700000000.algo-1.json",
    )
    assert relative_of(key) == "system/incremental/2023111422/1700000000.algo-1.json"
    at_root = "profiler-output/framework/pevents/2023111422/1700000069000000_0-h_pythontimeline.json"
    assert profiler_trial_candidates("b", at_root) == ("s3://b", at_root.removeprefix("profiler-output/"))
    assert profiler_trial_candidates("b", "trials/run/index/000000000/000000000001_worker_0.json") is None
