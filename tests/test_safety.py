"""Files from others are data, bad input is one line, resumes never mix settings, one writer per run.

Every command that reads a checkpoint is given one that carries a pickle payload (it must be
refused, and the payload must not run), truncated checkpoints and images, and a table of bad
flags and files (each: exit code 2, one line on stderr, nothing written).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import argv, copy_run, search_argv

from nas.cli import main
from nas.core.errors import NasError
from nas.latency import tables_root
from nas.runs.checkpoint import load_checkpoint
from nas.runs.lock import RunLock
from nas.search.evaluator import DiskCache


class Payload:
    """Unpickling this runs a shell command: what a hostile checkpoint carries."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _poison(checkpoint: Path, marker: Path) -> None:
    """Add a payload to a real checkpoint (written the way an attacker would: plain torch.save)."""
    state = torch.load(checkpoint, weights_only=True)
    state["extra"] = Payload(marker)
    torch.save(state, checkpoint)


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _one_line_error(capsys, fragment: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert fragment in err[0], err[0]
    assert "Traceback" not in err[0]
    return err[0]


@pytest.fixture(scope="module")
def fixed_run(tmp_path_factory):
    """A ``nas train`` run of a member, stopped after one step (so it can be resumed)."""
    run = tmp_path_factory.mktemp("fixed") / "run"
    assert (
        main(argv("train efficientformerv2_s0 --run {} --img-size 32 --epochs 1 --batch-size 32 --max-steps 1", run))
        == 0
    )
    return run


# --- checkpoints with a payload are refused by every command that reads one -------------------------


@pytest.mark.parametrize(
    "command", ["search", "train-supernet-resume", "train-resume", "teacher", "export", "compare-supernet"]
)
def test_checkpoint_with_a_payload_is_refused_and_never_runs(
    command, tiny_supernet, fixed_run, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "PWNED"
    supernet = copy_run(tiny_supernet, tmp_path / "supernet")
    fixed = copy_run(fixed_run, tmp_path / "fixed")
    poisoned = {"search": supernet, "compare-supernet": supernet, "train-supernet-resume": supernet}.get(command, fixed)
    _poison(poisoned / "checkpoint.pt", marker)
    ckpt = str(poisoned / "checkpoint.pt")
    argv = {
        "search": ["search", "--supernet", str(supernet), "--objective", "params", "--target", "2e5", "--run", "s"],
        "train-supernet-resume": [
            "train-supernet",
            "efficientformerv2",
            "--space",
            "efficientformerv2-tiny",
            "--run",
            str(supernet),
            "--epochs",
            "1",
            "--batch-size",
            "32",
            "--bn-calib-batches",
            "1",
            "--resume",
        ],
        "train-resume": [
            "train",
            "efficientformerv2_s0",
            "--run",
            str(fixed),
            "--img-size",
            "32",
            "--epochs",
            "1",
            "--batch-size",
            "32",
            "--resume",
        ],
        "teacher": [
            "train",
            "efficientformerv2_s0",
            "--run",
            "t",
            "--img-size",
            "32",
            "--teacher",
            "efficientformerv2_s0",
            "--teacher-checkpoint",
            ckpt,
        ],
        "export": [
            "export",
            "efficientformerv2_s0",
            "--checkpoint",
            ckpt,
            "--format",
            "onnx",
            "--out",
            "m.onnx",
            "--img-size",
            "32",
            "--num-classes",
            "10",
        ],
        "compare-supernet": [
            "compare",
            "--searched",
            "efficientformerv2_s0",
            "--space",
            "efficientformerv2-tiny",
            "--random",
            "1",
            "--objective",
            "params",
            "--supernet",
            str(supernet),
            "--out",
            "c",
        ],
    }[command]
    if command == "compare-supernet":  # S0 is no member of the tiny space: search with one of its archs
        from nas import load_space

        arch = load_space("efficientformerv2-tiny").smallest().save(tmp_path / "arch.yaml")
        argv[2] = str(arch)
    before = _files(tmp_path)
    assert main(argv) == 2
    _one_line_error(capsys, "refused to load")
    assert not marker.exists(), "the payload ran"
    assert _files(tmp_path) == before, "a refused command wrote files"
    with pytest.raises(NasError, match="never run code"):
        load_checkpoint(poisoned / "checkpoint.pt")
    assert not marker.exists()


def test_truncated_and_foreign_checkpoints(tiny_supernet, tmp_path, capsys):
    supernet = copy_run(tiny_supernet, tmp_path / "supernet")
    _truncate(supernet / "checkpoint.pt")
    assert main(argv("search --supernet {} --objective params --target 2e5 --run {}", supernet, tmp_path / "s")) == 2
    _one_line_error(capsys, "corrupt or truncated supernet checkpoint")
    assert not (tmp_path / "s").exists()
    torch.save([1, 2, 3], supernet / "checkpoint.pt")
    with pytest.raises(NasError, match="not a supernet checkpoint: expected a mapping"):
        load_checkpoint(supernet / "checkpoint.pt", "supernet checkpoint")
    torch.save({"model": {}}, supernet / "checkpoint.pt")
    with pytest.raises(NasError, match="lacks 'num_classes', 'img_size'"):
        load_checkpoint(supernet / "checkpoint.pt", "supernet checkpoint", require=("model", "num_classes", "img_size"))


# --- a corrupt image is named before any work starts, by every command that reads images ---------


@pytest.fixture
def corrupt_data(real_images, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(real_images, root)
    bad = sorted((root / "train" / "leaves").iterdir())[5]
    _truncate(bad)
    return root, bad


def test_corrupt_image_is_named_before_training(corrupt_data, tmp_path, capsys):
    root, bad = corrupt_data
    for command in (
        "train-supernet efficientformerv2 --space efficientformerv2-tiny",
        "train efficientformerv2_s0 --img-size 32",
    ):
        run = tmp_path / "run"
        assert main(argv(command + " --data {} --run {} --batch-size 16", root, run)) == 2
        line = _one_line_error(capsys, str(bad))
        assert "cannot decode image" in line
        assert not run.exists()


def test_search_and_compare_name_a_corrupt_image(real_images, tmp_path, capsys):
    from nas import load_space

    data = tmp_path / "data"
    shutil.copytree(real_images, data)
    supernet = tmp_path / "supernet"
    assert (
        main(
            argv(
                "train-supernet efficientformerv2 --space efficientformerv2-tiny --data {} --run "
                "{} --epochs 1 --batch-size 16 --max-steps 1 --bn-calib-batches 1 --img-size 32",
                data,
                supernet,
            )
        )
        == 0
    )
    capsys.readouterr()
    # A search reads only its calibration and search images (not the whole set, which on ImageNet
    # would cost every evaluator minutes): one of those, corrupt, is named before the run starts.
    from nas.config.recipe import recipe_from_saved
    from nas.data import load_splits
    from nas.search.supernet_run import SupernetRun

    spec = SupernetRun.read(supernet).eval_spec()
    bad = Path(load_splits(str(data), recipe_from_saved(spec.recipe), spec.seed, decode_all=False).search.paths[0])
    bad.write_bytes(b"not a jpeg at all")
    assert main(argv("search --supernet {} --objective params --target 2e5 --run {}", supernet, tmp_path / "s")) == 2
    _one_line_error(capsys, str(bad))
    assert not (tmp_path / "s").exists()
    arch = load_space("efficientformerv2-tiny").smallest().save(tmp_path / "arch.yaml")
    assert (
        main(
            argv(
                "compare --searched {} --random 1 --objective params --data {} --supernet none --out {}",
                arch,
                data,
                tmp_path / "c",
            )
        )
        == 2
    )
    _one_line_error(capsys, str(bad))
    assert not (tmp_path / "c").exists()


# --- the table of bad inputs ------------------------------------------------------------------------

S0 = ["efficientformerv2_s0"]
TRAIN = ["train-supernet", "efficientformerv2", "--space", "efficientformerv2-tiny", "--run", "r"]
SEARCH = ["search", "--supernet", "SUPERNET", "--run", "s"]

BAD_INPUTS = [
    # profile / space
    (["profile", "efficientformerv9_s0"], "is not a named member of any space"),
    (["profile", *S0, "--img-size", "8"], "an image size of at least 32"),
    (["profile", *S0, "--device", "iphone99"], "unknown device 'iphone99'"),
    (["profile", "--timm", "resnet18"], "--timm needs --device"),
    (["profile", "--timm", "no_such_model", "--device", "iphone12"], "no_such_model"),
    (["profile", "BAD_YAML"], "malformed YAML"),
    (["profile", "OUTSIDE_YAML"], "not allowed"),
    (["space", "show", "no-such-space"], "unknown search space 'no-such-space'"),
    # data
    (["data", "check", "no-such-folder"], "data folder not found"),
    (["data", "check", "no-such-folder", "--workers", "0"], "positive integer"),
    (["data"], "required: ACTION"),
    # latency tables
    (["build-table", "--device", "tpu", "--space", "efficientformerv2-tiny"], "unknown device 'tpu'"),
    (["build-table", "--device", "cpu", "--space", "efficientformerv2-tiny", "--threads", "0"], "positive integer"),
    (["build-table", "--device", "cpu", "--space", "efficientformerv2-tiny", "--repeats", "-3"], "positive integer"),
    (["check-table", "--device", "iphone12", "--space", "efficientformerv2-tiny"], "cannot be timed here"),
    (
        ["build-table", "--device", "iphone12", "--space", "efficientformerv2-tiny", "--recalibrate"],
        "refits a measured",
    ),
    (
        ["build-table", "--device", "cpu", "--space", "efficientformerv2-tiny", "--out", "none.json", "--recalibrate"],
        "none.json does not exist",
    ),
    (
        ["build-table", "--device", "cpu", "--space", "efficientformerv2-tiny", "--resume", "--recalibrate"],
        "not allowed",
    ),
    (["check-table", "--device", "cpu", "--space", "efficientformerv2-tiny", "--busy-retries", "-1"], "of 0 or more"),
    (
        ["check-table", "--device", "cpu", "--space", "efficientformerv2-tiny", "--table", "CORRUPT_JSON"],
        "CORRUPT_JSON",
    ),
    (["import-table", "missing.csv", "--manifest", "missing.json"], "missing.json"),
    # training flags and recipes
    ([*TRAIN, "--epochs", "-1"], "--epochs must be at least 1, got -1"),
    ([*TRAIN, "--batch-size", "0"], "--batch-size must be at least 1"),
    ([*TRAIN, "--lr", "nan"], "--lr must be a finite number"),
    ([*TRAIN, "--lr", "0"], "--lr must be above 0"),
    ([*TRAIN, "--search-fraction", "1.5"], "--search-fraction must be in (0, 1)"),
    ([*TRAIN, "--clip-mode", "sideways"], "--clip-mode must be one of agc, norm, value"),
    ([*TRAIN, "--img-size", "8"], "--img-size must be at least 32"),
    ([*TRAIN, "--label-smoothing", "1"], "--label-smoothing must be in [0, 1)"),
    ([*TRAIN, "--teacher-checkpoint", "t.pt"], "teacher_checkpoint is set but teacher is not"),
    ([*TRAIN, "--teacher", "resnet18", "--teacher-checkpoint", "missing.pt"], "teacher checkpoint not found"),
    ([*TRAIN, "--teacher", "no_such_net"], "timm cannot build 'no_such_net'"),
    ([*TRAIN, "--warmup-epochs", "9", "--epochs", "2"], "warmup_epochs (9) exceeds epochs (2)"),
    ([*TRAIN, "--seed", "-1"], "integer of 0 or more"),
    ([*TRAIN, "--max-steps", "0"], "positive integer"),
    ([*TRAIN, "--batch-size", "4096"], "fewer than one batch of 4096"),
    ([*TRAIN, "--recipe", "BAD_YAML"], "malformed YAML"),
    ([*TRAIN, "--recipe", "WRONG_TYPE_RECIPE"], "epochs: expected an integer, got 'ten'"),
    ([*TRAIN, "--recipe", "NEGATIVE_RECIPE"], "bn_calib_batches must be at least 1, got 0"),
    ([*TRAIN, "--data", "missing-folder"], "data folder not found"),
    ([*TRAIN, "--resume"], "nothing to resume"),
    (["train", "no_such_member"], "is not a named member of any space"),
    (["train", *S0, "--run", "r", "--model-ema-decay", "1.5"], "--model-ema-decay must be in (0, 1)"),
    (["train", *S0, "--run", "r", "--drop-path", "-0.1"], "--drop-path must be in [0, 1)"),
    # search
    ([*SEARCH, "--objective", "mes", "--target", "-5", "--device", "iphone12"], "a positive number"),
    ([*SEARCH, "--objective", "params", "--target", "2e5", "--workers", "-1"], "integer of 0 or more"),
    ([*SEARCH, "--objective", "params", "--target", "2e5", "--bn-calib-batches", "0"], "positive integer"),
    ([*SEARCH, "--objective", "mes", "--target", "5000", "--device", "iphone12"], "out of reach"),
    (["search", "--supernet", "missing-run", "--objective", "params", "--target", "2e5"], "not a trained supernet"),
    ([*SEARCH, "--objective", "params", "--target", "2e5", "--resume"], "nothing to resume"),
    # sample, compare, export, demo
    (
        [
            "sample",
            "--space",
            "efficientformerv2-tiny",
            "--objective",
            "params",
            "--target",
            "2e5",
            "--tolerance",
            "0",
            "--out",
            "o",
        ],
        "between 0 and 1",
    ),
    (
        [
            "sample",
            "--space",
            "efficientformerv2-tiny",
            "--objective",
            "params",
            "--target",
            "2e5",
            "-n",
            "0",
            "--out",
            "o",
        ],
        "positive integer",
    ),
    (["compare", "--searched", *S0, "--tolerance", "2"], "between 0 and 1"),
    (["compare", "--searched", *S0, "--workers", "-2"], "integer of 0 or more"),
    (["compare", "--searched", *S0, "--objective", "mes"], "needs --device"),
    (["compare", "--searched", *S0, "--epochs", "0"], "--epochs must be at least 1"),
    # headroom
    (["headroom", "--space", "efficientformerv2-tiny", "--objective", "params", "--target", "4e5"], "--out"),
    (
        [
            "headroom",
            "--space",
            "efficientformerv2-tiny",
            "--objective",
            "params",
            "--target",
            "4e5",
            "--out",
            "p",
            "--seeds",
            "1",
        ],
        "--seeds must be at least 2",
    ),
    (
        ["headroom", "--space", "efficientformerv2-tiny", "--objective", "latency", "--target", "1", "--out", "p"],
        "needs --device",
    ),
    (["export", *S0, "--format", "tflite", "--out", "m"], "invalid choice: 'tflite'"),
    (
        ["export", *S0, "--format", "onnx", "--out", "m.onnx", "--checkpoint", "TRUNCATED_CKPT"],
        "corrupt or truncated checkpoint",
    ),
    (["export", *S0, "--format", "onnx", "--out", "m.onnx", "--checkpoint", "missing.pt"], "checkpoint not found"),
    (["demo", "--target-fraction", "2"], "--target-fraction must be in (0, 1]"),
    (["demo", "--workers", "-1"], "integer of 0 or more"),
    (["rank-check", "--supernet", "SUPERNET", "-n", "3", "--out", "r"], "-n must be at least 4"),
    (["export-blocks", "--device", "tpu", "--space", "efficientformerv2-tiny", "--out", "b"], "unknown device 'tpu'"),
    (["report", "no-such-run"], "no-such-run"),
]


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory, tiny_supernet):
    root = tmp_path_factory.mktemp("bad-files")
    (root / "bad.yaml").write_text("family: efficientformerv2\ndepths: [1, 2\n")
    from nas import load_space

    outside = load_space("efficientformerv2").named("efficientformerv2_s0").to_dict()
    outside["widths"] = [33, 48, 96, 176]
    import yaml

    (root / "outside.yaml").write_text(yaml.safe_dump(outside))
    (root / "corrupt.json").write_text('{"header": ')
    (root / "wrong_type.yaml").write_text("epochs: ten\n")
    (root / "negative.yaml").write_text("epochs: 2\nbn_calib_batches: 0\n")
    torch.save({"model": {}}, root / "truncated.pt")
    _truncate(root / "truncated.pt")
    return {
        "BAD_YAML": root / "bad.yaml",
        "OUTSIDE_YAML": root / "outside.yaml",
        "CORRUPT_JSON": root / "corrupt.json",
        "WRONG_TYPE_RECIPE": root / "wrong_type.yaml",
        "NEGATIVE_RECIPE": root / "negative.yaml",
        "TRUNCATED_CKPT": root / "truncated.pt",
        "SUPERNET": tiny_supernet,
    }


def test_every_command_is_in_the_table_of_bad_inputs(capsys):
    """Each command ``nas --help`` lists is given bad input below (a new command needs its rows)."""
    with pytest.raises(SystemExit):
        main(["--help"])
    commands = set(re.findall(r"^    ([a-z][a-z-]*)(?:\s|$)", capsys.readouterr().out, flags=re.MULTILINE))
    assert {"train-supernet", "search", "compare"} <= commands  # the listing was read
    assert commands == {argv[0] for argv, _ in BAD_INPUTS}


@pytest.mark.parametrize("argv, fragment", BAD_INPUTS, ids=[" ".join(a)[:60] for a, _ in BAD_INPUTS])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(argv, fragment, bad_files, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [str(bad_files[a]) if a in bad_files else a for a in argv]
    fragment = str(bad_files.get(fragment, fragment))
    tables = tables_root()  # the tests' copy of latency_tables (conftest.py)
    before, tables_before = _files(tmp_path), _files(tables)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    assert code == 2
    _one_line_error(capsys, fragment)
    assert _files(tmp_path) == before, "a failing command left files behind"
    assert _files(tables) == tables_before


# --- resumes and caches never mix settings ------------------------------------------------------------


def test_search_resume_refuses_other_settings(tiny_supernet, tiny_search, tmp_path, capsys):
    out = copy_run(tiny_search, tmp_path / "s")
    assert main(search_argv(tiny_supernet, out, "--bn-calib-batches", "2", "--resume")) == 2
    _one_line_error(capsys, "cannot resume with a different bn_calib_batches (1 in the run, 2 now)")
    config = (out / "config.yaml").read_text()
    assert "supernet_digest:" in config and "data_fingerprint: digits" in config and "split_seed: 0" in config
    # Another supernet under the same path: its digest differs, so the search refuses to continue.
    other = copy_run(tiny_supernet, tmp_path / "other")
    state = torch.load(other / "checkpoint.pt", weights_only=True)
    state["model"] = {k: v + 1 if v.is_floating_point() else v for k, v in state["model"].items()}
    torch.save(state, other / "checkpoint.pt")
    assert main(search_argv(other, out, "--resume")) == 2
    _one_line_error(capsys, "cannot resume with a different supernet_digest")


def test_disk_cache_keys_by_context_and_survives_a_cut_line(tmp_path):
    from nas import load_space

    arch = load_space("efficientformerv2-tiny").smallest()
    path = tmp_path / "evaluations.jsonl"
    one = DiskCache(path, {"bn_calib_batches": 1})
    one.add(arch, 0.5)
    assert DiskCache(path, {"bn_calib_batches": 1}).values == {arch.digest: 0.5}
    assert DiskCache(path, {"bn_calib_batches": 2}).values == {}  # computed another way: not reused
    with path.open("a") as handle:
        handle.write('{"digest": "abc", "accu')  # killed mid-write
    again = DiskCache(path, {"bn_calib_batches": 1})
    assert again.values == {arch.digest: 0.5}
    again.add(arch, 0.5)
    assert all(json.loads(line) for line in path.read_text().splitlines())  # the next line starts clean


def test_training_resume_refuses_other_recipe_or_data(real_images, tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(real_images, data)
    run = tmp_path / "run"
    argv = [
        "train",
        "efficientformerv2_s0",
        "--data",
        str(data),
        "--run",
        str(run),
        "--img-size",
        "32",
        "--epochs",
        "2",
        "--batch-size",
        "16",
        "--max-steps",
        "1",
    ]
    assert main(argv) == 0
    capsys.readouterr()
    assert main([*argv, "--resume", "--lr", "0.5"]) == 2
    _one_line_error(capsys, "cannot resume with a different recipe.lr")
    # A setting that does not change the result may change.
    assert main([*argv[:-1], "2", "--resume", "--log-every", "7"]) == 0
    capsys.readouterr()
    extra = data / "train" / "leaves" / "extra.jpg"
    shutil.copy(sorted((data / "train" / "leaves").iterdir())[0], extra)
    assert main([*argv[:-1], "3", "--resume"]) == 2
    _one_line_error(capsys, "cannot resume with a different data_fingerprint")


# --- one writer per run folder ------------------------------------------------------------------------


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_lock_names_a_live_holder_and_takes_over_a_dead_one(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from nas.runs.lock import RunLock\n"
            f"RunLock({str(tmp_path)!r}, 'search').acquire()\n"
            "print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(NasError, match=rf"is in use by pid {holder.pid} on .*\(search, since"):
            RunLock(tmp_path, "search").acquire()
    finally:
        holder.kill()
        holder.wait()
    with RunLock(tmp_path, "search") as lock:  # the holder was killed: its lock is stale
        assert json.loads((tmp_path / ".lock").read_text())["pid"] == os.getpid() and lock.held
    assert not (tmp_path / ".lock").exists()
    # A dead pid written by hand is stale too; a holder on another host is not ours to judge.
    (tmp_path / ".lock").write_text(json.dumps({"pid": _dead_pid(), "host": os.uname().nodename}))
    RunLock(tmp_path).acquire().release()
    (tmp_path / ".lock").write_text(json.dumps({"pid": 1, "host": "elsewhere", "command": "train"}))
    with pytest.raises(NasError, match="on elsewhere .*delete .*lock if that process is gone"):
        RunLock(tmp_path).acquire()
    assert not list(tmp_path.glob(".lock.*"))  # no temporary files left


def test_second_command_on_a_busy_run_folder_exits_2(tmp_path, capsys):
    run = tmp_path / "run"
    args = [
        "train-supernet",
        "efficientformerv2",
        "--space",
        "efficientformerv2-tiny",
        "--run",
        str(run),
        "--epochs",
        "3",
        "--batch-size",
        "32",
        "--bn-calib-batches",
        "1",
        "--checkpoint-every",
        "2",
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    first = subprocess.Popen(
        [sys.executable, "-m", "nas", *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.time() + 120
        while not (run / "checkpoint.pt").exists() and time.time() < deadline:
            time.sleep(0.2)
        assert main([*args, "--resume"]) == 2  # the second command: this process
        line = _one_line_error(capsys, f"is in use by pid {first.pid}")
        assert "train-supernet" in line
    finally:
        first.kill()
        first.wait()
    # The holder was SIGKILLed: its lock is stale and the resumed run takes it over.
    assert main([*args, "--resume", "--max-steps", "6"]) == 0
    assert not (run / ".lock").exists()
