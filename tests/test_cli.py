import json
import shutil
import subprocess
import sys

import pytest

from nas import load_space
from nas.cli import main
from nas.core.errors import NasError


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_profile_named_member_json(capsys):
    code, out, err = run_cli(capsys, "profile", "efficientformerv2_s0", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["family"] == "efficientformerv2"
    assert result["params"] == 3_600_256
    assert result["macs"] == pytest.approx(0.396e9, rel=0.01)
    assert result["depths"] == [2, 2, 6, 4] and result["widths"] == [32, 48, 96, 176]


def test_profile_arch_yaml_at_another_size(capsys, tmp_path):
    arch = load_space("efficientformerv2-tiny").smallest()
    path = arch.save(tmp_path / "arch.yaml")
    code, out, err = run_cli(capsys, "profile", str(path), "--space", "efficientformerv2-tiny", "--img-size", "64")
    assert code == 0, err
    assert "params" in out and "MACs" in out and "64x64" in out


def test_space_show(capsys):
    code, out, err = run_cli(capsys, "space", "show", "efficientformerv2-tiny", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["size"] == load_space("efficientformerv2-tiny").size
    assert len(result["stages"]) == 4
    code, out, _ = run_cli(capsys, "space", "show", "efficientformerv2")
    assert "sub-networks" in out and "efficientformerv2_s0" in out


@pytest.mark.parametrize(
    "content, argv_extra, fragments",
    [
        (
            "family: efficientformerv2\ndepths: [2, 2, 6, 4]\nwidths: [32, 48, 100, 176]\nattention: [0, 0, 2, 2]\n"
            "hidden_widths: [[128, 128], [192, 192], [400, 300, 300, 300, 400, 400], [704, 528, 528, 704]]\n",
            [],
            ["widths[2] = 100", "64, 96, 120, 144, 160, 192"],
        ),
        ("family: efficientformerv2\ndepths: [2, 2\n", [], ["malformed YAML"]),
        ("family: efficientformer_v9\ndepths: [1]\nwidths: [8]\n", [], ["unknown family", "efficientformerv2"]),
    ],
)
def test_bad_arch_file_is_one_line_and_exit_2(capsys, tmp_path, content, argv_extra, fragments):
    path = tmp_path / "arch.yaml"
    path.write_text(content)
    code, out, err = run_cli(capsys, "profile", str(path), *argv_extra)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nas: error:")
    assert str(path) in lines[0] or "unknown family" in lines[0]
    for fragment in fragments:
        assert fragment in lines[0]


def test_unknown_space_and_member(capsys):
    code, _, err = run_cli(capsys, "space", "show", "nope")
    assert code == 2 and "available: efficientformer," in err and "efficientformerv2-tiny" in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = run_cli(capsys, "profile", "efficientformerv2_xl")
    assert code == 2 and "efficientformerv2_s0" in err


def test_console_script_usage_error_has_no_traceback():
    exe = shutil.which("nas")
    cmd = [exe] if exe else [sys.executable, "-m", "nas"]
    proc = subprocess.run(
        cmd + ["profile", "efficientformerv2_s0", "--img-size", "zero"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    proc = subprocess.run(cmd + ["--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "profile" in proc.stdout and "space" in proc.stdout


def test_switches_take_the_no_form_and_true_or_false():
    """A recipe's yes/no field is a switch: --x, --no-x, and the earlier --x true|false (issue 60)."""
    from nas.cli.main import build_parser
    from nas.config.recipe import recipe_from_args

    def compile_of(*flags: str) -> bool:
        args = build_parser().parse_args(["train", "efficientformerv2_s0", "--recipe", "demo", *flags])
        return recipe_from_args(args).compile

    default = compile_of()
    assert compile_of("--compile") is True and compile_of("--compile", "true") is True
    assert compile_of("--no-compile") is False and compile_of("--compile", "false") is False
    assert compile_of("--channels-last", "true") is default  # another switch leaves this one as the recipe has it


def test_recipe_fields_take_key_equals_value_as_their_flags_do(capsys):
    # One override syntax (issue 62): --set key=value is the field's flag written another way.
    from nas.cli.main import build_parser
    from nas.config.recipe import recipe_from_args

    parser = build_parser()

    def recipe(*argv):
        return recipe_from_args(parser.parse_args(["train", "efficientformerv2_s0", *argv]))

    assert recipe("--set", "lr=0.0125", "--set", "model_ema=false") == recipe("--lr", "0.0125", "--no-model-ema")
    assert recipe("--set", "lr=0.0125", "--lr", "0.0125").lr == 0.0125  # both, agreeing
    with pytest.raises(NasError, match=r"--set lr=0.5 and --lr 0.0125 disagree"):
        recipe("--set", "lr=0.5", "--lr", "0.0125")
    with pytest.raises(NasError, match=r"--set sandwich_random: not a recipe field of this command; its fields: .*lr"):
        recipe("--set", "sandwich_random=3")  # a supernet-only field: nas train has none
    with pytest.raises(NasError, match=r"--set lr=fast: expected float"):
        recipe("--set", "lr=fast")
    assert main(["train", "efficientformerv2_s0", "--set", "epochs", "--max-steps", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--set 'epochs': give key=value" in err[0]
