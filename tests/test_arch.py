import pytest
import yaml

from nas import ArchConfig, NasError, load_space


def test_yaml_round_trip_and_keys(tmp_path):
    arch = load_space("efficientformerv2").named("efficientformerv2_s0")
    path = arch.save(tmp_path / "a.yaml")
    assert ArchConfig.load(path) == arch
    data = yaml.safe_load(path.read_text())
    assert {"family", "depths", "widths", "attention", "hidden_widths"} <= set(data)
    assert all(isinstance(w, int) for w in data["widths"])
    assert not list(tmp_path.glob(".*.tmp")), "atomic write left a temporary file"


def test_digest_is_stable_and_content_based():
    space = load_space("efficientformerv2")
    s0 = space.named("efficientformerv2_s0")
    # Pinned: the digest names cache entries and run folders, so it must not drift between versions.
    assert s0.digest == "74a757f39cb2"
    same = ArchConfig.from_dict(s0.to_dict())
    assert same == s0 and hash(same) == hash(s0) and same.digest == s0.digest
    hidden = list(map(list, s0.hidden_widths))
    hidden[0][0] = 64
    other = s0.replace(hidden_widths=hidden)
    assert other.digest != s0.digest and other != s0


def test_lists_become_tuples_and_hashable():
    arch = ArchConfig(
        "efficientformerv2", [1, 1, 2, 2], [16, 32, 64, 128], [0, 0, 0, 0], [[16], [32], [64, 64], [128, 128]]
    )
    assert isinstance(arch.depths, tuple) and isinstance(arch.hidden_widths[2], tuple)
    assert len({arch, ArchConfig.from_dict(arch.to_dict())}) == 1


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("family: efficientformerv2\ndepths: [1]\nwidths: [16]\ncolour: red\n", "unknown key 'colour'"),
        ("family: efficientformerv2\ndepths: [1, x]\nwidths: [16, 16]\n", "depths[1]: expected an integer"),
        ("family: efficientformerv2\ndepths: [1]\n", "missing key 'widths'"),
        ("family: efficientformerv2\ndepths: [2]\nwidths: [16]\nhidden_widths: [[32]]\n", "1 entries for depth 2"),
        ("family: [efficientformerv2\n", "malformed YAML at line"),
        ("- just\n- a list\n", "expected a mapping"),
    ],
)
def test_bad_arch_yaml_is_one_line_error_naming_the_file(tmp_path, text, fragment):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(NasError) as info:
        ArchConfig.load(path)
    message = str(info.value)
    assert fragment in message
    assert str(path) in message
    assert "\n" not in message


def test_missing_file():
    with pytest.raises(NasError, match="not found"):
        ArchConfig.load("/nonexistent/arch.yaml")
