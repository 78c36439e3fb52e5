import json
import random
from collections import Counter

import pytest
import torch
from helpers import randomize_

from nas import NasError, load_space
from nas.cli import main
from nas.metrics import count_params
from supernets import build_supernet, extract
from supernets.efficientformer import EfficientFormerStatic


@pytest.fixture(scope="module")
def space():
    return load_space("efficientformer")


def test_l3_uses_the_released_split(space):
    # The paper's table says 3 MB4D + 3 MB3D; the code (and timm) use 2 + 4.
    assert space.named("efficientformer_l3").block_types[3][:6] == ("mb4d",) * 2 + ("mb3d",) * 4


@pytest.mark.parametrize("img_size", [96, 97])
def test_mixed_placements_extract_exactly_at_any_resolution(space, img_size):
    net = randomize_(build_supernet(space, img_size=img_size, num_classes=10), seed=img_size).eval()
    rng = random.Random(img_size)
    archs = [space.sample(rng) for _ in range(3)]
    # MB3D in stage 3 and none in stage 4: layouts timm cannot build.
    archs.append(next(a for a in (space.sample(rng) for _ in range(500)) if a.attention[2] > 0))
    archs.append(next(a for a in (space.sample(rng) for _ in range(500)) if a.attention[3] == 0))
    x = torch.randn(2, 3, img_size, img_size)
    for arch in archs:
        static = extract(net, arch).eval()
        assert isinstance(static, EfficientFormerStatic)  # timm's bias grid is fixed to 7x7
        with torch.no_grad():
            assert (net(x, arch) - static(x)).abs().max() <= 1e-5
        assert count_params(arch, img_size, 10) == sum(p.numel() for p in static.parameters())


def test_attention_bias_is_built_for_the_construction_resolution(space):
    net = build_supernet(space, img_size=96, num_classes=10)
    assert net.stages[3].blocks[0].mb3d.token_mixer.attention_biases.shape == (8, 9)  # 3x3 grid
    assert net.stages[2].blocks[0].mb3d.token_mixer.attention_biases.shape == (8, 36)  # 6x6 grid
    assert net.stages[1].blocks[0].mb3d is None  # MB3D only in stages 3 and 4
    with pytest.raises(ValueError, match="built for 36 tokens but got 64"):
        net.eval()(torch.randn(1, 3, 128, 128))


def test_gumbel_choices_follow_alpha_as_the_temperature_falls(space):
    torch.manual_seed(0)
    net = build_supernet(space, img_size=64, num_classes=10)
    with torch.no_grad():
        net.arch_logits[3][0] = torch.tensor([0.0, 2.0, 0.0])  # favour mb3d at stage 4, position 1

    def draw(temperature, n=300):
        net.set_temperature(temperature)
        return Counter(net.sample_choices()[3][0][0] for _ in range(n))

    hot, cold = draw(100.0), draw(0.1)
    assert all(60 < hot[k] < 140 for k in ("mb4d", "mb3d", "skip")), hot  # near uniform
    assert cold["mb3d"] >= 297, cold
    assert all(choice != "mb3d" for row in net.sample_choices()[:2] for choice, _ in row)


def test_gumbel_training_step_reaches_alpha_and_weights(space):
    torch.manual_seed(1)
    net = build_supernet(space, img_size=64, num_classes=10).train()
    net.set_temperature(1.0)
    net(torch.randn(2, 3, 64, 64)).logsumexp(dim=1).mean().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in net.arch_parameters())
    assert net.stem.conv1.weight.grad.abs().sum() > 0
    assert len(net.arch_parameters()) + len(net.weight_parameters()) == len(list(net.parameters()))


def test_importance_scores(space):
    net = build_supernet(space, img_size=64, num_classes=10)
    with torch.no_grad():
        net.arch_logits[2][5] = torch.tensor([0.0, 0.0, 4.0])  # stage 3 position 6 wants the identity
    scores = net.importance()
    assert scores.blocks[2][5] < 0.1 < scores.blocks[2][4]
    assert scores.blocks[0][0] == pytest.approx(0.5)  # stage 1: MB4D or identity, uniform α
    assert scores.choice_probs[0][0]["mb3d"] == 0.0
    assert scores.stages[2] < scores.stages[3]
    json.dumps(scores.to_dict())


def test_mb3d_where_the_space_forbids_it(space, tmp_path, capsys):
    l1 = space.named("efficientformer_l1")
    types = [list(t) for t in l1.block_types]
    types[1][1] = "mb3d"  # stage 2
    bad = l1.to_dict() | {"attention": [0, 1, 0, 1], "block_types": types}
    path = tmp_path / "arch.yaml"
    from nas.core.typed_yaml import dump_yaml

    path.write_text(dump_yaml(bad))
    assert main(["profile", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "stage 2" in err[0] and "attention[1] = 1" in err[0] and "allowed: 0" in err[0]
    types = [list(t) for t in l1.block_types]
    types[3][:4] = ["mb4d", "mb3d", "mb4d", "mb4d"]
    with pytest.raises(NasError, match="mb4d after mb3d"):
        space.validate(l1.replace(block_types=types))


def test_shrink_actions_follow_the_paper(space):
    arch = space.named("efficientformer_l1")
    actions = list(space.shrink_actions(arch))
    kinds = Counter(a.kind for a, _ in actions)
    assert kinds["remove_block"] == sum(arch.depths)  # any block may be skipped
    assert kinds["remove_attention"] == 1 and kinds["narrow_stage"] == 4
    narrowed = dict((a.stage, new) for a, new in actions if a.kind == "narrow_stage")
    assert narrowed[3].widths[3] == arch.widths[3] - 16
