"""Supernet training.

EfficientFormerV2 and SwiftFormer (EfficientFormerV2 §4.2.2, alg. 1): the sandwich rule. Every
step runs the largest, the smallest and ``sandwich_random`` uniformly sampled sub-networks (drawn
within a parameter band where the recipe sets ``sandwich_params_low``/``_high``, AttentiveNAS) on the
same batch, accumulates their gradients and takes one optimizer step. The largest learns from the
labels (and a teacher, if any); by default the others learn the largest's soft outputs (in-place
distillation). With ``sandwich_gradient_projection`` the largest's gradient is projected where it
conflicts with the others' (NASViT §3.2) before the two are summed.

EfficientFormer (§4.2, eq. 8): every step draws one block choice per position by Gumbel-softmax,
at a temperature annealed exponentially from ``gumbel_tau_start`` to ``gumbel_tau_end``; the
architecture logits α have their own optimizer and are saved, with the importance scores, in
every checkpoint and in ``importance.json``.

The loop, data, schedule, EMA, checkpoints and ``--resume`` are :class:`nas.train.loop.Trainer`'s,
shared with training fixed networks from scratch (``nas train``).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn

from nas.config.recipe import Recipe
from nas.config.spaces import recorded_source
from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.families import build_supernet, get_family
from nas.core.space import SearchSpace
from nas.data import calibration_indices, eval_loader
from nas.metrics import count_params
from nas.metrics.accuracy import subnet_accuracy
from nas.runs.config import SupernetRunConfig
from nas.train.loop import Trainer, TrainingRequest
from nas.train.losses import inplace_distill_loss

log = logging.getLogger(__name__)


#: The most of the other sub-networks' gradient that gradient projection adds (NASViT's released code clips
#: the projection coefficient at 2, so a weight the others barely use is not swamped).
MAX_PROJECTION_COEFFICIENT = 2.0


@torch.no_grad()
def set_aside_gradients(parameters) -> dict[nn.Parameter, torch.Tensor]:
    """The gradients so far (the largest sub-network's), copied out; the parameters' own are zeroed in
    place, not dropped, so DDP's buckets and the in-place slice gradients (elastic_ops) keep adding
    into them."""
    kept = {}
    for param in parameters:
        if param.grad is not None:
            kept[param] = param.grad.detach().clone()
            param.grad.zero_()
    return kept


@torch.no_grad()
def project_conflicting_gradients(largest: dict[nn.Parameter, torch.Tensor]) -> tuple[int, int]:
    """Sum the largest sub-network's gradients (``largest``) into the others' (each parameter's ``.grad``),
    projecting a conflicting one first (NASViT §3.2).

    Per weight tensor, with ``g_l`` the largest's gradient and ``g_s`` the sum of the others': where
    ``<g_l, g_s> < 0``, ``g_l`` loses its component along ``g_s`` (``g_l - <g_l, g_s> / |g_s|^2 g_s``, the
    coefficient clipped at :data:`MAX_PROJECTION_COEFFICIENT`), so the step never undoes what the
    smaller sub-networks ask for; elsewhere the two are summed as the plain sandwich rule does. Both
    gradients share the loss scale, so the coefficient is the same scaled or not. Returns how many
    tensors conflicted, and of how many.
    """
    tiny = torch.finfo(torch.float32).tiny
    conflicts = []
    for param, largest_grad in largest.items():
        others = param.grad
        inner = torch.dot(others.reshape(-1), largest_grad.reshape(-1))
        # -<g_l, g_s> / |g_s|^2, or 0 where they agree (and where the others left the weight unused)
        coefficient = (-inner / torch.dot(others.reshape(-1), others.reshape(-1)).clamp_min(tiny)).clamp(
            0.0, MAX_PROJECTION_COEFFICIENT
        )
        others.add_(others * coefficient.to(others.dtype) + largest_grad)
        conflicts.append(inner < 0)
    return int(torch.stack(conflicts).sum().item()) if conflicts else 0, len(conflicts)


def gumbel_temperature(recipe: Recipe, progress: float) -> float:
    """Exponential annealing from ``gumbel_tau_start`` (progress 0) to ``gumbel_tau_end`` (1)."""
    return recipe.gumbel_tau_start * (recipe.gumbel_tau_end / recipe.gumbel_tau_start) ** min(max(progress, 0.0), 1.0)


class SandwichRule:
    """The sandwich rule (EfficientFormerV2 §4.2.2, alg. 1): largest, smallest and
    ``sandwich_random`` sampled sub-networks per step, with in-place distillation."""

    def __init__(self, trainer: "SupernetTrainer"):
        self.trainer = trainer
        self.soft_loss = inplace_distill_loss(trainer.recipe)
        self.rng = random.Random(trainer.seed + 17)
        # weight tensors whose gradients conflicted, of those compared, since the last metrics line
        self.conflicts = [0, 0]

    @staticmethod
    def weight_parameters(net: nn.Module) -> list[tuple[str, nn.Parameter]]:
        """The parameters of ``net`` that AdamW trains."""
        return list(net.named_parameters())

    def train_step(self, images, targets, teacher_labels) -> float:
        """One optimizer step over the sandwich of sub-networks; returns their mean loss."""
        t = self.trainer
        archs: list[ArchConfig] = [t.space.largest(), t.space.smallest()]
        archs += [self.sample() for _ in range(t.recipe.sandwich_random)]
        t.net.zero_grad(set_to_none=True)  # keeps the gradients only slices wrote (elastic_ops)
        soft_targets, total, largest_grads = None, 0.0, None
        for i, arch in enumerate(archs):
            if i == 1 and t.recipe.sandwich_gradient_projection:
                largest_grads = set_aside_gradients(t.net.parameters())
            with t.autocast():
                output = t.model(images, arch)
                if i == 0 or not t.recipe.inplace_distill:
                    loss, logits = t.supervised_loss(output, targets, teacher_labels)
                    if i == 0 and t.recipe.inplace_distill:
                        soft_targets = logits.detach().float().softmax(dim=-1)
                else:
                    logits = output if t.teacher is None else (output[0] + output[1]) / 2
                    loss = self.soft_loss(logits.float(), soft_targets)
            t.backward(loss)
            total += loss.item()
        if largest_grads is not None:
            conflicted, tensors = project_conflicting_gradients(largest_grads)
            self.conflicts[0] += conflicted
            self.conflicts[1] += tensors
        t.optimizer_step(t.net.parameters())
        return total / len(archs)

    #: Draws per sub-network before a budget band counts as out of reach.
    BAND_TRIES = 1000

    def sample(self) -> ArchConfig:
        """A uniformly sampled sub-network, within the recipe's parameter band if it sets one
        (rejection sampling: uniform over the choices, conditioned on the band; AttentiveNAS §3)."""
        t = self.trainer
        low, high = t.recipe.sandwich_params_low, t.recipe.sandwich_params_high
        if not low and not high:
            return t.space.sample(self.rng)
        for _ in range(self.BAND_TRIES):
            arch = t.space.sample(self.rng)
            params = count_params(arch, t.recipe.img_size, t.splits.num_classes)
            if params >= low and (not high or params <= high):
                return arch
        raise NasError(
            f"no sub-network of {t.space.name} drawn in {self.BAND_TRIES} tries has between "
            f"{low:g} and {high or float('inf'):g} parameters; widen sandwich_params_low / sandwich_params_high"
        )

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps beside the weights and optimizer."""
        return {"sandwich_rng": self.rng.getstate()}

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state`."""
        self.rng.setstate(state["sandwich_rng"])

    def record(self) -> dict[str, Any]:
        """Extra fields of each metrics line: with gradient projection, the fraction of weight tensors
        whose largest-vs-others gradients conflicted over the steps since the last line."""
        if not self.trainer.recipe.sandwich_gradient_projection:
            return {}
        conflicted, tensors = self.conflicts
        self.conflicts = [0, 0]
        return {"gradient_conflicts": conflicted / tensors if tensors else 0.0}

    def saved(self, state: dict[str, Any]) -> None:
        """Called after every checkpoint."""

    def result(self) -> dict[str, Any]:
        """Extra fields of ``result.json``."""
        return {}


class GumbelRule(SandwichRule):
    """Gumbel-softmax block choice (EfficientFormer §4.2, eq. 8): one draw per position per step at
    an annealed temperature; the architecture logits α have their own optimizer, and the importance
    scores they give are saved with every checkpoint and in ``importance.json``."""

    def __init__(self, trainer: "SupernetTrainer"):
        super().__init__(trainer)
        recipe = trainer.recipe
        self.alpha_optimizer = torch.optim.Adam(
            trainer.net.arch_parameters(),
            lr=recipe.alpha_lr,
            betas=(0.5, 0.999),
            weight_decay=recipe.alpha_weight_decay,
        )

    @staticmethod
    def weight_parameters(net: nn.Module) -> list[tuple[str, nn.Parameter]]:
        return [(n, p) for n, p in net.named_parameters() if not n.startswith("arch_logits")]  # α: alpha_optimizer

    def train_step(self, images, targets, teacher_labels) -> float:
        t = self.trainer
        t.net.set_temperature(gumbel_temperature(t.recipe, t.step / max(t.total_steps, 1)))
        t.net.zero_grad(set_to_none=True)  # the weights' and the architecture logits'
        with t.autocast():
            loss, _ = t.supervised_loss(t.model(images), targets, teacher_labels)
        t.backward(loss)
        t.optimizer_step(t.net.weight_parameters(), t.optimizer, self.alpha_optimizer)
        return loss.item()

    def state(self) -> dict[str, Any]:
        net = self.trainer.net
        return {
            **super().state(),
            "alpha_optimizer": self.alpha_optimizer.state_dict(),
            "temperature": net.temperature,
            "importance": net.importance().to_dict(),
        }

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
        self.trainer.net.set_temperature(state["temperature"])

    def record(self) -> dict[str, Any]:
        return {"temperature": self.trainer.net.temperature}

    def saved(self, state: dict[str, Any]) -> None:
        t = self.trainer
        t.folder.write_json(
            "importance.json", {"step": t.step, "temperature": t.net.temperature, **state["importance"]}
        )

    def result(self) -> dict[str, Any]:
        return {"importance": self.trainer.net.importance().to_dict()}


#: A family's ``training`` names one of these (nas.core.family.Family.training).
RULES = {"sandwich": SandwichRule, "gumbel": GumbelRule}


class SupernetTrainer(Trainer):
    """Trains a family's supernet with the family's training rule (:data:`RULES`)."""

    command = "train-supernet"
    config_class = SupernetRunConfig
    find_unused_parameters = True

    def __init__(self, request: SupernetTrainingRequest):
        self.space = space = request.space
        self.family = get_family(space.family)
        if self.family.training not in RULES:
            raise NasError(
                f"family {space.family} trains with {self.family.training!r}; known training rules: {', '.join(RULES)}"
            )
        config = {"family": space.family, "space": space.name, "space_file": recorded_source(space)}
        super().__init__(request, config)

    @property
    def description(self) -> str:
        return f"train-supernet {self.space.name}"

    def build_net(self, num_classes: int) -> nn.Module:
        return build_supernet(
            self.space, img_size=self.recipe.img_size, num_classes=num_classes, drop_path_rate=self.recipe.drop_path
        )

    def weight_parameters(self):
        return RULES[self.family.training].weight_parameters(self.net)  # called before setup()

    def setup(self) -> None:
        if self.env.world > 1 and hasattr(self.net, "set_slice_gradients"):
            self.net.set_slice_gradients(False)  # DDP reduces what autograd accumulates; in-place ones bypass it
        self.rule = RULES[self.family.training](self)

    def extra_state(self) -> dict[str, Any]:
        return {"space": self.space.name, "family": self.space.family, **self.rule.state()}

    def after_save(self, state: dict[str, Any]) -> None:
        self.rule.saved(state)

    def restore_extra(self, state: dict[str, Any]) -> None:
        self.rule.restore(state)

    def step_record(self) -> dict[str, Any]:
        return self.rule.record()

    def train_step(self, images, targets, teacher_labels) -> float:
        return self.rule.train_step(images, targets, teacher_labels)

    def evaluate(self) -> dict[str, Any]:
        """Accuracy of the largest and smallest sub-networks on the search split (BN recalibrated)."""
        result: dict[str, Any] = {
            "space": self.space.name,
            "family": self.space.family,
            "search_split": len(self.splits.search),
            "train_split": len(self.splits.train),
        }
        calib = eval_loader(
            self.splits.train,
            self.recipe,
            calibration_indices(self.splits.train, self.recipe, self.seed),
            device_type=self.device.type,
        )
        search = eval_loader(self.splits.search, self.recipe, device_type=self.device.type)
        for suffix, net in self.eval_nets():
            for name, arch in (("largest", self.space.largest()), ("smallest", self.space.smallest())):
                result[f"{name}_top1{suffix}"] = subnet_accuracy(net, arch, calib, search, self.device, self.recipe.amp)
        return {**result, **self.rule.result()}


@dataclass(frozen=True)
class SupernetTrainingRequest(TrainingRequest):
    """What ``nas train-supernet`` is asked to do: ``space``, and :class:`TrainingRequest`'s fields by
    keyword (``init``: released weights of the largest network, or a trained supernet, to start from)."""

    space: SearchSpace


def train_supernet(request: SupernetTrainingRequest) -> dict[str, Any]:
    """Train the supernet of ``request.space`` (``init``: released weights of its largest network to start from)."""
    return SupernetTrainer(request).train()
