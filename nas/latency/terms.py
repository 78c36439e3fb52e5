"""Features of the phone cost models: operator groups and hardware terms, and the candidates fitted.

A network is priced from the operators of its graph (:mod:`nas.latency.opcount`). The features are the
multiply-accumulates of the matmul operators (convolutions and linear layers) and of the attention
matmuls, plus *hardware terms* that describe what an accelerator does beyond arithmetic: attention maps
through softmax, non-linearities the compiler does not fuse, LayerNorm and GroupNorm (which do not fold
into a convolution as BatchNorm does), activations too large for on-chip memory, and (a candidate) the
memory traffic of element-wise, layout and reduction operators. A :class:`Candidate` is one choice of
features and ridge strength; :mod:`nas.latency.costmodel` chooses among them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MEMORY_KINDS = ("elem", "layout", "reduce")
#: Candidate groupings of operator kinds (each group gets one fitted weight).
GROUPINGS: dict[str, tuple[tuple[str, ...], ...]] = {
    "all": (("conv", "dw", "fc", "bmm", "elem", "layout", "reduce"),),
    "matmul|attention|memory": (("conv", "dw", "fc"), ("bmm",), MEMORY_KINDS),
    "conv|linear|attention|memory": (("conv", "dw"), ("fc",), ("bmm",), MEMORY_KINDS),
    "matmul|attention|elementwise|layout": (("conv", "dw", "fc"), ("bmm",), ("elem", "reduce"), ("layout",)),
    "matmul|attention": (("conv", "dw", "fc"), ("bmm",)),
}
_SOFTMAX = {"_softmax", "_safe_softmax"}
_SLOW_ACTIVATIONS = {"hardswish", "silu", "sigmoid", "hardsigmoid"}
_NORMS = {"native_layer_norm", "native_group_norm"}


def _attention_maps(ops) -> float:
    # Softmax over token-by-token maps: the operator Core ML cannot fuse into a matmul (EfficientFormer §3).
    return sum(op.elems for op in ops if op.op in _SOFTMAX) / 1e7


def _activations(ops) -> float:
    # Non-linearities whose cost depends on the compiler (EfficientFormer §3, observation 4: HardSwish
    # is slow on the iPhone 12's Core ML); ReLU and GELU run fused.
    return sum(op.elems for op in ops if op.op in _SLOW_ACTIVATIONS) / 1e7


def _norms(ops) -> float:
    # LayerNorm and GroupNorm stay in the graph, where BatchNorm folds into the convolution
    # (EfficientFormer §3, observation 3: CONV-BN is faster than LN-Linear).
    return sum(op.elems for op in ops if op.op in _NORMS) / 1e7


def _memory_traffic(ops) -> float:
    # Element-wise, layout and reduction operators do no multiply-accumulates: their cost is the data
    # they move (a CPU is bound by it; a neural engine mostly fuses them away).
    return sum(op.elems for op in ops if op.kind in MEMORY_KINDS) / 1e7


def _all_macs(ops) -> float:
    # Every multiply-accumulate, whatever the operator: the term a few-shot calibration adds, so that a
    # new phone's timings can weigh plain arithmetic apart from the prior's operator costs.
    return sum(op.macs for op in ops) / 1e9


#: The term few-shot calibration adds (not a fitting candidate's: it is the sum of the MAC groups).
ALL_MACS = "all MACs"
#: The hardware term whose unit depends on the on-chip budget.
OFF_CHIP = "off-chip activations"
#: Operators whose output exceeds this many elements (2 MiB at float16) stream through DRAM.
ON_CHIP_ELEMENTS = 2**20


def _off_chip(ops, budget: int = ON_CHIP_ELEMENTS) -> float:
    # An activation larger than the accelerator's on-chip memory is written to DRAM and read back:
    # elements written by operators whose output exceeds the budget (the issue's "tensors that do not
    # fit on-chip"; EfficientNet-B5 at 456 px and MobileViT-v2 at 256 px have such activations).
    return sum(op.out_elems for op in ops if op.out_elems > budget) / 1e7


#: Hardware terms, each one fitted weight (ms per unit).
HARDWARE_TERMS = {
    "attention maps": _attention_maps,
    "activations": _activations,
    "norms": _norms,
    OFF_CHIP: _off_chip,
    "memory traffic": _memory_traffic,
    ALL_MACS: _all_macs,
}
TERM_UNITS = {
    "memory traffic": "1e7 elements read or written by element-wise, layout and reduction operators",
    "attention maps": "1e7 elements through softmax",
    "activations": "1e7 elements through HardSwish, SiLU, sigmoid or HardSigmoid",
    "norms": "1e7 elements through LayerNorm or GroupNorm",
    ALL_MACS: "1e9 multiply-accumulates of every operator",
}
#: What every candidate prices beyond MACs (EfficientFormer §3's observations, and on-chip memory).
ENGINE_TERMS = ("attention maps", "activations", "norms", OFF_CHIP)


def term_unit(term: str, on_chip: int = ON_CHIP_ELEMENTS) -> str:
    """What one unit of a hardware term is."""
    if term == OFF_CHIP:
        return (
            f"1e7 elements written by operators whose output exceeds {on_chip} elements "
            f"({2 * on_chip / 2**20:g} MiB at float16)"
        )
    return TERM_UNITS[term]


#: Candidate ridge strengths: how strongly the fit pulls each weight (in units of its typical share of
#: a latency) towards zero. Every term is fitted at once (non-negative), rather than a subset chosen:
#: choosing among subsets per held-out family made the nested error worse than fitting them all.
RIDGES = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)


@dataclass(frozen=True)
class Candidate:
    """One choice of features and fit: operator grouping, roofline ratio, hardware terms and ridge strength."""

    grouping: str
    ratio: float
    terms: tuple[str, ...] = ()
    #: The on-chip budget (elements) of the off-chip term.
    on_chip: int = ON_CHIP_ELEMENTS
    ridge: float = 0.0

    def features(self, ops) -> np.ndarray:
        """Group sums of per-operator roofline costs (G-units) and the hardware terms, without intercept."""
        groups = GROUPINGS[self.grouping]
        out = np.zeros(len(groups) + len(self.terms))
        for op in ops:
            cost = max(op.macs, self.ratio * op.elems)
            for g, kinds in enumerate(groups):
                if op.kind in kinds:
                    out[g] += cost
        out[: len(groups)] /= 1e9
        for t, term in enumerate(self.terms):
            out[len(groups) + t] = _off_chip(ops, self.on_chip) if term == OFF_CHIP else HARDWARE_TERMS[term](ops)
        return out

    def labels(self) -> list[str]:
        return ["+".join(g) for g in GROUPINGS[self.grouping]] + list(self.terms)


#: The candidates: every engine term, with or without memory traffic, at each ridge strength.
CANDIDATES = tuple(
    Candidate("matmul|attention", 0.0, terms, ridge=lam)
    for terms in (ENGINE_TERMS, (*ENGINE_TERMS, "memory traffic"))
    for lam in RIDGES
)
#: The baseline: latency proportional to all MACs.
MACS_ONLY = Candidate("all", 0.0, ())
