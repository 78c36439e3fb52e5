"""Search: greedy slimming (EfficientFormer alg. 1, EfficientFormerV2 alg. 1) and random sampling."""
