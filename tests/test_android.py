"""Android through ExecuTorch's XNNPACK backend: programs exported for the phone (every block kind of
every family), a trained network's logits in the runtime, the measured ``xnnpack`` table, and the
timings ``executor_runner`` prints read back into a table (fixtures: tests/fixtures/executorch/README.md)."""

import json
import subprocess
from pathlib import Path

import pytest
import torch

from nas import load_space
from nas.cli import main
from nas.core.signature import BlockSignature
from nas.latency import LatencyTable
from nas.latency.android import parse_runner_log
from nas.latency.measure import MeasurementPlan, TimingConfig, build_measured_table
from nas.latency.onphone import plan_export, write_manifest
from nas.latency.xnnpack import Program, lower
from nas.metrics.signatures import block_input, build_block, reachable_signatures
from supernets import build_static

FIXTURES = Path(__file__).parent / "fixtures" / "executorch"
#: A few blocks only, so that lowering every one of them (seconds each) stays short.
MICRO_SPACE = FIXTURES.parent / "efficientformerv2-micro.yaml"


def _one_per_kind(space_name: str, img_size: int = 32):
    space = load_space(space_name)
    kinds = {}
    for sig in reachable_signatures(space, img_size, 10):
        kinds.setdefault(sig.kind, sig)
    return space, list(kinds.values())


@pytest.mark.slow  # every block kind of three spaces lowered and run in the runtime: 45 s
@pytest.mark.parametrize("space_name", ["efficientformerv2-tiny", "efficientformer-tiny", "swiftformer-tiny"])
def test_every_block_kind_lowers_to_xnnpack_and_runs_in_the_runtime(space_name):
    space, sigs = _one_per_kind(space_name)
    assert len(sigs) >= 3
    for sig in sigs:
        block, x = build_block(space.family, sig).eval(), block_input(space.family, sig)
        lowered = lower(block, x)
        assert lowered.subgraphs >= 1 and lowered.delegated, sig.kind  # XNNPACK took part of every block
        with torch.no_grad():
            expected = block(x)
        assert (Program(lowered.program)(x) - expected).abs().max() <= 1e-4 * max(1.0, expected.abs().max()), sig.kind


def test_export_blocks_for_pixel6_writes_programs_operators_and_the_adb_script(tmp_path, capsys):
    out = tmp_path / "export"
    argv = ["export-blocks", "--device", "pixel6", "--space", "efficientformerv2-tiny", "--img-size", "32"]
    assert main([*argv, "--num-classes", "10", "--limit", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "as ExecuTorch XNNPACK programs" in printed and "time_on_android.sh" in printed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["export_runtime"] == "executorch" and "executorch" in manifest["tool_versions"]
    space = load_space("efficientformerv2-tiny")
    for item in manifest["items"]:
        assert item["file"].endswith(".pte")
        assert set(item["operators"]) == {"xnnpack_subgraphs", "delegated", "fallback"}
        # the program loads and runs in the runtime here (its weights are a fresh block's: shapes only)
        block = build_block(space.family, BlockSignature.from_key(item["key"]), device="meta").eval()
        expected = block(torch.empty(*item["input_shape"], device="meta")).shape
        assert Program(out / item["file"])(torch.randn(*item["input_shape"])).shape == expected
    # the attention-downsampling blocks look their bias up by index: XNNPACK leaves that to portable kernels
    assert manifest["items"][0]["key"].startswith("attn_downsample")
    assert "aten_index_tensor" in manifest["items"][0]["operators"]["fallback"]
    script = out / "time_on_android.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert "b0001 blocks/b0001_" in script.read_text() and script.stat().st_mode & 0o100
    # the Core ML path is the iPhones'; pixel6 is not timed through it
    assert main([*argv, "--runtime", "coreml", "--out", str(tmp_path / "no")]) == 2
    assert "pixel6 is timed through executorch, not coreml" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()


def test_export_blocks_take_the_input_size_and_classes_a_run_records(tmp_path, capsys):
    """--run: the blocks are exported at the input size and class count the run trained with; a flag that
    disagrees is one line, and nothing is written."""
    run = tmp_path / "supernet"
    run.mkdir()
    torch.save(
        {"model": {}, "space": "efficientformerv2-tiny", "img_size": 32, "num_classes": 10}, run / "checkpoint.pt"
    )
    argv = ["export-blocks", "--device", "pixel6", "--space", "efficientformerv2-tiny", "--run", str(run)]
    assert main([*argv, "--limit", "1", "--no-networks", "--out", str(tmp_path / "a")]) == 0
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert (manifest["img_size"], manifest["num_classes"]) == (32, 10)
    capsys.readouterr()
    assert main([*argv, "--img-size", "64", "--limit", "1", "--out", str(tmp_path / "b")]) == 2
    assert "--img-size 64 disagrees with" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


@pytest.mark.slow  # two exports of every block, compared file by file: 13 s
def test_exported_programs_are_the_same_files_for_the_same_seed(tmp_path, capsys):
    """A block's weights come from --seed alone: the same seed writes the same program, also when an
    interrupted export resumes and writes it again; another seed writes another."""
    argv = ["export-blocks", "--device", "pixel6", "--space", "efficientformerv2-tiny", "--img-size", "32"]

    def programs(out: Path, seed: str) -> dict[str, bytes]:
        assert main([*argv, "--num-classes", "10", "--limit", "1", "--out", str(out), "--seed", seed]) == 0
        return {path.name: path.read_bytes() for path in out.rglob("*.pte")}

    first = programs(tmp_path / "a", "3")
    for path in (tmp_path / "a").rglob("*.pte"):  # the program lost, as by a kill before its write
        path.unlink()
    assert programs(tmp_path / "a", "3") == first
    other = programs(tmp_path / "b", "4")
    assert len(first) == 1 and other.keys() == first.keys() and other != first
    capsys.readouterr()


def test_export_executorch_matches_pytorch_logits(tmp_path, capsys):
    space = load_space("efficientformerv2-tiny")
    torch.manual_seed(0)  # the weights, and so the logits' scale, must not depend on which tests ran before
    model = build_static(space.members["efficientformerv2_tiny_min"], img_size=32, num_classes=10)
    torch.nn.init.normal_(model.head.weight, std=5.0)  # logits far from zero, so the check means something
    torch.save({"model": model.state_dict()}, tmp_path / "trained.pt")
    out = tmp_path / "net.pte"
    argv = ["export", "efficientformerv2_tiny_min", "--format", "executorch", "--out", str(out), "--img-size", "32"]
    assert main([*argv, "--num-classes", "10", "--checkpoint", str(tmp_path / "trained.pt"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["max_abs_diff"] <= 1e-4 and out.exists()
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = model.eval()(x)
    assert expected.abs().max() > 0.5 and (Program(out)(x) - expected).abs().max() <= 1e-4
    assert main([*argv[:-2], "--out", str(tmp_path / "net.onnx"), "--img-size", "32"]) == 2
    assert "an ExecuTorch program is a .pte file" in capsys.readouterr().err


@pytest.mark.slow  # every block of a space lowered and timed in the runtime, then checked end to end: 80 s
def test_xnnpack_table_is_measured_labelled_and_checked(tmp_path, capsys):
    space = MICRO_SPACE
    out = tmp_path / "xnnpack.json"
    timing = TimingConfig(warmup=1, min_repeats=3, min_seconds=0.0, busy_retries=0)
    # one calibration network besides the largest and smallest, no check here: check-table below does it
    build_measured_table("xnnpack", load_space(str(space)), 32, 10, MeasurementPlan(timing, 1, 0), out)
    table = LatencyTable.read(out)
    assert table.header.source == "measured" and table.header.tool_versions["executorch"].startswith("1.")
    assert table.header.runtime == "executorch (XNNPACK delegate, CPU)"
    outside = table.header.method["operators_outside_xnnpack"]
    assert set(outside) == set(table.entries) and any("aten_index_tensor" in ops for ops in outside.values())
    # timed pinned to one core, each block less a runtime call's fixed cost (paid once per network)
    assert len(table.header.method["pinned_cpus"]) == 1
    assert all(0 < ms < 1 for ms in table.header.method["call_overhead"]["ms_by_input_shape"].values())
    argv = ["--device", "xnnpack", "--space", str(space), "--img-size", "32", "--repeats", "3"]
    # complete: printed, not rebuilt
    assert main(["build-table", *argv, "--num-classes", "10", "--out", str(out), "--resume"]) == 0
    printed = capsys.readouterr().out
    assert "source       measured" in printed
    assert "blocks run operators on portable kernels, outside XNNPACK: " in printed
    assert main(["check-table", *argv, "--table", str(out), "--random", "1", "--busy-retries", "0", "--json"]) == 0
    check = json.loads(capsys.readouterr().out)
    assert len(check["rows"]) == 2 and check["mean_ape"] >= 0 and all(r["measured_ms"] > 0 for r in check["rows"])


def test_runner_logs_parse_as_the_tool_prints_them():
    android = parse_runner_log((FIXTURES / "runner-android-logcat.log").read_text())
    assert android.timings == {"n00": pytest.approx(2.405), "n01": pytest.approx(0.905)}  # medians of 5 runs
    assert android.setup.startswith("device Pixel 6") and not android.local
    here = parse_runner_log((FIXTURES / "runner-x86-local.log").read_text())
    assert set(here.timings) == {"b0000", "b0001", "b0002"} and here.local
    assert all(0 < ms < 100 for ms in here.timings.values())


def _manifest(tmp_path) -> Path:
    write_manifest(plan_export("pixel6", load_space("efficientformerv2-tiny"), img_size=64, num_classes=1000), tmp_path)
    return tmp_path / "manifest.json"


def test_import_table_reads_the_runner_log_and_refits_the_pixel6_model(tmp_path, capsys):
    manifest = _manifest(tmp_path)
    out = tmp_path / "pixel6.json"
    log = str(FIXTURES / "runner-android-logcat.log")
    assert main(["import-table", log, "--manifest", str(manifest), "--refit", "--out", str(out)]) == 0
    assert "calibrated on 2 timed networks" in capsys.readouterr().out
    table = LatencyTable.read(out)
    assert table.header.source == "predicted" and table.header.error["calibration"]["k"] == 2
    space = load_space("efficientformerv2-tiny")
    # two networks: a scale, so the table prices both in proportion to their timings
    ratio = table.latency(space.members["efficientformerv2_tiny_max"]) / table.latency(
        space.members["efficientformerv2_tiny_min"]
    )
    assert ratio > 1
    # without --refit, two networks and no block are not a table
    assert main(["import-table", log, "--manifest", str(manifest), "--out", str(tmp_path / "t.json")]) == 2
    assert "blocks have no latency_ms" in capsys.readouterr().err


@pytest.mark.parametrize(
    "log, fragment",
    [
        ("runner-x86-local.log", "(LOCAL=1), not on a pixel6"),
        (None, "item n00 (line 2) has no 'Model executed successfully' line"),
    ],
)
def test_a_bad_runner_log_is_one_line(tmp_path, capsys, log, fragment):
    manifest = _manifest(tmp_path)
    path = tmp_path / "timings.log"
    if log:
        path.write_text((FIXTURES / log).read_text())
    else:
        path.write_text("# device Pixel 6\n=== nas-item n00 networks/x.pte ===\nSegmentation fault\n")
    assert main(["import-table", str(path), "--manifest", str(manifest), "--refit"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0]


def test_a_softmax_after_a_convolution_is_computed_on_the_right_axis():
    """ExecuTorch 1.5's XNNPACK delegate applies a softmax that follows a convolution over the channels of its
    channels-last layout (EfficientFormerV2's talking-head attention came out 0.4 off on a trained network): such
    a softmax is left to the portable kernels, which compute it as PyTorch does."""

    class TalkingHeads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mix = torch.nn.Conv2d(8, 8, 1)

        def forward(self, attn):
            return (self.mix(attn) + 1.0).softmax(dim=-1)

    torch.manual_seed(0)
    module, x = TalkingHeads().eval(), torch.randn(1, 8, 4, 4)
    lowered = lower(module, x)
    with torch.no_grad():
        expected = module(x)
    assert (Program(lowered.program)(x) - expected).abs().max() <= 1e-5
    assert "aten__softmax_default" in lowered.fallback and "aten_convolution_default" in lowered.delegated
