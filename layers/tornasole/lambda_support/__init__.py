"""The Lambda handlers (``handlers``) and what they share, shipped in the package and the layer.

Floor plan: imported by local (its workers run these handlers) and ``functions/``; the evaluator
reads ``env`` only. Imports the evaluator, storage and below.

Each ``functions/<name>/`` asset directory holds only a ``handler.py`` that
re-exports ``handlers.<name>.handler``; the code itself and what the handlers
share (environment model, Powertools objects) live here, so a wheel install
(local mode) and the deployed layer run the same code. Powertools is imported
only by ``observability`` and the handler modules (the ``[lambda]``/``[local]``
extras); the rest of the library never needs it.
"""

from __future__ import annotations

__all__ = ["env", "handlers", "observability"]
