"""Int8, the way mobile networks ship (nas.quantize): an int8 ExecuTorch program calibrated on real
images, checked in the runtime and scored through it; Core ML's 8-bit weights; the int8 twin devices
(a measured xnnpack-int8 table, blocks exported for an int8 phone and imported back); a search priced in
int8 whose finalists are scored quantized; and the bad input of each, one line and exit 2."""

import json
import math
from pathlib import Path

import pytest
import torch

from nas import load_space
from nas.cli import main
from nas.cli.export import int8_lines
from nas.core.errors import NasError
from nas.latency import LatencyTable
from nas.latency.devices import quantized_device
from nas.latency.xnnpack import Program
from nas.quantize import COREML_WEIGHT_THRESHOLD, coreml_int8_weights, quantize_int8
from supernets import build_static

MICRO_SPACE = Path(__file__).parent / "fixtures" / "efficientformerv2-micro.yaml"


def _micro_checkpoint(tmp_path: Path, num_classes: int = 3) -> Path:
    """A micro network's weights as a state dict, logits far from zero so a check means something."""
    space = load_space(str(MICRO_SPACE))
    torch.manual_seed(0)
    model = build_static(space.members["micro_max"], img_size=32, num_classes=num_classes)
    torch.nn.init.normal_(model.head.weight, std=2.0)
    path = tmp_path / "trained.pt"
    torch.save({"model": model.state_dict()}, path)
    return path


def _export_argv(tmp_path: Path, fmt: str, out: str, *extra: str) -> list[str]:
    checkpoint = _micro_checkpoint(tmp_path)
    return ["export", "micro_max", "--space", str(MICRO_SPACE), "--format", fmt, "--out", str(tmp_path / out)] + [
        "--img-size",
        "32",
        "--num-classes",
        "3",
        "--checkpoint",
        str(checkpoint),
        *extra,
    ]


def test_int8_executorch_export_is_calibrated_checked_in_the_runtime_and_scored(tmp_path, real_images, capsys):
    argv = _export_argv(tmp_path, "executorch", "net.pte", "--quantize", "int8", "--calibration", str(real_images))
    assert main([*argv, "--calibration-images", "24", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["int8"]
    assert report["calibration_images"] == 24 and report["checked_on_images"] == 8
    assert report["max_relative_diff"] <= 0.05 and report["operators"]["xnnpack_subgraphs"] >= 1
    assert all(not op.startswith(("quantize", "dequantize", "reshape", "permute")) for op in report["stayed_float"])
    accuracy = report["accuracy"]
    assert 0 <= accuracy["float_top1"] <= 1 and 0 <= accuracy["int8_top1"] <= 1
    printed = "\n".join(int8_lines("executorch", report))
    assert (
        "operators left in float: " in printed
        and "on 30 images of test/ folder; int8 scored by the ExecuTorch" in printed
    )
    # the written program is the one scored: its top-1 on the same images, recomputed from the file
    from nas.config.recipe import Recipe
    from nas.data import eval_loader
    from nas.data.source import load_splits

    recipe = Recipe(img_size=32, cache_images=False, loader_workers=0)
    program = Program(tmp_path / "net.pte")
    correct = total = 0
    for images, labels in eval_loader(load_splits(str(real_images), recipe, 0, decode_all=False).val, recipe):
        for image, label in zip(images, labels):
            correct += int(program(image[None]).argmax(dim=1).item() == int(label))
            total += 1
    assert total == 30 and correct / total == accuracy["int8_top1"]
    with pytest.raises(NasError, match="needs calibration inputs"):
        quantize_int8(torch.nn.Identity(), [])


def test_coreml_int8_weights_are_what_coremltools_quantizes(tmp_path, real_images, capsys):
    argv = _export_argv(tmp_path, "coreml", "net.mlpackage", "--quantize", "int8", "--calibration", str(real_images))
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["int8"]
    # the copy that was scored rounded exactly the weights Core ML stores in 8 bits
    assert report["int8_weights"] == report["int8_weights_scored"] > 0
    assert (tmp_path / "net.mlpackage").is_dir() and "PyTorch" in report["accuracy"]["int8_scored_by"]
    model = build_static(load_space(str(MICRO_SPACE)).members["micro_max"], img_size=32, num_classes=3)
    rounded, count = coreml_int8_weights(model)
    assert count == report["int8_weights"]
    for module in rounded.modules():
        if isinstance(module, torch.nn.Conv2d) and module.weight.numel() > COREML_WEIGHT_THRESHOLD:
            w = module.weight.detach().flatten(1)
            steps = w / (w.abs().amax(dim=1, keepdim=True) / 127)
            assert torch.allclose(steps, steps.round(), atol=1e-3)  # every weight on its channel's 8-bit grid
    # without data: written, not scored
    assert main([*argv[:-2], "--out", str(tmp_path / "b.mlpackage")]) == 0
    assert "accuracy     not measured" in capsys.readouterr().out


@pytest.mark.parametrize(
    "fmt, out, extra, fragment",
    [
        ("executorch", "a.pte", ["--quantize", "int8"], "needs --calibration DATA"),
        ("onnx", "a.onnx", ["--quantize", "int8", "--calibration", "DATA"], "exports executorch or coreml, not onnx"),
        ("executorch", "a.pte", ["--calibration", "DATA"], "--calibration is read only with --quantize int8"),
        ("executorch", "a.onnx", ["--quantize", "int8", "--calibration", "DATA"], "a .pte file"),
    ],
)
def test_bad_int8_export_is_one_line(tmp_path, real_images, capsys, fmt, out, extra, fragment):
    extra = [str(real_images) if x == "DATA" else x for x in extra]
    assert main(_export_argv(tmp_path, fmt, out, *extra)) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err
    assert not (tmp_path / out).exists()


def test_calibration_data_of_other_classes_is_refused_before_any_work(tmp_path, real_images, capsys):
    argv = _export_argv(tmp_path, "executorch", "a.pte", "--quantize", "int8", "--calibration", str(real_images))
    argv[argv.index("--num-classes") + 1] = "10"
    assert main(argv) == 2  # the weights have 3 outputs: the flag disagrees with them before data is read
    argv[argv.index("--checkpoint") : argv.index("--checkpoint") + 2] = []
    assert main(argv) == 2
    assert "3 classes, but the network has 10 outputs" in capsys.readouterr().err


def test_int8_twins_of_devices():
    assert quantized_device("xnnpack", "int8") == "xnnpack-int8"
    assert quantized_device("pixel6", "int8") == "pixel6-int8"
    assert quantized_device("pixel6-int8", "int8") == quantized_device("pixel6-int8", None) == "pixel6-int8"
    with pytest.raises(NasError, match="device iphone12 has no int8 twin; int8 is timed on xnnpack"):
        quantized_device("iphone12", "int8")


def test_an_int8_phone_table_is_timed_on_the_phone_not_predicted(tmp_path, capsys):
    assert main(["build-table", "--device", "pixel6-int8", "--space", "efficientformerv2-tiny"]) == 2
    assert "no published measurements to predict from; time it on the phone" in capsys.readouterr().err
    with pytest.raises(NasError, match="nas export-blocks --device pixel6-int8"):
        LatencyTable.load("pixel6-int8", "efficientformerv2-tiny", 64)


def test_int8_blocks_for_an_android_phone_import_as_its_int8_table(tmp_path, capsys):
    out = tmp_path / "export"
    argv = ["export-blocks", "--device", "pixel6", "--quantize", "int8", "--space", str(MICRO_SPACE)]
    assert (
        main([*argv, "--img-size", "32", "--num-classes", "10", "--no-networks", "--limit", "2", "--out", str(out)])
        == 0
    )
    assert "as int8 ExecuTorch XNNPACK programs" in capsys.readouterr().out
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["device"] == "pixel6-int8" and "XNNPACKQuantizer" in manifest["quantization"]
    blocks = manifest["items"]
    x = torch.randn(blocks[0]["input_shape"])
    assert Program(out / blocks[0]["file"])(x).shape[0] == 1  # an int8 program the runtime loads
    # the phone's timings (entered by hand here) come back as pixel6-int8's imported table
    rows = "".join(f"{item['id']},{0.1 + 0.01 * i}\n" for i, item in enumerate(blocks))
    (tmp_path / "timed.csv").write_text("id,latency_ms\n" + rows)
    table_out = tmp_path / "pixel6-int8.json"
    assert (
        main(
            ["import-table", str(tmp_path / "timed.csv"), "--manifest", str(out / "manifest.json")]
            + [
                "--out",
                str(table_out),
            ]
        )
        == 0
    )
    table = LatencyTable.read(table_out)
    assert table.header.device == "pixel6-int8" and table.header.dtype == "int8"
    assert table.header.source == "imported" and len(table.entries) == len(blocks)
    assert main(["import-table", str(tmp_path / "timed.csv"), "--manifest", str(out / "manifest.json"), "--refit"]) == 2
    assert "pixel6-int8 has none" in capsys.readouterr().err


@pytest.mark.slow  # a measured int8 table (12 blocks and 3 networks quantized, lowered, timed; 37 s a network),
# a micro supernet, a search whose 2 finalists are quantized: 9 min here
def test_a_search_priced_in_int8_scores_its_finalists_quantized(tmp_path, monkeypatch, capsys):
    import shutil

    from nas.latency.measure import MeasurementPlan, TimingConfig, build_measured_table

    tables = tmp_path / "tables"
    shutil.copytree(Path(__file__).resolve().parents[1] / "latency_tables", tables)
    monkeypatch.setenv("NAS_LATENCY_DIR", str(tables))
    space = load_space(str(MICRO_SPACE))
    timing = TimingConfig(warmup=1, min_repeats=3, min_seconds=0.0, busy_retries=0)
    # Calibrated on the largest and smallest networks, checked on micro_max: the fewest networks that fit.
    table = build_measured_table("xnnpack-int8", space, 32, 10, MeasurementPlan(timing, 0, 0), progress=False)
    h = table.header
    assert (h.device, h.dtype, h.source) == ("xnnpack-int8", "int8", "measured") and h.complete
    assert "XNNPACKQuantizer" in h.method["quantization"]["scheme"] and "value" in h.error
    assert set(h.method["operators_outside_xnnpack"]) == set(table.entries)
    assert table.latency(space.largest()) > table.latency(space.smallest())  # priced apart, however timed

    supernet = tmp_path / "supernet"
    argv = ["train-supernet", "efficientformerv2", "--space", str(MICRO_SPACE), "--run", str(supernet)]
    assert main([*argv, "--epochs", "1", "--batch-size", "32", "--max-steps", "4", "--bn-calib-batches", "1"]) == 0
    target = f"{math.ceil(table.latency(space.largest()) * 1e4) / 1e4:.4f}"  # rounded up: every network fits
    run = tmp_path / "search"
    argv = ["search", "--supernet", str(supernet), "--objective", "latency", "--device", "xnnpack-int8"]
    argv += ["--target", target, "--strategy", "random", "--set", "evaluations=4", "--set", "tolerance=0.5"]
    argv += ["--finalists", "2", "--noise-networks", "0", "--final-quantize", "int8", "--run", str(run)]
    capsys.readouterr()
    assert main([*argv, "-q"]) == 0
    printed = capsys.readouterr().out
    assert "at the finalists' fidelity, quantized to int8" in printed and "measured on xnnpack-int8" in printed
    result = json.loads((run / "result.json").read_text())
    assert result["final_quantize"] == "int8" and len(result["finalists"]) == 2
    cached = [json.loads(line) for line in (run / "evaluations.jsonl").read_text().splitlines()]
    assert any(str(row.get("key", "")).endswith(":int8") for row in cached)


def test_the_command_line_offers_the_quantizations_the_library_knows():
    """The parsers name the choices without importing torch; they must not drift from the library's."""
    from nas.cli.common import QUANTIZE_CHOICES
    from nas.quantize import QUANTIZATIONS

    assert QUANTIZE_CHOICES == QUANTIZATIONS
