"""TensorBoard output of a hook: scalar and histogram summaries in TensorBoard event files.

Floor plan: imported by hooks; imports format, storage and modes only.

Layout (smdebug's, so tools that knew smdebug's ``tensorboard_dir`` find the
same files): ``<tensorboard_dir>/<MODE>/<global step, 12 digits>_<pid>_<host>.tfevents``,
one file per saved step, TFRecord-framed ``Event`` protobufs with real CRCs.
Tags: ``<collection>/<tensor>`` for histograms, the tensor's own name for
scalars (``scalar/<name>`` for ``save_scalar`` values, the reduction's name for
reductions).

Examples
--------
>>> from tornasole.tensorboard import TensorBoardWriter, scalar_event, histogram_event
"""

from __future__ import annotations

from tornasole.tensorboard.summary import clean_tag, histogram_event, scalar_event
from tornasole.tensorboard.writer import TensorBoardWriter, tensorboard_file_name

__all__ = ["TensorBoardWriter", "tensorboard_file_name", "scalar_event", "histogram_event", "clean_tag"]
