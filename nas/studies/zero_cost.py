"""Zero-cost proxies: rankings of sub-networks at initialisation, no training, that ``nas rank-check``
sets the supernet's ranking against: SynFlow (Tanaka et al. 2020, sum of |θ · ∂R/∂θ| of the network
with positive weights) and the gradient norm of one batch (Abdelfattah et al. 2021)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from nas.config.recipe import Recipe
from nas.core.arch import ArchConfig
from nas.core.families import build_static
from nas.data import eval_loader, load_splits
from nas.runs.writers import write_json


def synflow(model: torch.nn.Module, img_size: int) -> float:
    """SynFlow at initialisation: sum of |θ · ∂R/∂θ| with R the output sum of the network with all
    parameters made positive, on an all-ones input (double precision; BatchNorm in eval mode)."""
    model = model.double().eval()
    signs = {}
    with torch.no_grad():
        for name, p in model.state_dict().items():
            if p.is_floating_point():
                signs[name] = torch.sign(p)
                p.abs_()
    model.zero_grad()
    out = model(torch.ones(1, 3, img_size, img_size, dtype=torch.float64))
    out = out[0] + out[1] if isinstance(out, tuple) else out
    out.sum().backward()
    score = sum(float((p.detach() * p.grad).abs().sum()) for p in model.parameters() if p.grad is not None)
    return float(np.log10(score)) if score > 0 else float("-inf")


def grad_norm(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Sum of the per-parameter gradient L2 norms of the cross-entropy of one batch, at initialisation."""
    model = model.float().train()
    model.zero_grad()
    out = model(images)
    out = (out[0] + out[1]) / 2 if isinstance(out, tuple) else out
    torch.nn.functional.cross_entropy(out, labels).backward()
    return float(sum(p.grad.norm() for p in model.parameters() if p.grad is not None))


def zero_cost_proxies(
    archs: list[ArchConfig], recipe: Recipe, data: str | None, seed: int, num_classes: int, out: Path
) -> list[dict[str, float]]:
    """SynFlow and gradient norm of each arch's freshly initialised static network (seeded),
    cached in ``out/proxies.json``."""

    path = out / "proxies.json"
    cached = json.loads(path.read_text()) if path.exists() else {}
    todo = [a for a in archs if a.digest not in cached]
    if todo:
        splits = load_splits(data, recipe, seed)
        batch = next(iter(eval_loader(splits.train, recipe, list(range(min(64, len(splits.train)))))))
        for arch in todo:
            torch.manual_seed(seed)
            net = build_static(arch, img_size=recipe.img_size, num_classes=num_classes)
            grads = grad_norm(net, *batch)
            torch.manual_seed(seed)
            net = build_static(arch, img_size=recipe.img_size, num_classes=num_classes)
            cached[arch.digest] = {"synflow": synflow(net, recipe.img_size), "grad_norm": grads}
        write_json(path, cached)
    return [cached[a.digest] for a in archs]
