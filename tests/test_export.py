import json

import pytest
import torch
from helpers import argv

from nas import load_space
from nas.cli import main


@pytest.mark.parametrize(
    "member, space",
    [
        ("efficientformerv2_tiny_max", "efficientformerv2-tiny"),
        ("efficientformer_l1", "efficientformer"),
        ("swiftformer_xs", "swiftformer"),
    ],
)
def test_onnx_export_matches_pytorch(tmp_path, capsys, member, space):
    out = tmp_path / "model.onnx"
    assert (
        main(["export", member, "--space", space, "--format", "onnx", "--out", str(out), "--img-size", "64", "--json"])
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["max_abs_diff"] <= 1e-4
    assert out.exists() and out.stat().st_size > 10_000


def test_an_untrained_export_is_the_same_file_for_the_same_seed(tmp_path, capsys):
    """Without --checkpoint the network is freshly initialised: from --seed, so the file repeats."""
    import onnx

    def weights(name, seed):
        out = tmp_path / name
        args = ["export", "efficientformerv2_tiny_max", "--space", "efficientformerv2-tiny", "--format", "onnx"]
        assert main([*args, "--out", str(out), "--img-size", "32", "--num-classes", "10", "--seed", seed]) == 0
        return {i.name: onnx.numpy_helper.to_array(i) for i in onnx.load(out).graph.initializer}

    first, again, other = weights("a.onnx", "3"), weights("b.onnx", "3"), weights("c.onnx", "4")
    assert first.keys() == again.keys() == other.keys()
    assert all((first[k] == again[k]).all() for k in first)
    assert any((first[k] != other[k]).any() for k in first)
    capsys.readouterr()


def test_export_with_checkpoint_and_coreml(tmp_path, capsys):
    from supernets import build_static

    arch = load_space("swiftformer-tiny").smallest()
    path = arch.save(tmp_path / "arch.yaml")
    model = build_static(arch, img_size=64, num_classes=10)
    torch.save({"model": model.state_dict()}, tmp_path / "ckpt.pt")
    tiny = ["--space", "swiftformer-tiny"]
    assert (
        main(
            [
                *argv("export {}", path),
                *tiny,
                *argv(
                    "--format onnx --out {} --img-size 64 --num-classes 10 --checkpoint {} --json",
                    tmp_path / "m.onnx",
                    tmp_path / "ckpt.pt",
                ),
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["max_abs_diff"] <= 1e-4
    assert (
        main(
            [
                *argv("export {}", path),
                *tiny,
                *argv("--format coreml --out {} --img-size 64 --num-classes 10", tmp_path / "m.mlpackage"),
            ]
        )
        == 0
    )
    assert (tmp_path / "m.mlpackage" / "Manifest.json").exists()
    assert (
        main(
            [
                *argv("export {}", path),
                *tiny,
                *argv(
                    "--format onnx --out {} --img-size 64 --checkpoint {}", tmp_path / "x.onnx", tmp_path / "ckpt.pt"
                ),
            ]
        )
        == 2
    )  # 1000-class head does not fit
    assert "does not fit" in capsys.readouterr().err
