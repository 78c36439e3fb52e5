"""Search: strategies by name (:mod:`nas.search.strategy`: greedy slimming, EfficientFormer alg. 1 and
EfficientFormerV2 alg. 1; NSGA-II; random search) and random sampling within a budget."""
