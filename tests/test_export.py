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
    )  # a plain state dict records no class count: 1000 by default, and its head does not fit
    err = capsys.readouterr().err
    assert "does not fit" in err and "head.weight is [10," in err and "(give --num-classes 10)" in err
    assert not (tmp_path / "x.onnx").exists()


def test_export_takes_what_a_trained_run_records(tmp_path, capsys):
    """The tutorial's export: a nas train run folder (or its checkpoint) gives the architecture, input size
    and class count; a flag or ARCH that disagrees is one line, and a supernet's checkpoint is refused."""
    import onnx

    run = tmp_path / "train"
    tiny = ["--space", "efficientformerv2-tiny"]
    quick = ["--epochs", "1", "--batch-size", "32", "--max-steps", "1", "--img-size", "32"]
    assert main(["train", "efficientformerv2_tiny_min", *tiny, "--run", str(run), *quick, "--json"]) == 0
    capsys.readouterr()
    out = tmp_path / "m.onnx"
    assert main(["export", "--checkpoint", str(run), "--format", "onnx", "--out", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["img_size"], result["num_classes"]) == (32, 10)  # digits: 10 classes
    graph = onnx.load(out).graph
    assert [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim] == [1, 3, 32, 32]
    assert [d.dim_value for d in graph.output[0].type.tensor_type.shape.dim] == [1, 10]
    ckpt = run / "checkpoint.pt"
    refused = {
        ("efficientformerv2_tiny_min", *tiny, "--num-classes", "1000"): "--num-classes 1000 disagrees with",
        ("efficientformerv2_tiny_min", *tiny, "--img-size", "64"): "trained with --img-size 32",
        ("efficientformerv2_tiny_max", *tiny): "not the ARCH given",
    }
    for extra, words in refused.items():
        assert (
            main(["export", *extra, "--checkpoint", str(ckpt), "--format", "onnx", "--out", str(tmp_path / "z.onnx")])
            == 2
        )
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "z.onnx").exists()
    supernet = tmp_path / "supernet.pt"
    torch.save({"model": {}, "space": "efficientformerv2-tiny", "img_size": 32, "num_classes": 10}, supernet)
    assert main(["export", "--checkpoint", str(supernet), "--format", "onnx", "--out", str(tmp_path / "z.onnx")]) == 2
    assert "supernet's checkpoint" in capsys.readouterr().err
    assert main(["export", "--format", "onnx", "--out", str(tmp_path / "z.onnx")]) == 2
    assert "give ARCH" in capsys.readouterr().err
