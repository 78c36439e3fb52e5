"""Released weights (``--init``): supernets and members start from timm's, exactly."""

from pathlib import Path

import torch
from helpers import argv

from nas import load_space
from nas.cli import main

QUICK = ["--epochs", "1", "--batch-size", "32", "--bn-calib-batches", "1", "--eval-batch-size", "128"]


def test_train_supernet_from_released_weights_of_its_largest_network(tmp_path, capsys):
    import timm

    weights = tmp_path / "l.pth"
    torch.save(timm.create_model("efficientformerv2_l").state_dict(), weights)  # 1000 classes, at 224
    run = tmp_path / "run"
    assert (
        main(
            [
                *argv(
                    "train-supernet efficientformerv2 --space efficientformerv2-l --init {} --run {} "
                    "--img-size 32 --max-steps 1",
                    weights,
                    run,
                ),
                *QUICK,
            ]
        )
        == 0
    )
    capsys.readouterr()
    config = (run / "config.yaml").read_text()
    assert "init_digest:" in config
    # A network of another family does not fit: one line naming the keys.
    s0 = tmp_path / "swift.pth"
    torch.save(timm.create_model("swiftformer_xs").state_dict(), s0)
    assert (
        main(
            [
                *argv(
                    "train-supernet efficientformerv2 --space efficientformerv2-l --init {} --run {} "
                    "--img-size 32 --max-steps 1",
                    s0,
                    tmp_path / "bad",
                ),
                *QUICK,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and "does not fit" in err[0]
        and "missing keys: stem.conv1" in err[0]
        and "unexpected keys:" in err[0]
    )
    assert not (tmp_path / "bad").exists()


def test_train_supernet_again_from_a_trained_supernets_checkpoint(tmp_path, capsys):
    # A warm restart (issue 11's longer training): a supernet's checkpoint is its largest network's
    # weights, so --init takes it and a new schedule starts from where the first stopped.
    from nas.runs.checkpoint import file_digest

    def train(run: Path, *extra: str) -> dict:
        args = ["train-supernet", "efficientformerv2", "--space", "efficientformerv2-tiny", "--run", str(run)]
        assert main([*args, *extra, "--img-size", "32", "--max-steps", "1", *QUICK]) == 0
        capsys.readouterr()
        return torch.load(run / "checkpoint.pt", weights_only=True)["model"]

    first = train(tmp_path / "first")
    again = train(tmp_path / "again", "--init", str(tmp_path / "first" / "checkpoint.pt"))
    fresh = train(tmp_path / "fresh", "--seed", "1")
    assert (
        f"init_digest: {file_digest(tmp_path / 'first' / 'checkpoint.pt')}"
        in (tmp_path / "again" / "config.yaml").read_text()
    )
    key = "stages.1.blocks.0.mlp.fc1.conv.weight"
    # One step from the first supernet's weights: near them, and nearer than an independent start.
    moved = (again[key] - first[key]).abs().max()
    assert 0 < moved < 0.05 and moved < (fresh[key] - first[key]).abs().max()


def test_released_weights_load_exactly(tmp_path):
    import timm

    from nas.runs.checkpoint import load_pretrained
    from supernets import build_supernet

    reference = timm.create_model("efficientformerv2_l", num_classes=10).eval()
    weights = tmp_path / "l.pth"
    torch.save({"state_dict": reference.state_dict()}, weights)
    space = load_space("efficientformerv2-l")
    net = build_supernet(space, img_size=224, num_classes=10).eval()
    assert load_pretrained(net, weights) == []
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        assert torch.allclose(net(x, space.largest()), reference(x), atol=1e-5)


def test_fine_tune_a_member_from_released_weights(tmp_path, capsys):
    import timm

    weights = tmp_path / "s0.pth"
    torch.save(timm.create_model("efficientformerv2_s0").state_dict(), weights)
    run = tmp_path / "run"
    assert (
        main([*argv("train efficientformerv2_s0 --init {} --run {} --img-size 32 --max-steps 1", weights, run), *QUICK])
        == 0
    )
    state = torch.load(run / "checkpoint.pt", weights_only=True)["model"]
    released = torch.load(weights, weights_only=True)
    # One step of AdamW from the released weights: close to them, far from a fresh initialisation.
    key = "stages.1.blocks.0.mlp.fc1.conv.weight"
    assert (state[key] - released[key]).abs().max() < 0.05
