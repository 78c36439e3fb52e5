"""One resolution (issue 36, point 4): ``nas search``, ``nas sample`` and ``nas compare`` price cost at
the size the networks train at unless told otherwise, say both sizes, warn in one line where they
differ, and build a phone's predicted table missing at that size on first use."""

import json
import logging
import shutil
from pathlib import Path

import pytest
import yaml

from nas import ArchConfig, LatencyTable, load_space
from nas.cli import main
from nas.core.errors import NasError
from nas.latency import predicted as predicted_module
from nas.latency import table_path
from nas.latency.predicted import keep, table_for
from nas.search.objective import cost_function

SPACE = "efficientformerv2-tiny"
WARNING = "pricing at 224 px but the supernet trained at 32 px: the search trades 224 px cost for 32 px accuracy"


def _warnings(caplog) -> list[str]:
    """The resolution warnings logged since the last ``caplog.clear()``."""
    found = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "pricing at" in r.getMessage()]
    caplog.clear()
    return found


@pytest.fixture
def tables(tmp_path, monkeypatch):
    """A private copy of the shipped tables (with the published latencies the cost models come from)."""
    root = shutil.copytree(Path(__file__).resolve().parents[1] / "latency_tables", tmp_path / "tables")
    monkeypatch.setenv("NAS_LATENCY_DIR", str(root))
    return root


def test_the_tiny_supernet_trained_at_32_px(tiny_supernet):
    config = yaml.safe_load((tiny_supernet / "config.yaml").read_text())
    assert config["recipe"]["img_size"] == 32  # the digits' recipe: what every default below resolves to


def test_search_prices_at_the_supernet_resolution_by_default(tiny_search):
    config = yaml.safe_load((tiny_search / "config.yaml").read_text())
    result = json.loads((tiny_search / "result.json").read_text())
    assert config["img_size"] == config["train_img_size"] == 32
    assert (result["img_size"], result["train_img_size"]) == (32, 32)
    assert (
        "Resolution: cost priced at 32 px; the supernet trained and scores at 32 px."
        in (tiny_search / "summary.md").read_text()
    )
    # The MES it reports is the one the 32 px table gives (not the 224 px one).
    space = load_space(SPACE)
    arch = ArchConfig.load(tiny_search / "arch.yaml")
    at_32 = cost_function(LatencyTable.load("iphone12", space, 32), 32, 10)(arch)
    at_224 = cost_function(LatencyTable.load("iphone12", space, 224), 224, 10)(arch)
    assert result["mes"] == pytest.approx(at_32.mes) and at_32.mes != pytest.approx(at_224.mes)


def test_search_priced_at_another_size_warns_once_and_a_resume_keeps_it(tiny_supernet, tmp_path, capsys, caplog):
    run = tmp_path / "search"
    argv = ["search", "--supernet", str(tiny_supernet), "--objective", "params", "--target", "1e9"]
    argv += [
        "--strategy",
        "random",
        "--set",
        "evaluations=2",
        "--set",
        "tolerance=null",
        "--search-images",
        "20",
        "--bn-calib-batches",
        "1",
    ]
    argv += ["--run", str(run)]
    assert main([*argv, "--img-size", "224"]) == 0
    out = capsys.readouterr().out
    assert _warnings(caplog) == [WARNING]
    assert "resolution   cost priced at 224 px; the supernet trained and scores at 32 px" in out
    result = json.loads((run / "result.json").read_text())
    assert (result["img_size"], result["train_img_size"]) == (224, 32)
    # Resumed without --img-size: it keeps the 224 px it recorded (no silent change to 32) ...
    assert main([*argv, "--resume"]) == 0
    assert yaml.safe_load((run / "config.yaml").read_text())["img_size"] == 224
    assert _warnings(caplog) == [WARNING]
    # ... and another size is refused, in one line.
    assert main([*argv, "--resume", "--img-size", "32"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "cannot resume with a different img_size (224 in the run, 32 now)" in err[-1]


def test_sample_prices_at_the_supernet_or_recipe_resolution(tiny_supernet, tmp_path, capsys, caplog):
    base = ["sample", "--objective", "params", "--target", "5e5", "--tolerance", "0.5", "-n", "1", "--json"]
    assert main([*base, "--supernet", str(tiny_supernet), "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert (json.loads(out)["img_size"], json.loads(out)["train_img_size"]) == (32, 32) and not _warnings(caplog)
    saved = yaml.safe_load((tmp_path / "a" / "config.yaml").read_text())
    assert (saved["space"], saved["img_size"], saved["train_img_size"], saved["num_classes"]) == (SPACE, 32, 32, 10)

    assert main([*base, "--space", SPACE, "--recipe", "demo", "--out", str(tmp_path / "b")]) == 0
    assert json.loads(capsys.readouterr().out)["img_size"] == 32

    text = [a for a in base if a != "--json"]
    assert main([*text, "--space", SPACE, "--out", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert "resolution: cost priced at 224 px (the default: neither --supernet nor --recipe says" in out

    assert main([*text, "--supernet", str(tiny_supernet), "--img-size", "224", "--out", str(tmp_path / "d")]) == 0
    assert "resolution: cost priced at 224 px; trained at 32 px" in capsys.readouterr().out
    assert _warnings(caplog) == [
        "pricing at 224 px but the networks train at 32 px: the sample trades 224 px cost for 32 px accuracy"
    ]

    assert main([*base, "--out", str(tmp_path / "e")]) == 2
    assert "needs --space or --supernet" in capsys.readouterr().err
    assert main([*base, "--supernet", str(tiny_supernet), "--space", "swiftformer", "--out", "f"]) == 2
    assert "does not match the supernet run's space" in capsys.readouterr().err


def test_compare_prices_at_the_supernet_resolution_and_says_both(tiny_comparison):
    plan = json.loads((tiny_comparison / "plan.json").read_text())
    assert plan["config"]["img_size"] == plan["config"]["recipe"]["img_size"] == 32
    result = json.loads((tiny_comparison / "result.json").read_text())
    assert result["sources"]["resolution"] == "cost priced at 32 px; trained and scored at 32 px"
    assert (
        "- resolution: cost priced at 32 px; trained and scored at 32 px"
        in (tiny_comparison / "compare.md").read_text()
    )


def test_compare_priced_at_another_size_warns_once_and_a_resume_keeps_it(tiny_search, tmp_path, capsys, caplog):
    out = tmp_path / "cmp"
    argv = ["compare", "--searched", str(tiny_search / "arch.yaml"), "--supernet", "none", "--random", "1"]
    argv += ["--objective", "params", "--img-size", "32", "--max-steps", "1", "--epochs", "1", "--batch-size", "32"]
    argv += ["--eval-batch-size", "128", "--out", str(out), "--json"]
    assert main([*argv, "--price-size", "224"]) == 0
    printed = capsys.readouterr().out
    assert _warnings(caplog) == [
        "pricing at 224 px but the networks train and are scored at 32 px: the comparison trades 224 px cost "
        "for 32 px accuracy"
    ]
    assert json.loads(printed)["sources"]["resolution"] == "cost priced at 224 px; trained and scored at 32 px"
    assert json.loads((out / "plan.json").read_text())["config"]["img_size"] == 224
    # Resumed without --price-size: the recorded 224 px stands (the default, 32 px, would be refused).
    assert main([*argv, "--resume"]) == 0
    assert json.loads(capsys.readouterr().out)["sources"]["resolution"].startswith("cost priced at 224 px")
    assert main([*argv, "--resume", "--price-size", "32"]) == 2
    assert "different img_size (224 in the run, 32 now)" in capsys.readouterr().err


def test_a_missing_predicted_table_is_built_on_first_use_and_reused(tables, monkeypatch, caplog, tmp_path, capsys):
    path = table_path("iphone12", SPACE, 48)
    assert not path.exists()
    built = table_for("iphone12", SPACE, 48)
    assert built.path is None and not path.exists()  # not saved until the command has checked everything
    assert built.source == "predicted" and built.header.img_size == 48 and built.header.num_classes == 1000
    # The same cost model as the shipped 224 px table (read from its header, not refitted).
    assert built.header.method == LatencyTable.load("iphone12", SPACE, 224).header.method
    with caplog.at_level(logging.INFO, logger="nas.latency.predicted"):
        assert keep(built).path == path and path.exists()
    assert [r.getMessage() for r in caplog.records] == [
        f"built the predicted iphone12 table of {SPACE} at 48 px: {path}"
    ]

    # The second time it is read, not built.
    def refuse(*args, **kwargs):
        raise AssertionError("built again")

    monkeypatch.setattr(predicted_module, "build_predicted_table", refuse)
    again = table_for("iphone12", SPACE, 48)
    assert again.path == path and again.entries == pytest.approx(built.entries)

    # Through a command: a sample at a new size builds it (and says so with -v) ...
    argv = ["sample", "--space", SPACE, "--objective", "mes", "--target", "600", "--device", "pixel6"]
    monkeypatch.undo()
    monkeypatch.setenv("NAS_LATENCY_DIR", str(tables))
    assert main([*argv, "--img-size", "40", "-n", "1", "--tolerance", "0.5", "--out", str(tmp_path / "s")]) == 0
    assert table_path("pixel6", SPACE, 40).exists()
    # ... but a command refused for its input leaves none behind.
    assert main([*argv, "--target", "1e6", "--img-size", "56", "--out", str(tmp_path / "t")]) == 2
    assert "out of reach" in capsys.readouterr().err and not table_path("pixel6", SPACE, 56).exists()


def test_a_measured_or_imported_device_missing_a_size_is_one_line_naming_the_sizes(tables, capsys):
    with pytest.raises(NasError, match=r"iphone12 has tables of efficientformerv2-tiny at 224 px"):
        LatencyTable.load("iphone12", SPACE, 40)  # loading alone never builds
    with pytest.raises(NasError, match=r"cpu has no table of efficientformerv2-tiny at any size"):
        table_for("cpu", SPACE, 32)  # measured here: minutes, never built unasked
    # A phone whose table was imported from timings on the phone: no predicted one in its place.
    shipped = json.loads(table_path("iphone14", SPACE, 224).read_text())
    shipped["header"]["source"] = "imported"
    table_path("iphone14", SPACE, 224).write_text(json.dumps(shipped))
    argv = ["sample", "--space", SPACE, "--objective", "latency", "--target", "1", "--device", "iphone14"]
    assert main([*argv, "--img-size", "32", "--out", "o"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "at 224 px from timings on a phone" in err[0] and "--img-size" in err[0]
    assert not table_path("iphone14", SPACE, 32).exists()


def test_the_resolution_helpers():
    from nas.search.input_size import price_size

    assert price_size(None) == 224 and price_size(64) == 64
    assert price_size(None, recorded=224, trained=32) == 224 and price_size(None, trained=32) == 32
    assert price_size(48, recorded=224, trained=32) == 48


def test_the_warning_is_one_line_on_stderr(tmp_path):
    """What a user sees: the command's output on stdout, one warning line on stderr."""
    import subprocess
    import sys

    argv = ["sample", "--space", SPACE, "--recipe", "demo", "--img-size", "224", "--objective", "params"]
    argv += ["--target", "5e5", "--tolerance", "0.5", "-n", "1", "--out", str(tmp_path / "o")]
    done = subprocess.run([sys.executable, "-m", "nas", *argv], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines() == [
        "WARNING nas.search.input_size: pricing at 224 px but the networks train at 32 px: the sample trades "
        "224 px cost for 32 px accuracy"
    ]
    assert "resolution: cost priced at 224 px; trained at 32 px" in done.stdout
