"""The families benchmark: tiny PyTorch and Keras runs of thirty model families (twenty-one held out:
resmlp, iris, conv1d, wine, lstm, digits_rows, diabetes_huber, recall_gru, induction_tf, multilabel, conv_ae,
vae, mixup_cnn, distill, amp_cnn (fp16 autocast and a GradScaler), and convbn, digits, gru, attention, cutmix
and amp (Keras's mixed_float16 policy and a LossScaleOptimizer) in Keras only) on small data sets,
saved with the PyTorch hook (``tornasole.pytorch.Hook``) or the Keras hook and labelled by the published
criteria (:mod:`labels`) while they train. Scored leave-one-family-out (``run.py``): rules calibrated on the
other families, reported per family, the worst family as the headline. See ``bench/RESULTS.md``.
"""
