"""Aliases of ``tornasole.lambda_support`` for code that imports ``functions.common``.

The handlers themselves import from the layer (``tornasole.lambda_support``) so
each ``functions/<name>/`` asset directory is self-contained.
"""
