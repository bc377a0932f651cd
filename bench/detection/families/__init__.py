"""The families benchmark: tiny PyTorch runs of seven model families on real small data sets, saved with the
PyTorch hook (``tornasole.pytorch.Hook``) and labelled by the published criteria (:mod:`labels`) while they
train. Scored leave-one-family-out (``run.py``): rules calibrated on the other families, reported per family,
the worst family as the headline. See ``bench/RESULTS.md``.
"""
