"""A fourth family in one file: a small residual conv net registers itself and goes through the
whole pipeline (space, supernet training, extraction, a measured latency table, greedy search,
comparison with random networks) without any other file of the project knowing it.

The family is also the worked example of docs/how-to/add-a-family.md.
"""

from __future__ import annotations

import json

import torch
import torch.nn as nn
import torch.nn.functional as F
from helpers import argv

from nas.core.arch import ArchConfig
from nas.core.family import Family, SpaceRules
from nas.core.signature import BlockSignature
from nas.core.space import SearchSpace
from supernets import get_family, register_family
from supernets.base import slot_key_map
from supernets.elastic_ops import (
    Elastic,
    ElasticBatchNorm2d,
    ElasticConv2d,
    ElasticLinear,
    copy_sliced_state,
)

# --- the static network: blocks, then the model ---------------------------------------------------


class ConvBnAct(nn.Module):
    """3x3 conv with stride, BatchNorm, ReLU: the stem (stride 4) and each downsampling (stride 2)."""

    def __init__(self, c_in: int, c_out: int, stride: int, device=None, dtype=None):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False, device=device, dtype=dtype)
        self.bn = nn.BatchNorm2d(c_out, device=device, dtype=dtype)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class ResidualBlock(nn.Module):
    """x + BN(1x1(ReLU(BN(3x3(x))))), the 3x3 widening to ``hidden`` channels."""

    def __init__(self, width: int, hidden: int, device=None, dtype=None):
        super().__init__()
        dd = {"device": device, "dtype": dtype}
        self.conv1 = nn.Conv2d(width, hidden, 3, 1, 1, bias=False, **dd)
        self.bn1 = nn.BatchNorm2d(hidden, **dd)
        self.conv2 = nn.Conv2d(hidden, width, 1, bias=False, **dd)
        self.bn2 = nn.BatchNorm2d(width, **dd)

    def forward(self, x):
        return x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))


class Head(nn.Module):
    """Global average pooling and the classifier."""

    def __init__(self, width: int, num_classes: int, device=None, dtype=None):
        super().__init__()
        self.fc = nn.Linear(width, num_classes, device=device, dtype=dtype)

    def forward(self, x):
        return self.fc(x.mean(dim=(2, 3)))


class Stage(nn.Module):
    def __init__(self, downsample: nn.Module, blocks: list[nn.Module]):
        super().__init__()
        self.downsample = downsample
        self.blocks = nn.ModuleList(blocks)


class TinyConvNet(nn.Module):
    """A static network of the family (what training from scratch and export see)."""

    def __init__(self, arch: ArchConfig, num_classes: int = 1000, in_chans: int = 3, device=None, dtype=None):
        super().__init__()
        dd = {"device": device, "dtype": dtype}
        w = arch.widths
        self.stem = ConvBnAct(in_chans, w[0], 4, **dd)
        self.stages = nn.ModuleList(
            Stage(
                ConvBnAct(w[s - 1], w[s], 2, **dd) if s else nn.Identity(),
                [ResidualBlock(w[s], h, **dd) for h in arch.hidden_widths[s]],
            )
            for s in range(len(w))
        )
        self.head = Head(w[-1], num_classes, **dd)

    def forward(self, x):
        x = self.stem(x)
        for stage in self.stages:
            x = stage.downsample(x)
            for block in stage.blocks:
                x = block(x)
        return self.head(x)


# --- the elastic ops and the supernet ---------------------------------------------------------------


class ElasticConvBnAct(Elastic, ConvBnAct):
    elastic_children = {"conv": ElasticConv2d, "bn": ElasticBatchNorm2d}

    def forward(self, x, width: int):
        return F.relu(self.bn(self.conv(x, out_channels=width)))


class ElasticResidualBlock(Elastic, ResidualBlock):
    elastic_children = {
        "conv1": ElasticConv2d,
        "bn1": ElasticBatchNorm2d,
        "conv2": ElasticConv2d,
        "bn2": ElasticBatchNorm2d,
    }

    def forward(self, x, hidden: int):
        h = F.relu(self.bn1(self.conv1(x, out_channels=hidden)))
        return x + self.bn2(self.conv2(h, out_channels=x.shape[1]))


class TinyConvSupernet(nn.Module):
    """The largest network's weights; ``net(x, arch)`` runs any sub-network on their leading slices."""

    def __init__(
        self,
        space: SearchSpace,
        img_size=224,
        num_classes: int = 1000,
        in_chans: int = 3,
        device=None,
        dtype=None,
        **unused,
    ):
        super().__init__()
        self.space, self.img_size, self.num_classes, self.in_chans = space, img_size, num_classes, in_chans
        largest = TinyConvNet(space.largest(), num_classes, in_chans, device=device, dtype=dtype)
        self.stem = ElasticConvBnAct.from_static(largest.stem)
        for stage in largest.stages:
            if not isinstance(stage.downsample, nn.Identity):
                stage.downsample = ElasticConvBnAct.from_static(stage.downsample)
            stage.blocks = nn.ModuleList(ElasticResidualBlock.from_static(b) for b in stage.blocks)
        self.stages = largest.stages
        self.head = largest.head
        self.head.fc = ElasticLinear.from_static(largest.head.fc)

    def forward(self, x, arch: ArchConfig | None = None):
        arch = arch or self.space.largest()
        x = self.stem(x, arch.widths[0])
        for s, stage in enumerate(self.stages):
            if s:
                x = stage.downsample(x, arch.widths[s])
            for slot, hidden in zip(self.space.slots(arch, s), arch.hidden_widths[s]):
                x = stage.blocks[slot](x, hidden)
        return self.head.fc(x.mean(dim=(2, 3)))


# --- the family -------------------------------------------------------------------------------------


def build_static(arch, img_size=224, num_classes=1000, in_chans=3, device=None, dtype=None, **unused):
    return TinyConvNet(arch, num_classes, in_chans, device=device, dtype=dtype)


class TinyConvFamily(Family):
    name = "tinyconv"
    rules = SpaceRules(attention_stages=())  # no attention anywhere

    def build_supernet(self, space, img_size=224, num_classes=1000, **kwargs):
        return TinyConvSupernet(space, img_size, num_classes, **kwargs)

    def build_static(self, arch, img_size=224, num_classes=1000, in_chans=3, **kwargs):
        return build_static(arch, img_size, num_classes, in_chans, **kwargs)

    def extract(self, net, arch):
        net.space.validate(arch)
        param = next(net.parameters())
        static = build_static(arch, net.img_size, net.num_classes, net.in_chans, device=param.device, dtype=param.dtype)
        slots = [net.space.slots(arch, s) for s in range(len(arch.depths))]
        with torch.no_grad():
            copy_sliced_state(static, net.state_dict(), slot_key_map(slots))
        return static.train(net.training)

    def stage_signatures(self, arch, stage, resolution):
        width = arch.widths[stage]
        return [BlockSignature("block", width, width, h, resolution) for h in arch.hidden_widths[stage]]

    def build_block(self, sig, device=None, dtype=None):
        dd = {"device": device, "dtype": dtype}
        if sig.kind in ("stem", "downsample"):
            return ConvBnAct(sig.c_in, sig.c_out, sig.stride, **dd)
        if sig.kind == "block":
            return ResidualBlock(sig.c_in, sig.hidden, **dd)
        return Head(sig.c_in, sig.c_out, **dd)

    def width_signatures(self, stage, stage_space, width, resolution):
        return [BlockSignature("block", width, width, r * width, resolution) for r in stage_space.expansion_ratios]


register_family(TinyConvFamily())

SPACE = """\
family: tinyconv
description: a residual conv net, to show that a family is one file
stages:
  - {depths: [1, 2], widths: [8, 12], expansion_ratios: [1, 2]}
  - {depths: [1, 2], widths: [12, 16], expansion_ratios: [1, 2]}
  - {depths: [1, 2], widths: [16, 24], expansion_ratios: [1, 2]}
  - {depths: [1, 2], widths: [24, 32], expansion_ratios: [1, 2]}
members:
  base: {depths: [1, 1, 2, 1], widths: [8, 12, 16, 24], attention: [0, 0, 0, 0],
         hidden_widths: [[8], [24], [16, 32], [48]]}
"""


# --- the proof --------------------------------------------------------------------------------------


def test_a_family_in_one_file_goes_through_the_whole_pipeline(tmp_path, monkeypatch, capsys):
    from nas.cli import main
    from nas.config.spaces import load_space
    from nas.latency import LatencyTable
    from nas.metrics import count_params
    from nas.metrics.signatures import block_signatures
    from supernets import build_supernet, extract

    monkeypatch.setenv("NAS_LATENCY_DIR", str(tmp_path / "tables"))
    space_file = tmp_path / "tinyconv.yaml"
    space_file.write_text(SPACE)
    space = load_space(space_file)
    assert space.family == "tinyconv" and space.size > 1000 and get_family("tinyconv").training == "sandwich"

    # supernet == extracted static network, and the priced blocks add up to the static network
    net = build_supernet(space, img_size=32, num_classes=10).eval()
    arch = space.named("base")
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert (net(x, arch) - extract(net, arch)(x)).abs().max() < 1e-5
    assert count_params(arch, 32, 10) == sum(p.numel() for p in build_static(arch, 32, 10).parameters())
    assert [s.kind for s in block_signatures(arch, 32, 10)][:3] == ["stem", "block", "downsample"]

    supernet = tmp_path / "supernet"
    assert (
        main(
            argv(
                "train-supernet tinyconv --space {} --run {} --epochs 1 --batch-size 32 "
                "--img-size 32 --max-steps 6 --bn-calib-batches 1",
                space_file,
                supernet,
            )
        )
        == 0
    )
    command = "build-table --device cpu --space {} --img-size 32 --num-classes 10 --repeats 2 --busy-retries 0"
    assert main(argv(command, space_file)) == 0
    assert (tmp_path / "tables" / "cpu" / "tinyconv-32.json").exists()
    table = LatencyTable.load("cpu", space, 32)
    assert table.source == "measured"
    target = (table.latency(space.largest()) + table.latency(space.smallest())) / 2
    search = tmp_path / "search"
    capsys.readouterr()
    assert (
        main(
            argv(
                "search --supernet {} --objective latency --target {} --device cpu --img-size 32 --run {} --json",
                supernet,
                f"{target:.6f}",
                search,
            )
        )
        == 0
    )
    found = json.loads(capsys.readouterr().out)
    assert found["latency_ms"] <= target and found["evaluations"] > 0 and "measured" in found["latency_source"]
    assert ArchConfig.load(search / "arch.yaml").family == "tinyconv"
    compare = tmp_path / "compare"
    assert (
        main(
            argv(
                "compare --searched {} --random 2 --max-steps 2 --epochs 1 --batch-size 32 "
                "--img-size 32 --out {} --json",
                search / "arch.yaml",
                compare,
            )
        )
        == 0
    )
    result = json.loads((compare / "result.json").read_text())
    assert [r["network"] for r in result["rows"]] == ["searched", "random-0", "random-1"]
    assert all(r["latency_ms"] <= target * 1.0001 for r in result["rows"])
