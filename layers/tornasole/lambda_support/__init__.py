"""Code shared by the Lambda handlers in ``functions/``, shipped in the layer.

Each ``functions/<name>/`` asset directory holds only its ``handler.py``; what
the handlers share (environment model, Powertools objects, event parsing) lives
here so every function package stays self-contained while the layer carries
the common code. Powertools is imported only by ``observability`` (the
``[lambda]`` extra); the rest of the library never needs it.
"""

from __future__ import annotations

__all__ = ["env", "observability", "records"]
