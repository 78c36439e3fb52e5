"""Elastic SwiftFormer supernet (arXiv 2303.15446), weight-compatible with timm.

Every stage is ``depth - 1`` convolutional encoders followed by one SwiftFormer encoder (local
representation, efficient additive attention, MLP). The additive attention follows the released
code (see the paper card's "Paper vs code"): queries and keys are L2-normalised, the scores are
L2-normalised over tokens, and ``proj`` then ``final`` map the result back.

Elastic dimensions: stage width, depth (the number of convolutional encoders; the SwiftFormer
encoder always closes the stage) and each block's hidden width. XS, S, L1 and L3 are points of
one space; timm's L3 is the largest network of ``swiftformer``.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from timm.layers import trunc_normal_
from timm.models.swiftformer import (
    Block,
    ConvEncoder,
    EfficientAdditiveAttention,
    Embedding,
    LayerScale2d,
    LocalRepresentation,
    Mlp,
    Stage,
    SwiftFormer,
)

from nas.core.arch import ArchConfig
from nas.core.family import Family
from nas.core.signature import BlockSignature
from nas.core.space import SearchSpace, SpaceRules
from nas.core.stage import block_slots
from supernets.base import ClassifierHead, SupernetBase, slot_key_map
from supernets.elastic_ops import (
    Elastic,
    ElasticBatchNorm2d,
    ElasticConv2d,
    ElasticLinear,
    enable_slice_gradients,
    leading,
)

FAMILY = "swiftformer"


# --------------------------------------------------------------------------------------------
# Elastic ops
# --------------------------------------------------------------------------------------------


class ElasticSwiftLayerScale2d(Elastic, LayerScale2d):
    """SwiftFormer's own layer scale (gamma of shape (dim, 1, 1))."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gamma = leading(self.gamma, x.shape[1], 1, 1)
        return x.mul_(gamma) if self.inplace else x * gamma


class ElasticStem(Elastic, nn.Sequential):
    """conv-BN-ReLU twice (stride 2 each); the first conv has half the stage-1 width."""

    elastic_children = {"0": ElasticConv2d, "1": ElasticBatchNorm2d, "3": ElasticConv2d, "4": ElasticBatchNorm2d}

    def forward(self, x: torch.Tensor, width: int) -> torch.Tensor:
        x = self[2](self[1](self[0](x, width // 2)))
        return self[5](self[4](self[3](x, width)))


class ElasticEmbedding(Elastic, Embedding):
    """Elastic version of timm's SwiftFormer ``Embedding``: strided conv and BN to ``out_channels``."""

    elastic_children = {"proj": ElasticConv2d, "norm": ElasticBatchNorm2d}

    def forward(self, x: torch.Tensor, out_channels: int) -> torch.Tensor:
        return self.norm(self.proj(x, out_channels))


# timm's ConvEncoder and LocalRepresentation are one residual unit (depthwise 3x3, BN, 1x1, GELU, 1x1,
# layer scale); the encoder's hidden width is elastic, the local representation's is the input's.
_CONV_UNIT_CHILDREN = {
    "dwconv": ElasticConv2d,
    "norm": ElasticBatchNorm2d,
    "pwconv1": ElasticConv2d,
    "pwconv2": ElasticConv2d,
    "layer_scale": ElasticSwiftLayerScale2d,
}


def _conv_unit(unit: nn.Module, x: torch.Tensor, hidden: int) -> torch.Tensor:
    y = unit.pwconv1(unit.norm(unit.dwconv(x)), hidden)
    y = unit.layer_scale(unit.pwconv2(unit.act(y), x.shape[1]))
    return x + unit.drop_path(y)


class ElasticConvEncoder(Elastic, ConvEncoder):
    """Depthwise 3x3, BN, 1x1 to ``hidden``, GELU, 1x1 back, layer scale, residual."""

    elastic_children = _CONV_UNIT_CHILDREN

    def forward(self, x: torch.Tensor, hidden: int) -> torch.Tensor:
        return _conv_unit(self, x, hidden)


class ElasticLocalRepresentation(Elastic, LocalRepresentation):
    """Elastic version of timm's ``LocalRepresentation``: depthwise 3x3, BN, 1x1, GELU, 1x1 at the input
    width, layer scale, residual."""

    elastic_children = _CONV_UNIT_CHILDREN

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _conv_unit(self, x, x.shape[1])


class ElasticAdditiveAttention(Elastic, EfficientAdditiveAttention):
    """Efficient additive attention on an elastic width (token dim = width, one head)."""

    elastic_children = dict.fromkeys(("to_query", "to_key", "proj", "final"), ElasticLinear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, C, H, W = x.shape
        x = x.flatten(2).permute(0, 2, 1)
        query = F.normalize(self.to_query(x, C), dim=-1)
        key = F.normalize(self.to_key(x, C), dim=-1)
        # The static model scales by its own token_dim ** -0.5; the token-wise L2 norm makes the
        # scale irrelevant, but using the same value keeps the two bit-for-bit equal.
        attn = F.normalize(query @ leading(self.w_g, C, 1) * C**-0.5, dim=1)
        attn = torch.sum(attn * query, dim=1, keepdim=True)
        out = self.proj(attn * key, C) + query
        return self.final(out, C).permute(0, 2, 1).reshape(B, -1, H, W)


class ElasticSwiftMlp(Elastic, Mlp):
    """Elastic version of timm's SwiftFormer ``Mlp``: BN, 1x1 conv to ``hidden``, activation, 1x1 conv
    back to the input width."""

    elastic_children = {"norm1": ElasticBatchNorm2d, "fc1": ElasticConv2d, "fc2": ElasticConv2d}

    def forward(self, x: torch.Tensor, hidden: int) -> torch.Tensor:
        width = x.shape[1]
        x = self.drop(self.act(self.fc1(self.norm1(x), hidden)))
        return self.drop(self.fc2(x, width))


class ElasticSwiftBlock(Elastic, Block):
    """The SwiftFormer encoder that closes every stage."""

    elastic_children = {
        "local_representation": ElasticLocalRepresentation,
        "attn": ElasticAdditiveAttention,
        "linear": ElasticSwiftMlp,
        "layer_scale_1": ElasticSwiftLayerScale2d,
        "layer_scale_2": ElasticSwiftLayerScale2d,
    }

    def forward(self, x: torch.Tensor, hidden: int) -> torch.Tensor:
        x = self.local_representation(x)
        x = x + self.drop_path(self.layer_scale_1(self.attn(x)))
        return x + self.drop_path(self.layer_scale_2(self.linear(x, hidden)))


class ElasticStage(Elastic, Stage):
    """Elastic version of timm's SwiftFormer ``Stage``: downsampling to ``width``, then a block per entry
    of ``hidden_widths``: conv encoders and the closing SwiftFormer encoder."""

    elastic_children = {"downsample": ElasticEmbedding}

    @classmethod
    def from_static(cls, module: nn.Module) -> nn.Module:
        stage = super().from_static(module)
        stage.blocks = nn.Sequential(
            *(
                ElasticSwiftBlock.from_static(b) if isinstance(b, Block) else ElasticConvEncoder.from_static(b)
                for b in module.blocks
            )
        )
        return stage

    def forward(self, x: torch.Tensor, width: int, hidden_widths: tuple[int, ...]) -> torch.Tensor:
        if not isinstance(self.downsample, nn.Identity):
            x = self.downsample(x, width)
        for slot, hidden in zip(block_slots(len(hidden_widths), 1, len(self.blocks)), hidden_widths):
            x = self.blocks[slot](x, hidden)
        return x


# --------------------------------------------------------------------------------------------
# Supernet
# --------------------------------------------------------------------------------------------


def _init_like_timm(module: nn.Module) -> None:
    """SwiftFormer's init: truncated normal (std 0.02) for every conv and linear weight, zero bias."""
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


class SwiftFormerSupernet(SupernetBase):
    """Weight-sharing supernet of a SwiftFormer space; ``net(x, arch)`` runs ``arch``."""

    family = FAMILY

    def __init__(self, space: SearchSpace, *, distillation: bool = True, device=None, dtype=None, **options):
        # options: SupernetBase's (img_size, num_classes, in_chans, drop rates, layer scale), kept on self.
        super().__init__(space, **options)
        dd = {"device": device, "dtype": dtype}
        depths, widths = list(self.largest.depths), list(self.largest.widths)
        # timm's SwiftFormer builds stem, stages and heads for a single expansion ratio; build the
        # largest model and widen each block's hidden layer to its slot's maximum.
        reference = SwiftFormer(
            layers=depths,
            embed_dims=widths,
            mlp_ratios=1,
            num_classes=self.num_classes,
            in_chans=self.in_chans,
            drop_rate=self.drop_rate,
            drop_path_rate=self.drop_path_rate,
            layer_scale_init_value=self.layer_scale_init_value,
            **dd,
        )
        for s, st in enumerate(space.stages):
            for slot in range(depths[s]):
                reference.stages[s].blocks[slot] = _static_block(
                    reference.stages[s].blocks[slot], widths[s], st.max_hidden(slot), self.layer_scale_init_value, **dd
                )
        _init_like_timm(reference)
        self.stem = ElasticStem.from_static(reference.stem)
        self.stages = nn.Sequential(*(ElasticStage.from_static(stage) for stage in reference.stages))
        self.norm = ElasticBatchNorm2d.from_static(reference.norm)
        self.head_drop = reference.head_drop
        self.head = ElasticLinear.from_static(reference.head)
        self.head_dist = ElasticLinear.from_static(reference.head_dist) if distillation else None
        enable_slice_gradients(self)  # the sub-network's slices get their gradients in place

    def forward_features(self, x: torch.Tensor, arch: ArchConfig) -> torch.Tensor:
        x = self.stem(x, arch.widths[0])
        for s, stage in enumerate(self.stages):
            x = stage(x, arch.widths[s], arch.hidden_widths[s])
        return self.norm(x)

    def forward_elastic(self, x: torch.Tensor, arch: ArchConfig | None = None):
        arch = self.largest if arch is None else self.space.validate(arch)
        return self.forward_head(self.forward_features(x, arch))

    def static_layout(self, arch: ArchConfig):
        slots = [block_slots(d, 1, st.max_depth) for d, st in zip(arch.depths, self.space.stages)]
        return build_static, slot_key_map(slots)


def _static_block(
    block: nn.Module, width: int, hidden: int, layer_scale_init_value: float, device=None, dtype=None
) -> nn.Module:
    """A block like ``block`` (same kind, drop path) with FFN hidden width ``hidden``."""
    drop_path = block.drop_path
    if isinstance(block, Block):
        new = Block(
            width, mlp_ratio=hidden / width, layer_scale_init_value=layer_scale_init_value, device=device, dtype=dtype
        )
    else:
        new = ConvEncoder(width, hidden_dim=hidden, device=device, dtype=dtype)
    new.drop_path = drop_path
    return new


# --------------------------------------------------------------------------------------------
# Static models and extraction
# --------------------------------------------------------------------------------------------


class SwiftFormerStatic(SwiftFormer):
    """timm's SwiftFormer with a hidden width per block (timm has one ratio for the network)."""

    def __init__(
        self,
        *,
        layers,
        embed_dims,
        hidden_widths,
        layer_scale_init_value: float = 1e-5,
        device=None,
        dtype=None,
        **kwargs,
    ):
        super().__init__(
            layers=list(layers),
            embed_dims=list(embed_dims),
            mlp_ratios=4,
            layer_scale_init_value=layer_scale_init_value,
            device=device,
            dtype=dtype,
            **kwargs,
        )
        self.hidden_widths = tuple(tuple(h) for h in hidden_widths)
        for s, hidden in enumerate(self.hidden_widths):
            for b, h in enumerate(hidden):
                self.stages[s].blocks[b] = _static_block(
                    self.stages[s].blocks[b], embed_dims[s], h, layer_scale_init_value, device=device, dtype=dtype
                )
        self._initialize_weights()


def timm_ratio(arch: ArchConfig) -> float | None:
    """The single expansion ratio timm's SwiftFormer needs, or None if blocks differ."""
    ratios = {h / w for w, hidden in zip(arch.widths, arch.hidden_widths) for h in hidden}
    return ratios.pop() if len(ratios) == 1 else None


def build_static(arch: ArchConfig, img_size=224, num_classes: int = 1000, **kwargs) -> SwiftFormer:
    """timm's ``SwiftFormer`` when one expansion ratio covers every block, else
    :class:`SwiftFormerStatic` (timm's parameter names). SwiftFormer has no position bias, so the
    model runs at any input size.

    ``kwargs`` (``in_chans``, ``drop_rate``, ``drop_path_rate``, ``layer_scale_init_value``, ``device``,
    ``dtype``, ...) go on to the model, with timm's defaults, as timm's own entry points pass them."""
    if not kwargs.pop("distillation", True):
        raise ValueError("SwiftFormer models always carry the distillation head (as timm's)")
    common = dict(
        layers=list(arch.depths),
        embed_dims=list(arch.widths),
        num_classes=num_classes,
        **kwargs,
    )
    ratio = timm_ratio(arch)
    if ratio is not None and float(ratio).is_integer():
        return SwiftFormer(mlp_ratios=int(ratio), **common)
    return SwiftFormerStatic(hidden_widths=arch.hidden_widths, **common)


# --------------------------------------------------------------------------------------------
# The family: its cost units (priced blocks)
# --------------------------------------------------------------------------------------------


class SwiftFormerFamily(Family):
    """SwiftFormer (Shaker et al. 2023): every stage ends in one encoder with efficient additive
    attention (§3.3); slimmable depth, width and FFN expansion, trained with the sandwich rule."""

    name = FAMILY
    # One SwiftFormer encoder closes every stage (§3.3).
    rules = SpaceRules(attention_stages=(0, 1, 2, 3), fixed_attention=1)
    attention_label = "SwiftFormer encoders"

    supernet_class = SwiftFormerSupernet
    build_static = staticmethod(build_static)

    def downsample_kind(self, stage):
        # A patch embedding (3x3 stride-2 conv) between stages, timm's ``Embedding``.
        return "embedding"

    def stage_signatures(self, arch, stage, resolution):
        width, last = arch.widths[stage], arch.depths[stage] - 1
        for b, hidden in enumerate(arch.hidden_widths[stage]):
            yield BlockSignature("swift_encoder" if b == last else "conv_encoder", width, width, hidden, resolution)

    def width_signatures(self, stage, stage_space, width, resolution):
        for r in stage_space.expansion_ratios:
            yield BlockSignature("swift_encoder", width, width, r * width, resolution)
            if stage_space.max_depth > 1:
                yield BlockSignature("conv_encoder", width, width, r * width, resolution)

    def build_block(self, sig, device=None, dtype=None):
        """A static module computing exactly block ``sig`` of a timm SwiftFormer."""
        dd = {"device": device, "dtype": dtype}
        if sig.kind == "stem":
            return SwiftFormer(layers=[1, 1, 1, 1], embed_dims=[sig.c_out] * 4, in_chans=sig.c_in, **dd).stem
        if sig.kind == "embedding":
            return Embedding(sig.c_in, sig.c_out, patch_size=3, stride=2, padding=1, **dd)
        if sig.kind == "conv_encoder":
            return ConvEncoder(sig.c_in, hidden_dim=sig.hidden, **dd)
        if sig.kind == "swift_encoder":
            return Block(sig.c_in, mlp_ratio=sig.hidden / sig.c_in, **dd)
        if sig.kind == "head":
            return ClassifierHead(nn.BatchNorm2d(sig.c_in, **dd), sig.c_in, sig.c_out, **dd)
        raise ValueError(f"unknown {FAMILY} block kind {sig.kind!r}")
