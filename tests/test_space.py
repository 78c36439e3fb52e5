import itertools
import random

import pytest
from timm.models.efficientformer_v2 import (
    EfficientFormer_depth,
    EfficientFormer_expansion_ratios,
    EfficientFormer_width,
)

from nas import ArchConfig, NasError, load_space
from nas.core.stage import block_slots
from nas.metrics import count_params

TIMM_KEYS = {
    "efficientformerv2_s0": ("S0", 2),
    "efficientformerv2_s1": ("S1", 2),
    "efficientformerv2_s2": ("S2", 4),
    "efficientformerv2_l": ("L", 6),
}


@pytest.mark.parametrize("name", sorted(TIMM_KEYS))
def test_named_members_are_timms_architectures(name):
    key, num_vit = TIMM_KEYS[name]
    arch = load_space("efficientformerv2").named(name)
    assert arch.depths == EfficientFormer_depth[key]
    assert arch.widths == EfficientFormer_width[key]
    assert arch.attention == (0, 0, num_vit, num_vit)
    for s, ratios in enumerate(EfficientFormer_expansion_ratios[key]):
        ratios = ratios if isinstance(ratios, tuple) else (ratios,) * arch.depths[s]
        assert arch.hidden_widths[s] == tuple(r * arch.widths[s] for r in ratios)


def test_space_shape_follows_the_paper():
    space = load_space("efficientformerv2")
    assert space.family == "efficientformerv2" and len(space.stages) == 4
    assert [st.attention for st in space.stages[:2]] == [(0,), (0,)]  # MHSA only in stages 3 and 4
    assert all(w % 8 == 0 for st in space.stages for w in st.widths)
    largest, smallest = space.largest(), space.smallest()
    assert space.contains(largest) and space.contains(smallest)
    for name in space.members:
        arch = space.named(name)
        assert all(lo <= a <= hi for lo, a, hi in zip(smallest.depths, arch.depths, largest.depths))


def test_l_space_largest_is_efficientformerv2_l():
    space = load_space("efficientformerv2-l")
    assert space.largest() == load_space("efficientformerv2").named("efficientformerv2_l")


def test_sampling_is_seeded_and_stays_in_space():
    space = load_space("efficientformerv2")
    a = [space.sample(random.Random(7)) for _ in range(3)]
    assert a[0] == a[1] == a[2]
    rng = random.Random(0)
    samples = [space.sample(rng) for _ in range(200)]
    assert all(space.contains(s) for s in samples)
    assert len({s.digest for s in samples}) == 200
    assert {s.attention[2] for s in samples} == set(space.stages[2].attention)


def _enumerate(space):
    per_stage = []
    for st in space.stages:
        options = []
        for depth, width in itertools.product(st.depths, st.widths):
            for att in st.attention_choices(depth):
                slots = block_slots(depth, att, st.max_depth)
                for ratios in itertools.product(*(st.ratios_at(slot) for slot in slots)):
                    options.append((depth, width, att, tuple(r * width for r in ratios)))
        per_stage.append(options)
    for combo in itertools.product(*per_stage):
        yield ArchConfig(
            space.family, [c[0] for c in combo], [c[1] for c in combo], [c[2] for c in combo], [c[3] for c in combo]
        )


def test_size_counts_every_distinct_subnetwork(tmp_path):
    path = tmp_path / "mini.yaml"
    path.write_text("""family: efficientformerv2
stages:
  - {depths: [1], widths: [8, 16], expansion_ratios: [2]}
  - {depths: [1, 2], widths: [16], expansion_ratios: [1, 2]}
  - {depths: [1, 2], widths: [32], expansion_ratios: [2, 4], attention: [0, 1]}
  - {depths: [1], widths: [32, 48], expansion_ratios: [2, 4], attention: [0, 1],
     max_expansion_ratios: [2]}
""")
    space = load_space(path)
    archs = list(_enumerate(space))
    assert all(space.contains(a) for a in archs)
    assert len(set(archs)) == len(archs) == space.size


def test_shrink_actions_stay_in_space_and_shrink():
    space = load_space("efficientformerv2")
    arch = space.largest()
    actions = list(space.shrink_actions(arch))
    kinds = {a.kind for a, _ in actions}
    assert kinds == {"remove_block", "remove_attention", "narrow_stage", "lower_hidden"}
    base = count_params(arch)
    for action, new in actions:
        assert space.contains(new), action
        assert count_params(new) < base, action
    assert not list(space.shrink_actions(space.smallest()))


@pytest.mark.parametrize(
    "change, fragments",
    [
        (dict(widths=(32, 48, 100, 176)), ["stage 3", "widths[2] = 100", "64, 96, 120, 144, 160, 192"]),
        (dict(depths=(2, 2, 6, 11)), ["stage 4", "depths[3] = 11", "2, 3, 4, 5, 6, 7, 8, 9, 10"]),
        (dict(attention=(0, 1, 2, 2)), ["stage 2", "attention[1] = 1", "allowed: 0"]),
    ],
)
def test_validation_names_stage_field_and_allowed_values(change, fragments):
    space = load_space("efficientformerv2")
    s0 = space.named("efficientformerv2_s0")
    if "depths" in change:
        change = dict(change, hidden_widths=s0.hidden_widths[:3] + ((704,) * 11,))
    arch = s0.replace(**change)
    with pytest.raises(NasError) as info:
        space.validate(arch, where="my.yaml")
    message = str(info.value)
    assert message.startswith("my.yaml")
    for fragment in fragments:
        assert fragment in message


def test_hidden_width_must_be_an_allowed_ratio():
    space = load_space("efficientformerv2")
    s0 = space.named("efficientformerv2_s0")
    bad = s0.replace(hidden_widths=((100, 128),) + s0.hidden_widths[1:])
    with pytest.raises(NasError, match=r"hidden_widths\[0\]\[0\] = 100 .*allowed: 32, 64, 96, 128"):
        space.validate(bad)
    # In the L space slot 4 of stage 3 allows at most ratio 3.
    lspace = load_space("efficientformerv2-l")
    l_arch = lspace.largest()
    hidden = list(l_arch.hidden_widths[2])
    hidden[4] = 4 * 192
    with pytest.raises(NasError, match="expansion ratios 1, 2, 3"):
        lspace.validate(
            l_arch.replace(hidden_widths=l_arch.hidden_widths[:2] + (tuple(hidden),) + l_arch.hidden_widths[3:])
        )


def test_unknown_space_family_and_member():
    with pytest.raises(NasError, match="unknown search space 'nope'.*efficientformerv2-tiny"):
        load_space("nope")
    with pytest.raises(NasError, match="no member 'efficientformerv2_xl'"):
        load_space("efficientformerv2").named("efficientformerv2_xl")


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("family: resnet\nstages: []\n", "unknown family 'resnet'"),
        (
            "family: efficientformerv2\nstages: [{depths: [1], widths: [8], expansion_ratios: [2], speed: 3}]\n",
            "unknown key 'speed'",
        ),
        ("family: efficientformerv2\nstages: [\n", "malformed YAML"),
    ],
)
def test_bad_space_file(tmp_path, text, fragment):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(NasError) as info:
        load_space(path)
    assert fragment in str(info.value) and str(path) in str(info.value)
