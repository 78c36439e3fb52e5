"""EfficientFormer supernet (arXiv 2206.01191) with Gumbel-softmax block choice, weight-compatible
with timm's blocks.

Every block position holds an MB4D candidate (3x3 average pool minus identity, conv MLP with
BatchNorm, layer scales; as in the released code) and, in stages 3 and 4, an MB3D candidate
(pre-norm attention with 8 heads, key size 32 and a learned bias for the construction resolution;
pre-norm linear MLP). The identity is the third choice (§4.2, eq. 7). Architecture logits ``α``
score every choice; in training mode without an explicit architecture one choice per position is
drawn by Gumbel-softmax (eq. 8) with straight-through gradients to ``α``, and
:meth:`EfficientFormerSupernet.importance` turns ``α`` into the block importance that latency-driven
slimming uses. ``net(x, arch)`` runs a given architecture deterministically.

Features are 4D maps in MB4D blocks and token sequences in MB3D blocks; the static models flatten
once, before a stage's first MB3D (§4.1), and restore the map after a stage whose MB3D blocks are
followed by another stage (an MB3D placement the released models do not use, which timm cannot
express).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from timm.layers import Mlp, calculate_drop_path_rates, trunc_normal_
from timm.models.efficientformer import (
    Attention,
    ConvMlpWithNorm,
    Downsample,
    EfficientFormer,
    Flat,
    MetaBlock1d,
    MetaBlock2d,
    Stem4,
)

from nas.core.arch import BLOCK_TYPES, ArchConfig
from nas.core.errors import NasError
from nas.core.family import ActionsFn, Family
from nas.core.signature import NUM_STAGES, BlockSignature, stage_resolutions
from nas.core.space import SearchSpace, SpaceRules
from nas.core.stage import Action, slots_of_types
from supernets.base import ClassifierHead, SupernetBase
from supernets.elastic_ops import (
    Elastic,
    ElasticBatchNorm2d,
    ElasticConv2d,
    ElasticLayerNorm,
    ElasticLayerScale,
    ElasticLayerScale2d,
    ElasticLinear,
    enable_slice_gradients,
)

FAMILY = "efficientformer"


class TokensToMap(nn.Module):
    """(B, N, C) tokens back to a (B, C, H, W) map, for the strided conv that follows."""

    def __init__(self, width: int, grid: tuple[int, int]):
        super().__init__()
        self.width = width
        self.grid = tuple(grid)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Constant target shape: traced exports (Core ML, ONNX) then need no shape arithmetic.
        return x.transpose(1, 2).reshape(-1, self.width, *self.grid)


# --------------------------------------------------------------------------------------------
# Elastic ops
# --------------------------------------------------------------------------------------------


class ElasticStem4(Elastic, Stem4):
    """Two stride-2 3x3 conv-BN-ReLU layers (ReLU as in the released code)."""

    elastic_children = {
        "conv1": ElasticConv2d,
        "norm1": ElasticBatchNorm2d,
        "conv2": ElasticConv2d,
        "norm2": ElasticBatchNorm2d,
    }

    def forward(self, x: torch.Tensor, width: int) -> torch.Tensor:
        x = self.act1(self.norm1(self.conv1(x, width // 2)))
        return self.act2(self.norm2(self.conv2(x, width)))


class ElasticDownsample(Elastic, Downsample):
    """Elastic version of timm's EfficientFormer ``Downsample``: strided conv and BN; ``out_channels``
    selects the first filters."""

    elastic_children = {"conv": ElasticConv2d, "norm": ElasticBatchNorm2d}

    def forward(self, x: torch.Tensor, out_channels: int) -> torch.Tensor:
        return self.norm(self.conv(x, out_channels))


class ElasticConvMlp(Elastic, ConvMlpWithNorm):
    """Elastic version of timm's ``ConvMlpWithNorm``: 1x1 conv-BN to ``hidden``, activation, 1x1 conv-BN
    back to the input width."""

    elastic_children = {
        "fc1": ElasticConv2d,
        "norm1": ElasticBatchNorm2d,
        "fc2": ElasticConv2d,
        "norm2": ElasticBatchNorm2d,
    }

    def forward(self, x: torch.Tensor, hidden: int) -> torch.Tensor:
        width = x.shape[1]
        x = self.drop(self.act(self.norm1(self.fc1(x, hidden))))
        return self.drop(self.norm2(self.fc2(x, width)))


class ElasticMetaBlock2d(Elastic, MetaBlock2d):
    """MB4D: x + ls1 * (avgpool(x) - x), then x + ls2 * MLP(x) (eq. 4, as in the code)."""

    elastic_children = {"ls1": ElasticLayerScale2d, "mlp": ElasticConvMlp, "ls2": ElasticLayerScale2d}

    def forward(self, x: torch.Tensor, hidden: int) -> torch.Tensor:
        x = x + self.drop_path1(self.ls1(self.token_mixer(x)))
        return x + self.drop_path2(self.ls2(self.mlp(x, hidden)))


class ElasticAttention(Elastic, Attention):
    """MHSA with 8 heads, key size 32 (scale 32^-0.5, as in the code) and a learned bias per head
    and offset, built for the construction token grid and gathered on every call (no cache)."""

    elastic_children = {"qkv": ElasticLinear, "proj": ElasticLinear}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, C = x.shape
        if N != self.attention_bias_idxs.shape[0]:
            raise ValueError(
                f"MB3D attention was built for {self.attention_bias_idxs.shape[0]} tokens but got {N}: "
                "build the supernet with the input size you run it at"
            )
        qkv = self.qkv(x).reshape(B, N, self.num_heads, -1).permute(0, 2, 1, 3)
        q, k, v = qkv.split([self.key_dim, self.key_dim, self.val_dim], dim=3)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn + self.attention_biases[:, self.attention_bias_idxs]
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, self.val_attn_dim)
        return self.proj(x, C)


class ElasticMlp(Elastic, Mlp):
    """Elastic version of timm's ``Mlp`` on tokens: linear to ``hidden``, activation, linear back to the
    input width."""

    elastic_children = {"fc1": ElasticLinear, "fc2": ElasticLinear}

    def forward(self, x: torch.Tensor, hidden: int) -> torch.Tensor:
        width = x.shape[-1]
        x = self.norm(self.drop1(self.act(self.fc1(x, hidden))))
        return self.drop2(self.fc2(x, width))


class ElasticMetaBlock1d(Elastic, MetaBlock1d):
    """MB3D: pre-norm attention and pre-norm MLP over tokens, each with a layer scale (eq. 5)."""

    elastic_children = {
        "norm1": ElasticLayerNorm,
        "token_mixer": ElasticAttention,
        "ls1": ElasticLayerScale,
        "norm2": ElasticLayerNorm,
        "mlp": ElasticMlp,
        "ls2": ElasticLayerScale,
    }

    def forward(self, x: torch.Tensor, hidden: int) -> torch.Tensor:
        x = x + self.drop_path1(self.ls1(self.token_mixer(self.norm1(x))))
        return x + self.drop_path2(self.ls2(self.mlp(self.norm2(x), hidden)))


class ChoiceBlock(nn.Module):
    """One block position of the supernet: an MB4D candidate and, where allowed, an MB3D one."""

    def __init__(self, mb4d: nn.Module, mb3d: nn.Module | None):
        super().__init__()
        self.mb4d = mb4d
        self.mb3d = mb3d


class SupernetStage(nn.Module):
    """Downsampling (stages 2-4) and the block positions of one stage."""

    def __init__(self, downsample: nn.Module, blocks: list[ChoiceBlock]):
        super().__init__()
        self.downsample = downsample
        self.blocks = nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor, width: int, choices, to_tokens: bool) -> torch.Tensor:
        """``choices``: per position (kind, hidden, weight); ``weight`` is a Gumbel straight-through
        scalar or None. Returns tokens if ``to_tokens``, else a 4D map."""
        if not isinstance(self.downsample, nn.Identity):
            x = self.downsample(x, width)
        B, _, H, W = x.shape
        tokens = False
        for block, (kind, hidden, weight) in zip(self.blocks, choices):
            if kind == "skip":
                x = x if weight is None else x * weight
                continue
            if kind == "mb3d" and not tokens:
                x, tokens = x.flatten(2).transpose(1, 2), True
            elif kind == "mb4d" and tokens:
                x, tokens = x.transpose(1, 2).reshape(B, -1, H, W), False
            y = getattr(block, kind)(x, hidden)
            x = y if weight is None else y * weight
        if to_tokens and not tokens:
            x = x.flatten(2).transpose(1, 2)
        elif not to_tokens and tokens:
            x = x.transpose(1, 2).reshape(B, -1, H, W)
        return x


# --------------------------------------------------------------------------------------------
# Supernet
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Importance:
    """Architecture importance from α (EfficientFormer §4.2).

    ``choice_probs[s][j]``: probability of each of ``BLOCK_TYPES`` at position ``j`` of stage ``s``
    (softmax of α over the allowed choices). ``blocks[s][j] = 1 - p(skip)``: how much the supernet
    wants to keep the block. ``stages[s]``: mean block importance of stage ``s``.
    """

    choice_probs: tuple[tuple[dict[str, float], ...], ...]
    blocks: tuple[tuple[float, ...], ...]
    stages: tuple[float, ...]

    def to_dict(self) -> dict:
        return {
            "choices": list(BLOCK_TYPES),
            "choice_probs": [list(map(dict, s)) for s in self.choice_probs],
            "blocks": [list(b) for b in self.blocks],
            "stages": list(self.stages),
        }


class EfficientFormerSupernet(SupernetBase):
    """Weight-sharing EfficientFormer supernet with architecture logits for Gumbel-softmax search."""

    pool_dims = 1  # the last stage ends in tokens
    family = FAMILY

    def __init__(
        self,
        space: SearchSpace,
        *,
        distillation: bool = True,
        temperature: float = 5.0,
        device=None,
        dtype=None,
        **options,
    ):
        # options: SupernetBase's (img_size, num_classes, in_chans, drop rates, layer scale), kept on self.
        super().__init__(space, **options)
        dd = {"device": device, "dtype": dtype}
        self.temperature = temperature
        depths, widths = list(self.largest.depths), list(self.largest.widths)
        grids = stage_resolutions(self.img_size)
        dpr = calculate_drop_path_rates(self.drop_path_rate, depths, stagewise=True)
        attention_stages = EfficientFormerFamily.rules.attention_stages

        self.stem = ElasticStem4.from_static(Stem4(self.in_chans, widths[0], **dd))
        stages = []
        for s, st in enumerate(space.stages):
            downsample = (
                ElasticDownsample.from_static(Downsample(widths[s - 1], widths[s], **dd)) if s else nn.Identity()
            )
            blocks = []
            for slot in range(depths[s]):
                ratio = st.max_hidden(slot) / widths[s]
                common = dict(
                    mlp_ratio=ratio, drop_path=dpr[s][slot], layer_scale_init_value=self.layer_scale_init_value
                )
                mb4d = ElasticMetaBlock2d.from_static(MetaBlock2d(widths[s], **common, **dd))
                mb3d = None
                if s in attention_stages and st.max_attention > 0:
                    static = MetaBlock1d(widths[s], **common, **dd)
                    static.token_mixer = Attention(widths[s], resolution=grids[s], **dd)
                    mb3d = ElasticMetaBlock1d.from_static(static)
                blocks.append(ChoiceBlock(mb4d, mb3d))
            stages.append(SupernetStage(downsample, blocks))
        self.stages = nn.Sequential(*stages)
        self.norm = ElasticLayerNorm.from_static(nn.LayerNorm(widths[-1], **dd))
        self.build_heads(widths[-1], distillation, **dd)
        for m in self.modules():  # timm's init: truncated normal for linear layers
            if isinstance(m, nn.Linear):
                trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

        # α: one logit per (position, choice); choices a stage cannot take are masked out.
        self.arch_logits = nn.ParameterList(
            nn.Parameter(torch.zeros(depths[s], len(BLOCK_TYPES), **dd)) for s in range(NUM_STAGES)
        )
        for s, st in enumerate(space.stages):
            allowed = torch.ones(depths[s], len(BLOCK_TYPES), dtype=torch.bool, device=device)
            if not (s in attention_stages and st.max_attention > 0):
                allowed[:, BLOCK_TYPES.index("mb3d")] = False
            if min(st.depths) == st.max_depth:
                allowed[:, BLOCK_TYPES.index("skip")] = False
            self.register_buffer(f"choice_mask_{s}", allowed, persistent=False)
        enable_slice_gradients(self)  # the sub-network's slices get their gradients in place

    # --- architecture parameters ----------------------------------------------------------------

    def arch_parameters(self) -> list[nn.Parameter]:
        """α, for their own optimizer (the weights get another)."""
        return list(self.arch_logits)

    def weight_parameters(self) -> list[nn.Parameter]:
        ids = {id(p) for p in self.arch_logits}
        return [p for p in self.parameters() if id(p) not in ids]

    def set_temperature(self, temperature: float) -> None:
        if temperature <= 0:
            raise ValueError("the Gumbel-softmax temperature must be positive")
        self.temperature = float(temperature)

    def _masked_logits(self, s: int) -> torch.Tensor:
        return self.arch_logits[s].masked_fill(~getattr(self, f"choice_mask_{s}"), float("-inf"))

    def sample_choices(self) -> list[list[tuple[str, torch.Tensor]]]:
        """One choice per position by Gumbel-softmax (eq. 8): Gumbel noise is added to α / τ, so as
        τ falls the draws concentrate on argmax α (τ → ∞: uniform over the allowed choices). The
        returned weight is the straight-through one-hot entry (1 in the forward, ∂/∂α backward)."""
        choices = []
        for s in range(NUM_STAGES):
            onehot = F.gumbel_softmax(self._masked_logits(s) / self.temperature, tau=1.0, hard=True, dim=-1)
            picks = onehot.argmax(dim=-1).tolist()
            choices.append([(BLOCK_TYPES[k], onehot[j, k]) for j, k in enumerate(picks)])
        return choices

    @torch.no_grad()
    def importance(self) -> Importance:
        probs, blocks = [], []
        for s in range(NUM_STAGES):
            p = F.softmax(self._masked_logits(s).float(), dim=-1).cpu()
            probs.append(tuple({k: float(row[i]) for i, k in enumerate(BLOCK_TYPES)} for row in p))
            blocks.append(tuple(float(1.0 - row[BLOCK_TYPES.index("skip")]) for row in p))
        return Importance(tuple(probs), tuple(blocks), tuple(sum(b) / len(b) for b in blocks))

    # --- forward -------------------------------------------------------------------------------

    def forward_features(self, x: torch.Tensor, widths, stage_choices) -> torch.Tensor:
        x = self.stem(x, widths[0])
        for s, stage in enumerate(self.stages):
            x = stage(x, widths[s], stage_choices[s], to_tokens=s == NUM_STAGES - 1)
        return self.norm(x)

    def forward_elastic(self, x: torch.Tensor, arch: ArchConfig | None = None):
        """``arch`` given: that sub-network. Otherwise, in training mode, one Gumbel-softmax draw
        per position at full width; in eval mode, the largest sub-network."""
        if arch is None and self.training:
            widths = [st.max_width for st in self.space.stages]
            stage_choices = [
                [(kind, st.max_hidden(j), w) for j, (kind, w) in enumerate(row)]
                for st, row in zip(self.space.stages, self.sample_choices())
            ]
        else:
            arch = self.largest if arch is None else self.space.validate(arch)
            widths = arch.widths
            stage_choices = []
            for s, types in enumerate(arch.block_types):
                hidden = iter(arch.hidden_widths[s])
                stage_choices.append([(kind, 0 if kind == "skip" else next(hidden), None) for kind in types])
        return self.forward_head(self.forward_features(x, widths, stage_choices))

    def static_layout(self, arch: ArchConfig):
        mapping = _static_block_map(arch)

        def key_map(key: str) -> str:
            parts = key.split(".")
            if parts[0] == "stages" and parts[2] == "blocks":
                return mapping[(int(parts[1]), int(parts[3]))] + "." + ".".join(parts[4:])
            return key

        return build_static, key_map


# --------------------------------------------------------------------------------------------
# Static models and extraction
# --------------------------------------------------------------------------------------------


def _static_stage_blocks(
    arch: ArchConfig, s: int, grid, drop_path_rates, layer_scale_init_value, dd
) -> list[nn.Module]:
    """Blocks of stage ``s`` in timm's layout: MB4D blocks, ``Flat`` before the first MB3D, MB3D blocks;
    then ``TokensToMap`` if a stage follows, or ``Flat`` if the last stage has no MB3D."""
    width, depth, att = arch.widths[s], arch.depths[s], arch.attention[s]
    blocks: list[nn.Module] = []
    for b, hidden in enumerate(arch.hidden_widths[s]):
        common = dict(
            mlp_ratio=hidden / width, drop_path=drop_path_rates[b], layer_scale_init_value=layer_scale_init_value
        )
        if b >= depth - att:
            if b == depth - att:
                blocks.append(Flat())
            block = MetaBlock1d(width, **common, **dd)
            block.token_mixer = Attention(width, resolution=grid, **dd)
        else:
            block = MetaBlock2d(width, **common, **dd)
        blocks.append(block)
    if att and s < NUM_STAGES - 1:
        blocks.append(TokensToMap(width, grid))
    elif not att and s == NUM_STAGES - 1:
        blocks.append(Flat())
    return blocks


class EfficientFormerStatic(EfficientFormer):
    """timm's EfficientFormer with MB3D blocks in any stage's tail, a hidden width per block, and
    attention biases for any input size (timm's are fixed to a 7x7 grid). timm's parameter names."""

    def __init__(
        self,
        *,
        arch: ArchConfig,
        img_size=224,
        drop_path_rate: float = 0.0,
        layer_scale_init_value: float = 1e-5,
        device=None,
        dtype=None,
        **kwargs,
    ):
        super().__init__(
            depths=arch.depths,
            embed_dims=arch.widths,
            num_vit=0,
            drop_path_rate=drop_path_rate,
            layer_scale_init_value=layer_scale_init_value,
            device=device,
            dtype=dtype,
            **kwargs,
        )
        dd = {"device": device, "dtype": dtype}
        grids = stage_resolutions(img_size)
        dpr = calculate_drop_path_rates(drop_path_rate, arch.depths, stagewise=True)
        for s in range(NUM_STAGES):
            self.stages[s].blocks = nn.Sequential(
                *_static_stage_blocks(arch, s, grids[s], dpr[s], layer_scale_init_value, dd)
            )
        self.apply(self._init_weights)


def timm_expressible(arch: ArchConfig, img_size) -> bool:
    """timm's EfficientFormer: MB3D only at the end of the last stage (at least one), one MLP ratio,
    and a 7x7 token grid in the last stage."""
    ratios = {h / w for w, hidden in zip(arch.widths, arch.hidden_widths) for h in hidden}
    return (
        arch.attention[:3] == (0, 0, 0)
        and arch.attention[3] >= 1
        and len(ratios) == 1
        and stage_resolutions(img_size)[3] == (7, 7)
    )


def build_static(arch: ArchConfig, img_size=224, num_classes: int = 1000, **kwargs) -> EfficientFormer:
    """A freshly initialised static model of ``arch``: timm's ``EfficientFormer`` where timm can express
    the architecture (:func:`timm_expressible`), else :class:`EfficientFormerStatic`.

    ``kwargs`` (``in_chans``, ``drop_rate``, ``drop_path_rate``, ``layer_scale_init_value``, ``device``,
    ``dtype``, ...) go on to the model, with timm's defaults, as timm's own entry points pass them."""
    if not kwargs.pop("distillation", True):
        raise ValueError("EfficientFormer models always carry the distillation head (as timm's)")
    common = dict(
        num_classes=num_classes,
        **kwargs,
    )
    if timm_expressible(arch, img_size):
        ratio = arch.hidden_widths[0][0] / arch.widths[0]
        return EfficientFormer(
            depths=arch.depths, embed_dims=arch.widths, num_vit=arch.attention[3], mlp_ratios=ratio, **common
        )
    return EfficientFormerStatic(arch=arch, img_size=img_size, **common)


def _static_block_map(arch: ArchConfig) -> dict[tuple[int, int], str]:
    """(stage, index in the static ``blocks``) -> supernet prefix ``stages.s.blocks.pos.kind``."""
    mapping = {}
    for s, types in enumerate(arch.block_types):
        index = 0
        first_mb3d = True
        for pos in slots_of_types(types):
            if types[pos] == "mb3d" and first_mb3d:
                index += 1  # the Flat module
                first_mb3d = False
            mapping[(s, index)] = f"stages.{s}.blocks.{pos}.{types[pos]}"
            index += 1
    return mapping


# --------------------------------------------------------------------------------------------
# The family: its cost units (priced blocks) and search moves
# --------------------------------------------------------------------------------------------


def importance_actions(space: SearchSpace, block_importance, stage_importance) -> ActionsFn:
    """EfficientFormer's latency-driven slimming (§4.2, alg. 1) considers three actions at a time:
    skip the least important block, remove the first MB3D (it becomes MB4D), and shrink the least
    important stage by one width step (16). Importance comes from the supernet's α."""

    def actions(arch: ArchConfig) -> list[tuple[Action, ArchConfig]]:
        frontier = list(space.shrink_actions(arch))
        chosen = []
        removals = [
            (block_importance[a.stage][space.slots(arch, a.stage)[a.block]], i)
            for i, (a, _) in enumerate(frontier)
            if a.kind == "remove_block"
        ]
        if removals:
            chosen.append(frontier[min(removals)[1]])
        mb3d = [(a.stage, i) for i, (a, _) in enumerate(frontier) if a.kind == "remove_attention"]
        if mb3d:
            chosen.append(frontier[min(mb3d)[1]])
        narrows = [(stage_importance[a.stage], i) for i, (a, _) in enumerate(frontier) if a.kind == "narrow_stage"]
        if narrows:
            chosen.append(frontier[min(narrows)[1]])
        return chosen

    return actions


class EfficientFormerFamily(Family):
    """EfficientFormer (Li et al. 2022): per-position choice of MB4D, MB3D or identity, trained by
    Gumbel-softmax (§4.2) and slimmed by the importance of its choices (alg. 1)."""

    name = FAMILY
    # MB3D only in stages 3 and 4 (§4.2, eq. 7).
    rules = SpaceRules(attention_stages=(2, 3), block_choice=True)
    training = "gumbel"
    attention_label = "MB3D blocks"

    supernet_class = EfficientFormerSupernet
    build_static = staticmethod(build_static)

    def stage_signatures(self, arch, stage, resolution):
        # MB3D blocks run on tokens: a stage turns its maps into tokens before its first MB3D and back
        # after its last (the last stage stays tokens, for the head), and each change is a block.
        width, depth, att = arch.widths[stage], arch.depths[stage], arch.attention[stage]
        for b, hidden in enumerate(arch.hidden_widths[stage]):
            if b == depth - att:
                yield BlockSignature("to_tokens", width, width, 0, resolution)
            yield BlockSignature("mb3d" if b >= depth - att else "mb4d", width, width, hidden, resolution)
        if att and stage < NUM_STAGES - 1:
            yield BlockSignature("to_maps", width, width, 0, resolution)
        elif not att and stage == NUM_STAGES - 1:
            yield BlockSignature("to_tokens", width, width, 0, resolution)

    def width_signatures(self, stage, stage_space, width, resolution):
        for r in stage_space.expansion_ratios:
            yield BlockSignature("mb4d", width, width, r * width, resolution)
            if stage_space.max_attention > 0:
                yield BlockSignature("mb3d", width, width, r * width, resolution)
        if stage_space.max_attention > 0 or stage == NUM_STAGES - 1:
            yield BlockSignature("to_tokens", width, width, 0, resolution)
        if stage_space.max_attention > 0 and stage < NUM_STAGES - 1:
            yield BlockSignature("to_maps", width, width, 0, resolution)

    def input_shape(self, sig):
        """Tokens for MB3D, the head and ``to_maps``; a feature map for the others."""
        if sig.kind in ("mb3d", "head", "to_maps"):
            return (1, sig.resolution[0] * sig.resolution[1], sig.c_in)
        return (1, sig.c_in, *sig.resolution)

    def build_block(self, sig, device=None, dtype=None):
        """A static module computing exactly block ``sig`` of a timm EfficientFormer."""
        dd = {"device": device, "dtype": dtype}
        if sig.kind == "stem":
            return Stem4(sig.c_in, sig.c_out, **dd)
        if sig.kind == "downsample":
            return Downsample(sig.c_in, sig.c_out, **dd)
        if sig.kind == "mb4d":
            return MetaBlock2d(sig.c_in, mlp_ratio=sig.hidden / sig.c_in, **dd)
        if sig.kind == "mb3d":
            block = MetaBlock1d(sig.c_in, mlp_ratio=sig.hidden / sig.c_in, **dd)
            block.token_mixer = Attention(sig.c_in, resolution=sig.resolution, **dd)
            return block
        if sig.kind == "to_tokens":
            return Flat()
        if sig.kind == "to_maps":
            return TokensToMap(sig.c_in, sig.resolution)
        if sig.kind == "head":
            return ClassifierHead(nn.LayerNorm(sig.c_in, **dd), sig.c_in, sig.c_out, pool_dims=1, **dd)
        raise ValueError(f"unknown {FAMILY} block kind {sig.kind!r}")

    def greedy_actions(self, space, checkpoint, objective):
        if objective != "latency":
            return None
        importance = checkpoint.get("importance")
        if not isinstance(importance, dict) or not {"blocks", "stages"} <= set(importance):
            raise NasError(
                "an EfficientFormer supernet checkpoint without importance scores; "
                "train it with `nas train-supernet efficientformer`"
            )
        return (
            importance_actions(space, importance["blocks"], importance["stages"]),
            "EfficientFormer alg. 1: least important block, first MB3D, least important stage",
        )
