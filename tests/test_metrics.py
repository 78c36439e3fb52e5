import random

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from nas import load_space
from nas.core.signature import BlockSignature
from nas.metrics import count_macs, count_params, mes
from nas.metrics.signatures import block_signatures
from supernets import build_static


@pytest.mark.parametrize("space_name", ["efficientformerv2", "efficientformer", "swiftformer"])
@pytest.mark.parametrize("img_size, num_classes", [(224, 1000), (64, 10), (97, 100)])
def test_counts_equal_the_whole_static_model(space_name, img_size, num_classes):
    space = load_space(space_name)
    rng = random.Random(img_size)
    for arch in [space.sample(rng) for _ in range(3)] + [space.smallest()]:
        model = build_static(arch, img_size=img_size, num_classes=num_classes, device="meta").eval()
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            model(torch.empty(1, 3, img_size, img_size, device="meta"))
        assert count_params(arch, img_size, num_classes) == sum(p.numel() for p in model.parameters())
        assert count_macs(arch, img_size, num_classes) == counter.get_total_flops() // 2


def test_macs_match_the_paper():
    space = load_space("efficientformerv2")
    # EfficientFormerV2 tab. 2: S0 0.40, S1 0.65, S2 1.25, L 2.56 GMACs.
    for name, gmacs in [
        ("efficientformerv2_s0", 0.40),
        ("efficientformerv2_s1", 0.65),
        ("efficientformerv2_s2", 1.25),
        ("efficientformerv2_l", 2.56),
    ]:
        assert count_macs(space.named(name)) / 1e9 == pytest.approx(gmacs, abs=0.01)


def test_macs_grow_with_resolution():
    arch = load_space("efficientformerv2").named("efficientformerv2_s0")
    assert count_macs(arch, 64) < count_macs(arch, 128) < count_macs(arch, 224)


def test_mes_matches_the_papers_table():
    # EfficientFormerV2 tab. 2 (params in M, iPhone 12 ms, MES as printed).
    for params_m, ms, printed in [(12.6, 1.6, 30.5), (3.5, 0.9, 102.9), (6.1, 1.1, 63.8), (26.1, 2.7, 12.6)]:
        assert mes(params_m * 1e6, ms) == pytest.approx(printed, abs=0.1)
    assert mes(3e6, 1.0) == 100.0
    with pytest.raises(ValueError):
        mes(0, 1.0)


def test_signature_key_round_trip():
    arch = load_space("efficientformerv2").named("efficientformerv2_s0")
    sigs = block_signatures(arch, 224)
    assert sigs[0].kind == "stem" and sigs[-1].kind == "head"
    assert sum(s.kind == "mhsa_ffn" for s in sigs) == 4
    assert [s for s in sigs if s.kind == "mhsa_ffn"][0].stride == 2
    for sig in sigs:
        assert BlockSignature.from_key(sig.key()) == sig
