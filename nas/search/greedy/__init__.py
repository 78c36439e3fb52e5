"""Greedy slimming, the papers' search (EfficientFormerV2 §4.2.3 alg. 1; EfficientFormer §4.2 alg. 1):
the algorithm (:mod:`.algorithm`), the accuracy-predictor screen that picks which shrinks of a step to
evaluate (:mod:`.screen`), and the ``--strategy greedy`` that runs it in a search (:mod:`.strategy`)."""
