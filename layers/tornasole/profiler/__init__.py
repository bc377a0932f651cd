"""SageMaker Debugger's profiler, without SageMaker: system and framework metrics, their readers and rules.

Floor plan: below hooks, rules and trials (they import it), above format/core/storage. Sub-packages:

- ``format``: the bytes of ``profiler-output/`` (pure encode/decode and file names, no I/O);
- ``sampling``: what the hooks run during training to write those files;
- ``readers`` / ``analysis``: smdebug's profiler analysis API over local or S3 output.

Submodules are imported on demand, so importing the package does no work.
"""

from __future__ import annotations
