"""The families benchmark: tiny PyTorch runs of nine model families (two held out: resmlp, iris) on small
data sets, saved with the PyTorch hook (``tornasole.pytorch.Hook``) and labelled by the published criteria
(:mod:`labels`) while they train. Scored leave-one-family-out (``run.py``): rules calibrated on the other
families, reported per family, the worst family as the headline. See ``bench/RESULTS.md``.
"""
