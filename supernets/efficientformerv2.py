"""Elastic EfficientFormerV2 supernet (arXiv 2212.08059), weight-compatible with timm.

Layout follows ``timm/models/efficientformer_v2.py``: elastic ops first, then the supernet, then
extraction into static models and per-block cost units. Where paper and released code differ we
follow the code (see the paper card's "Paper vs code"): stride attention in stage 3 is a strided
depthwise conv before Q/K/V and a bilinear upsample after; the dual-path downsampling "pool" is a
kernel-1 stride-2 subsample; 8 heads, key width 32 and value width 128 in every MHSA.

Elastic dimensions (§4.2.2): stage width (the output channels of every block's last projection),
each FFN's hidden width (the channels of its depthwise conv), depth, and the number of MHSA blocks
in stages 3 and 4. Attention heads and key/value widths are fixed, as in the released models.
"""

from __future__ import annotations

from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F
from timm.layers import (
    ConvNormAct,
    calculate_drop_path_rates,
    get_act_layer,
    get_norm_layer,
    trunc_normal_,
)
from timm.models.efficientformer_v2 import (
    Attention2d,
    Attention2dDownsample,
    ConvMlpWithNorm,
    ConvNorm,
    Downsample,
    EfficientFormerV2,
    EfficientFormerV2Block,
    EfficientFormerV2Stage,
    LocalGlobalQuery,
    Stem4,
)

from nas.core.arch import ArchConfig
from nas.core.family import Family
from nas.core.signature import NUM_STAGES, BlockSignature, stage_resolutions
from nas.core.space import SearchSpace, SpaceRules
from nas.core.stage import block_slots
from supernets.base import ClassifierHead, SupernetBase, slot_key_map, stage_input_resolutions
from supernets.elastic_ops import (
    Elastic,
    ElasticBatchNorm2d,
    ElasticBatchNormAct2d,
    ElasticConv2d,
    ElasticLayerScale2d,
    enable_slice_gradients,
)

FAMILY = "efficientformerv2"
ATTENTION_STRIDE = {2: 2}  # stage index -> stride of its attention (§3.4 stride attention)


def _act_layer():
    return get_act_layer("gelu")


def _norm_layer():
    return partial(get_norm_layer("batchnorm2d"), eps=1e-5)


def _stage(index: int, dim_in: int, dim: int, **options) -> EfficientFormerV2Stage:
    """Stage ``index`` laid out as timm's EfficientFormerV2 lays it out: every stage after the first opens
    with a downsample, which attends in the last stage (§3.4), and the third stage's attention is strided
    (§3.4 stride attention). ``options`` are the stage's own (depth, resolution, attention, FFN ratios, ...)."""
    return EfficientFormerV2Stage(
        dim_in,
        dim,
        downsample=index > 0,
        block_stride=ATTENTION_STRIDE.get(index),
        downsample_use_attn=index >= 3,
        act_layer=_act_layer(),
        norm_layer=_norm_layer(),
        **options,
    )


# --------------------------------------------------------------------------------------------
# Elastic ops
# --------------------------------------------------------------------------------------------


class ElasticConvNorm(Elastic, ConvNorm):
    """Elastic version of timm's ``ConvNorm``: conv and BN; ``out_channels`` selects the first filters."""

    elastic_children = {"conv": ElasticConv2d, "bn": ElasticBatchNorm2d}

    def forward(self, x: torch.Tensor, out_channels: int | None = None) -> torch.Tensor:
        return self.bn(self.conv(x, out_channels))


class ElasticConvNormAct(Elastic, ConvNormAct):
    """Elastic version of timm's ``ConvNormAct``: conv, BN and activation; ``out_channels`` selects the
    first filters."""

    elastic_children = {"conv": ElasticConv2d, "bn": ElasticBatchNormAct2d}

    def forward(self, x: torch.Tensor, out_channels: int | None = None) -> torch.Tensor:
        return self.bn(self.conv(x, out_channels))


class ElasticConvMlp(Elastic, ConvMlpWithNorm):
    """FFN with the depthwise conv inside (§3.1): 1x1 conv to ``hidden``, 3x3 depthwise, 1x1 back."""

    elastic_children = {"fc1": ElasticConvNormAct, "mid": ElasticConvNormAct, "fc2": ElasticConvNorm}

    def forward(self, x: torch.Tensor, hidden: int) -> torch.Tensor:
        width = x.shape[1]
        x = self.fc1(x, hidden)
        x = self.mid(x)
        x = self.drop1(x)
        x = self.fc2(x, width)
        return self.drop2(x)


def _check_grid(module: nn.Module, x: torch.Tensor, grid: tuple[int, int]) -> None:
    if tuple(x.shape[-2:]) != tuple(grid):
        raise ValueError(
            f"{type(module).__name__} was built for a {grid[0]}x{grid[1]} token grid but got "
            f"{x.shape[-2]}x{x.shape[-1]}: build the supernet with the input size you run it at"
        )


def _keys_values(attention: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Keys (heads, dims, tokens), values (heads, tokens, dims) and the values' local depthwise conv
    (§3.3), shared by the attention and the attention downsampling (§3.5) of timm's classes."""
    B, heads, tokens = x.shape[0], attention.num_heads, attention.N
    k = attention.k(x).reshape(B, heads, -1, tokens)
    v = attention.v(x)
    v_local = attention.v_local(v)
    return k, v.reshape(B, heads, -1, tokens).permute(0, 1, 3, 2), v_local


class ElasticAttention2d(Elastic, Attention2d):
    """MHSA with talking heads, a depthwise conv on values and a learned position bias (§3.3);
    with ``stride`` it is the stride attention of stage 3 (§3.4, as in the released code).

    The bias table is built for the construction resolution and gathered on every call (no cache:
    several sub-networks and devices may share the module).
    """

    elastic_children = dict.fromkeys(("q", "k", "v", "proj", "stride_conv"), ElasticConvNorm)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, C, H, W = x.shape
        if self.stride_conv is not None:
            x = self.stride_conv(x)
        _check_grid(self, x, self.resolution)

        q = self.q(x).reshape(B, self.num_heads, -1, self.N).permute(0, 1, 3, 2)
        k, v, v_local = _keys_values(self, x)
        attn = (q @ k) * self.scale
        attn = attn + self.attention_biases[:, self.attention_bias_idxs]
        attn = self.talking_head1(attn)
        attn = attn.softmax(dim=-1)
        attn = self.talking_head2(attn)

        x = (attn @ v).transpose(2, 3)
        x = x.reshape(B, self.dh, self.resolution[0], self.resolution[1]) + v_local
        if self.upsample is not None:
            # Upsample to the input grid (equal to timm's scale_factor=2 for even sizes; exact for odd).
            x = F.interpolate(x, size=(H, W), mode="bilinear", align_corners=False)
        x = self.act(x)
        return self.proj(x, C)


class ElasticLocalGlobalQuery(Elastic, LocalGlobalQuery):
    """Dual-path query (§3.5): strided depthwise conv plus a kernel-1 stride-2 subsample."""

    elastic_children = {"local": ElasticConv2d, "proj": ElasticConvNorm}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.local(x) + self.pool(x))


class ElasticAttention2dDownsample(Elastic, Attention2dDownsample):
    """Elastic version of timm's ``Attention2dDownsample``: attention with a dual-path strided query
    (§3.5), projected to ``out_channels``."""

    elastic_children = {
        "q": ElasticLocalGlobalQuery,
        "k": ElasticConvNorm,
        "v": ElasticConvNorm,
        "proj": ElasticConvNorm,
    }

    def forward(self, x: torch.Tensor, out_channels: int) -> torch.Tensor:
        B = x.shape[0]
        _check_grid(self, x, self.resolution)
        q = self.q(x).reshape(B, self.num_heads, -1, self.N2).permute(0, 1, 3, 2)
        k, v, v_local = _keys_values(self, x)
        attn = (q @ k) * self.scale
        attn = attn + self.attention_biases[:, self.attention_bias_idxs]
        attn = attn.softmax(dim=-1)

        x = (attn @ v).transpose(2, 3)
        x = x.reshape(B, self.dh, self.resolution2[0], self.resolution2[1]) + v_local
        x = self.act(x)
        return self.proj(x, out_channels)


class ElasticDownsample(Elastic, Downsample):
    """Strided 3x3 conv; into stage 4 plus attention downsampling (§3.5)."""

    elastic_children = {"conv": ElasticConvNorm, "attn": ElasticAttention2dDownsample}

    def forward(self, x: torch.Tensor, out_channels: int) -> torch.Tensor:
        out = self.conv(x, out_channels)
        if self.attn is not None:
            return self.attn(x, out_channels) + out
        return out


class ElasticBlock(Elastic, EfficientFormerV2Block):
    """FFN block, or MHSA + FFN block, each branch with layer scale and a residual (§4.1)."""

    elastic_children = {
        "token_mixer": ElasticAttention2d,
        "ls1": ElasticLayerScale2d,
        "mlp": ElasticConvMlp,
        "ls2": ElasticLayerScale2d,
    }

    def forward(self, x: torch.Tensor, hidden: int, use_attn: bool) -> torch.Tensor:
        if use_attn:
            x = x + self.drop_path1(self.ls1(self.token_mixer(x)))
        return x + self.drop_path2(self.ls2(self.mlp(x, hidden)))


class ElasticStem4(Elastic, Stem4):
    """Two stride-2 3x3 conv-BN-GELU layers; the first has half the stage-1 width (timm)."""

    elastic_children = {"conv1": ElasticConvNormAct, "conv2": ElasticConvNormAct}

    def forward(self, x: torch.Tensor, width: int) -> torch.Tensor:
        return self.conv2(self.conv1(x, width // 2), width)


class ElasticStage(Elastic, EfficientFormerV2Stage):
    """Elastic version of timm's ``EfficientFormerV2Stage``: downsampling to ``width``, then a block per
    entry of ``hidden_widths``, the last ``attention`` of them with MHSA (slots by :func:`block_slots`)."""

    elastic_children = {"downsample": ElasticDownsample}

    @classmethod
    def from_static(cls, module: nn.Module) -> nn.Module:
        stage = super().from_static(module)
        stage.blocks = nn.Sequential(*(ElasticBlock.from_static(b) for b in module.blocks))
        return stage

    def forward(self, x: torch.Tensor, width: int, hidden_widths: tuple[int, ...], attention: int) -> torch.Tensor:
        if not isinstance(self.downsample, nn.Identity):
            x = self.downsample(x, width)
        depth = len(hidden_widths)
        slots = block_slots(depth, attention, len(self.blocks))
        for i, (slot, hidden) in enumerate(zip(slots, hidden_widths)):
            x = self.blocks[slot](x, hidden, use_attn=i >= depth - attention)
        return x


# --------------------------------------------------------------------------------------------
# Supernet
# --------------------------------------------------------------------------------------------


class EfficientFormerV2Supernet(SupernetBase):
    """Weight-sharing supernet of an EfficientFormerV2 space.

    ``net(x, arch)`` runs the sub-network ``arch`` (the largest when ``arch`` is None). Parameter
    names are timm's: the largest sub-network's weights are a timm ``EfficientFormerV2`` state dict
    when the space's largest network is a timm model (e.g. space ``efficientformerv2-l``).
    """

    family = FAMILY

    def __init__(self, space: SearchSpace, *, distillation: bool = True, device=None, dtype=None, **options):
        # options: SupernetBase's (img_size, num_classes, in_chans, drop rates, layer scale), kept on self.
        super().__init__(space, **options)
        dd = {"device": device, "dtype": dtype}
        act_layer, norm_layer = _act_layer(), _norm_layer()

        depths, widths = list(self.largest.depths), list(self.largest.widths)
        self.stem = ElasticStem4.from_static(
            Stem4(self.in_chans, widths[0], act_layer=act_layer, norm_layer=norm_layer, **dd)
        )
        dpr = calculate_drop_path_rates(self.drop_path_rate, depths, stagewise=True)
        stages = []
        prev = widths[0]
        resolutions = stage_input_resolutions(self.img_size)
        for i, st in enumerate(space.stages):
            ratios = tuple(st.max_hidden(slot) / widths[i] for slot in range(depths[i]))
            stage = _stage(
                i,
                prev,
                widths[i],
                depth=depths[i],
                resolution=resolutions[i],
                block_use_attn=st.max_attention > 0,
                num_vit=st.max_attention,
                mlp_ratio=ratios,
                drop_path=dpr[i],
                layer_scale_init_value=self.layer_scale_init_value,
                **dd,
            )
            stages.append(ElasticStage.from_static(stage))
            prev = widths[i]
        self.stages = nn.Sequential(*stages)
        self.norm = ElasticBatchNorm2d.from_static(norm_layer(widths[-1], **dd))
        self.build_heads(widths[-1], distillation, **dd)
        for head in (self.head, self.head_dist):
            if head is not None:  # timm's head init
                trunc_normal_(head.weight, std=0.02)
                nn.init.zeros_(head.bias)
        enable_slice_gradients(self)  # the sub-network's slices get their gradients in place

    def forward_features(self, x: torch.Tensor, arch: ArchConfig) -> torch.Tensor:
        x = self.stem(x, arch.widths[0])
        for s, stage in enumerate(self.stages):
            x = stage(x, arch.widths[s], arch.hidden_widths[s], arch.attention[s])
        return self.norm(x)

    def forward_elastic(self, x: torch.Tensor, arch: ArchConfig | None = None):
        arch = self.largest if arch is None else self.space.validate(arch)
        return self.forward_head(self.forward_features(x, arch))

    def static_layout(self, arch: ArchConfig):
        slots = [block_slots(d, a, st.max_depth) for d, a, st in zip(arch.depths, arch.attention, self.space.stages)]
        return build_static, slot_key_map(slots)


# --------------------------------------------------------------------------------------------
# Static models and extraction
# --------------------------------------------------------------------------------------------


class EfficientFormerV2Static(EfficientFormerV2):
    """timm's EfficientFormerV2 with a per-stage MHSA count (timm's ``num_vit`` is shared by stages
    3 and 4). Same parameter names, so state dicts move between the two."""

    def __init__(
        self,
        *,
        num_vit: tuple[int, ...],
        depths,
        embed_dims,
        mlp_ratios,
        img_size=224,
        drop_path_rate: float = 0.0,
        layer_scale_init_value: float = 1e-5,
        device=None,
        dtype=None,
        **kwargs,
    ):
        super().__init__(
            depths=depths,
            embed_dims=embed_dims,
            mlp_ratios=mlp_ratios,
            img_size=img_size,
            num_vit=max(num_vit),
            drop_path_rate=drop_path_rate,
            layer_scale_init_value=layer_scale_init_value,
            device=device,
            dtype=dtype,
            **kwargs,
        )
        self.num_vit = tuple(num_vit)
        dpr = calculate_drop_path_rates(drop_path_rate, depths, stagewise=True)
        resolutions = stage_input_resolutions(img_size)
        for i in range(NUM_STAGES):
            if num_vit[i] == max(num_vit):
                continue
            self.stages[i] = _stage(
                i,
                embed_dims[max(i - 1, 0)],
                embed_dims[i],
                depth=depths[i],
                resolution=resolutions[i],
                block_use_attn=i >= 2,
                num_vit=num_vit[i],
                mlp_ratio=mlp_ratios[i],
                drop_path=dpr[i],
                layer_scale_init_value=layer_scale_init_value,
                device=device,
                dtype=dtype,
            )


def timm_expressible(arch: ArchConfig) -> bool:
    """timm's EfficientFormerV2 has one MHSA count for stages 3 and 4 and none before."""
    return arch.attention[0] == arch.attention[1] == 0 and arch.attention[2] == arch.attention[3]


def build_static(arch: ArchConfig, img_size=224, num_classes: int = 1000, **kwargs) -> EfficientFormerV2:
    """A freshly initialised static model of ``arch``: timm's ``EfficientFormerV2`` where timm can
    express the architecture, else :class:`EfficientFormerV2Static` (timm's parameter names).

    ``kwargs`` (``in_chans``, ``drop_rate``, ``drop_path_rate``, ``layer_scale_init_value``, ``device``,
    ``dtype``, ...) go on to the model, with timm's defaults, as timm's own entry points pass them."""
    mlp_ratios = tuple(tuple(h / w for h in hidden) for w, hidden in zip(arch.widths, arch.hidden_widths))
    common = dict(
        depths=arch.depths,
        embed_dims=arch.widths,
        mlp_ratios=mlp_ratios,
        img_size=img_size,
        num_classes=num_classes,
        **kwargs,
    )
    if timm_expressible(arch):
        model = EfficientFormerV2(num_vit=arch.attention[2], **common)
    else:
        model = EfficientFormerV2Static(num_vit=arch.attention, **common)
    _fix_odd_upsampling(model, img_size)
    return model


def _fix_odd_upsampling(model: nn.Module, img_size) -> None:
    """timm upsamples stride attention by a factor of 2, which overshoots an odd token grid; upsample
    to the grid itself instead (identical for even grids, no parameters involved)."""
    grid = stage_resolutions(img_size)[2]
    if grid[0] % 2 or grid[1] % 2:
        for module in model.modules():
            if isinstance(module, Attention2d) and module.upsample is not None:
                module.upsample = nn.Upsample(size=grid, mode="bilinear", align_corners=False)


# --------------------------------------------------------------------------------------------
# The family: its cost units (priced blocks)
# --------------------------------------------------------------------------------------------


class EfficientFormerV2Family(Family):
    """EfficientFormerV2 (Li et al. 2023): slimmable depth, width, per-block FFN expansion and MHSA
    count, trained with the sandwich rule (§4.2.2) and slimmed greedily by MES (alg. 1)."""

    name = FAMILY
    # MHSA blocks only in stages 3 and 4 (§4.1).
    rules = SpaceRules(attention_stages=(2, 3))
    attention_label = "MHSA blocks"

    supernet_class = EfficientFormerV2Supernet
    build_static = staticmethod(build_static)

    def downsample_kind(self, stage):
        # Into the last stage by attention downsampling (§3.4), a convolution before.
        return "attn_downsample" if stage >= 3 else "downsample"

    def stage_signatures(self, arch, stage, resolution):
        width, first_mhsa = arch.widths[stage], arch.depths[stage] - arch.attention[stage]
        for b, hidden in enumerate(arch.hidden_widths[stage]):
            if b >= first_mhsa:
                yield BlockSignature("mhsa_ffn", width, width, hidden, resolution, ATTENTION_STRIDE.get(stage, 1))
            else:
                yield BlockSignature("ffn", width, width, hidden, resolution, 1)

    def width_signatures(self, stage, stage_space, width, resolution):
        for r in stage_space.expansion_ratios:
            yield BlockSignature("ffn", width, width, r * width, resolution, 1)
            if stage_space.max_attention > 0:
                yield BlockSignature("mhsa_ffn", width, width, r * width, resolution, ATTENTION_STRIDE.get(stage, 1))

    def build_block(self, sig, device=None, dtype=None):
        """A static module computing exactly block ``sig`` of a timm EfficientFormerV2."""
        dd = {"device": device, "dtype": dtype}
        act, norm = _act_layer(), _norm_layer()
        if sig.kind == "stem":
            return Stem4(sig.c_in, sig.c_out, act_layer=act, norm_layer=norm, **dd)
        if sig.kind in ("downsample", "attn_downsample"):
            return Downsample(
                sig.c_in,
                sig.c_out,
                resolution=sig.resolution,
                use_attn=sig.kind == "attn_downsample",
                act_layer=act,
                norm_layer=norm,
                **dd,
            )
        if sig.kind in ("ffn", "mhsa_ffn"):
            block = EfficientFormerV2Block(
                sig.c_in,
                mlp_ratio=sig.hidden / sig.c_in,
                act_layer=act,
                norm_layer=norm,
                resolution=sig.resolution,
                use_attn=sig.kind == "mhsa_ffn",
                stride=sig.stride if sig.stride > 1 else None,
                **dd,
            )
            if block.token_mixer is not None and block.token_mixer.upsample is not None:
                block.token_mixer.upsample = nn.Upsample(size=sig.resolution, mode="bilinear", align_corners=False)
            return block
        if sig.kind == "head":
            return ClassifierHead(_norm_layer()(sig.c_in, **dd), sig.c_in, sig.c_out, **dd)
        raise ValueError(f"unknown {FAMILY} block kind {sig.kind!r}")
