import json
import random

import numpy as np
import pytest
import torch
from helpers import argv

from nas import NasError, load_space
from nas.cli import main
from nas.latency import LatencyTable, table_path
from nas.latency.costmodel import fit_cost_model
from nas.latency.graphs import block_ops, timm_ops
from nas.latency.measure import MeasurementPlan, Timer, TimingConfig, build_measured_table, fit_calibration
from nas.latency.predicted import predict_timm
from nas.metrics.signatures import block_input, block_signatures, reachable_signatures
from supernets import get_family

FAST = TimingConfig(warmup=1, min_repeats=3, min_seconds=0.0, busy_retries=0)  # the guard: its own test


@pytest.mark.parametrize("space_name", ["efficientformerv2-tiny", "efficientformer", "swiftformer"])
def test_enumeration_covers_every_subnetwork(space_name):
    space = load_space(space_name)
    sigs = reachable_signatures(space, 64, 10)
    assert len(sigs) == len(set(sigs))
    keys = {s.key() for s in sigs}
    rng = random.Random(0)
    for arch in [space.sample(rng) for _ in range(30)] + [space.largest(), space.smallest()]:
        assert {s.key() for s in block_signatures(arch, 64, 10)} <= keys


@pytest.fixture(scope="module")
def tiny_table(tmp_path_factory):
    out = tmp_path_factory.mktemp("tables") / "cpu.json"
    return build_measured_table(
        "cpu",
        load_space("efficientformerv2-tiny"),
        img_size=32,
        num_classes=10,
        plan=MeasurementPlan(FAST, calibration_archs=3, check_random=1),
        out=out,
        progress=False,
    )


def test_measured_table_header_and_lookup(tiny_table):
    h = tiny_table.header
    assert (h.source, h.device, h.img_size, h.num_classes, h.threads, h.complete) == (
        "measured",
        "cpu",
        32,
        10,
        1,
        True,
    )
    assert h.tool_versions["torch"] == torch.__version__
    assert h.method["calibration"]["scale"] > 0
    assert 0 <= h.error["value"] < 1 and "efficientformerv2_tiny_max" in h.error["checked_on"]
    space = load_space("efficientformerv2-tiny")
    arch = space.named("efficientformerv2_tiny_max")
    assert tiny_table.latency(arch) == pytest.approx(
        sum(tiny_table.entries[s.key()] for s in block_signatures(arch, 32, 10))
    )


def test_table_round_trip_and_checks(tiny_table, tmp_path):
    path = tiny_table.save(tmp_path / "t.json")
    again = LatencyTable.load("cpu", "efficientformerv2-tiny", img_size=32, path=path)
    assert again.header == tiny_table.header and again.entries == pytest.approx(tiny_table.entries)
    with pytest.raises(NasError, match="does not match: img_size 32"):
        LatencyTable.load("cpu", "efficientformerv2-tiny", img_size=64, path=path)
    with pytest.raises(NasError, match="unknown device 'iphone99'"):
        LatencyTable.load("iphone99", "efficientformerv2-tiny", path=path)
    broken = tmp_path / "broken.json"
    broken.write_text(path.read_text()[:200])
    with pytest.raises(NasError, match="corrupt latency table"):
        LatencyTable.read(broken)
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"hello": 1}))
    with pytest.raises(NasError, match="not a latency table"):
        LatencyTable.read(foreign)


def test_missing_entry_names_the_key_and_the_command(tiny_table):
    arch = load_space("efficientformerv2-tiny").smallest()
    sigs = block_signatures(arch, 32, 10)
    partial = LatencyTable(tiny_table.header, {k: v for k, v in tiny_table.entries.items() if k != sigs[3].key()})
    with pytest.raises(NasError) as info:
        partial.latency(arch)
    assert sigs[3].key() in str(info.value)
    assert "nas build-table --device cpu --space efficientformerv2-tiny --img-size 32" in str(info.value)


def test_interrupted_build_resumes(tiny_table, tmp_path, monkeypatch):
    space = load_space("efficientformerv2-tiny")
    half = dict(list(tiny_table.entries.items())[: len(tiny_table.entries) // 2])
    from dataclasses import replace

    out = LatencyTable(replace(tiny_table.header, complete=False), half).save(tmp_path / "partial.json")
    with pytest.raises(NasError, match="table is incomplete"):
        LatencyTable.load("cpu", space, 32, path=out)
    with pytest.raises(NasError, match="pass --resume"):
        build_measured_table("cpu", space, 32, 10, MeasurementPlan(FAST), out=out, progress=False)
    timed = []
    original = Timer.time

    def counting(self, module, x):
        timed.append(type(module).__name__)
        return original(self, module, x)

    monkeypatch.setattr(Timer, "time", counting)
    table = build_measured_table(
        "cpu", space, 32, 10, MeasurementPlan(FAST, 1, 0), out=out, resume=True, progress=False
    )
    blocks_timed = len(timed) - (1 + 2) - len(space.members)  # minus calibration and check networks
    assert blocks_timed == len(tiny_table.entries) - len(half)
    assert table.header.complete and set(table.entries) == set(tiny_table.entries)


def test_calibration_keeps_the_blocks_order_when_the_timings_do_not_follow_them(caplog):
    # CI once timed a micro space's largest network below its smallest: a scale-and-offset fit then
    # weighed the blocks at 0 and priced every network alike (a search target became "out of reach").
    sums = np.array([0.050, 0.060, 0.070])
    following = sums * 1.2 + 0.01
    scale, offset, fit = fit_calibration(sums, following)
    assert (round(scale, 6), round(offset, 6), fit) == (1.2, 0.01, "scale and offset")
    backwards = np.array([0.084, 0.083, 0.082])
    with caplog.at_level("WARNING", logger="nas.latency.measure"):
        scale, offset, fit = fit_calibration(sums, backwards)
    assert scale > 1 and offset == 0 and fit.startswith("scale only")
    assert "do not follow their block sums" in caplog.text
    priced = scale * sums + offset
    assert priced[0] < priced[1] < priced[2] and np.all(np.abs(priced - backwards) / backwards < 0.25)


def test_recalibrate_keeps_the_block_timings(tiny_table, tmp_path):
    """--recalibrate times the calibration and check networks again and rescales the same block timings."""
    space = load_space("efficientformerv2-tiny")
    out = tiny_table.save(tmp_path / "cpu.json")
    plan = MeasurementPlan(FAST, calibration_archs=1, check_random=0)
    table = build_measured_table("cpu", space, 32, 10, plan, out=out, progress=False, recalibrate=True)
    old, new = tiny_table.header.method["calibration"], table.header.method["calibration"]
    assert table.header.complete and set(table.entries) == set(tiny_table.entries)
    for key, ms in tiny_table.entries.items():
        if not key.startswith("head:"):
            assert table.entries[key] / ms == pytest.approx(new["scale"] / old["scale"], rel=1e-4)
    assert table.header.method["recalibrated"]["previous_calibration"] == old
    assert len(new["end_to_end_ms"]) == len(new["fit_on"]) == 3
    assert table.header.error["checked_on"] == list(space.members)
    assert LatencyTable.read(out).entries == table.entries
    with pytest.raises(NasError, match="does not exist"):
        build_measured_table("cpu", space, 32, 10, plan, out=tmp_path / "none.json", recalibrate=True)
    with pytest.raises(NasError, match="cannot recalibrate here: it was built for cpu/efficientformerv2-tiny at 32"):
        build_measured_table("cpu", space, 64, 10, plan, out=out, progress=False, recalibrate=True)


def test_busy_guard_times_again_while_the_reference_runs_slow(caplog):
    """A timing bracketed by a reference program slower than 1.25x its fastest is taken again, then kept
    and counted; the guard's record and words say so."""
    space = load_space("efficientformerv2-tiny")
    sig = next(s for s in reachable_signatures(space, 32, 10) if s.kind == "ffn")
    block, x = get_family(space.family).build_block(sig), block_input(space.family, sig)
    timer = Timer("cpu", TimingConfig(warmup=1, min_repeats=3, min_seconds=0.0, busy_retries=2, busy_wait_s=0.0))
    assert timer.time(block, x) > 0 and timer.reference_floor_ms > 0
    # As if the reference had once run 10x faster: every bracket now reads as a busy machine. (The first
    # timing may itself have been retimed on a loaded test machine: only the forced one is counted.)
    timer.reference_floor_ms /= 10
    timer.retimed = timer.kept_busy = 0
    caplog.clear()
    with caplog.at_level("WARNING", logger="nas.latency.measure"):
        assert timer.time(block, x) > 0
    assert (timer.retimed, timer.kept_busy) == (2, 1)
    assert sum("the machine is busy" in r.getMessage() for r in caplog.records) == 2
    assert timer.busy_words() == (
        "2 timings taken again while the machine was busy, 1 kept although it stayed busy: read them as upper bounds"
    )
    assert timer.busy_record()["retimed"] == 2
    assert Timer("cpu", FAST).busy_words() is None


def test_onnxruntime_timer_times_a_block():
    space = load_space("efficientformerv2-tiny")
    sig = next(s for s in reachable_signatures(space, 32, 10) if s.kind == "mhsa_ffn")
    block = get_family(space.family).build_block(sig)
    assert Timer("onnxruntime-cpu", FAST).time(block, block_input(space.family, sig)) > 0


@pytest.mark.slow  # nested model selection over every published fact
def test_phone_predictor_fit_on_published_facts():
    model = fit_cost_model("iphone12")
    # Both iPhone 12 campaigns, each with its factor; the one the table describes is the reference.
    assert len(model.fitted_on) == 28
    assert model.campaign_factors["iphone12/2212.08059-tab2"] == 1.0 and len(model.campaign_factors) == 2
    family, one = model.held_out["family"], model.held_out["model"]
    assert family["n_models"] == one["n_models"] == 28 and -1 < family["signed_mean"] < family["mean"] + 1e-9
    assert one["mean"] < model.macs_only_loo_mean
    # The independent test families are never fitted, and are reported on their own.
    assert set(model.test["families"]) == {"fastvit", "mobileone", "nextvit", "repvit"} and model.test["n_models"] == 20
    assert not {"mobileone_s0", "fastvit_t8", "repvit_m0_9", "nextvit_small"} & set(model.fitted_on)
    s0 = load_space("efficientformerv2").named("efficientformerv2_s0")
    table_sum = sum(
        model.predict_ops(block_ops("efficientformerv2", s), intercept=s.kind == "head") for s in block_signatures(s0)
    )
    assert table_sum == pytest.approx(predict_timm("efficientformerv2_s0", "iphone12", model=model), rel=1e-9)
    lo, hi = model.interval(table_sum)
    assert lo < table_sum < hi and lo < 0.9 < hi  # published: 0.9 ms
    # The shipped tables record this model; reading it back prices the same.
    from nas.latency.predicted import cost_model_from_table

    shipped = cost_model_from_table(LatencyTable.load("iphone12", "efficientformerv2", 224))
    assert shipped.predict_ops(timm_ops("efficientformerv2_s0")) == pytest.approx(table_sum, rel=1e-4)


@pytest.mark.slow  # every published row priced at its own input size: 12 s
def test_published_rows_are_priced_at_their_papers_resolution():
    """Each published row is priced at the input its paper measured: our MACs match the paper's GMACs
    column (rounded to 0.1). EfficientNet-B3/B5 (300/456 px) and MobileViT-v2 (256 px) were once
    priced at 224 px, a quarter of B5's MACs."""
    import csv

    from nas.latency.graphs import timm_network
    from nas.latency.published import published_csv

    checked = 0
    for row in csv.DictReader(published_csv().open(encoding="utf-8")):
        if not row["timm_model"] or not row["gmacs"]:
            continue
        ours = sum(op.macs for op in timm_network(row["timm_model"], int(row["img_size"])).ops) / 1e9
        published = float(row["gmacs"])
        assert abs(ours - published) <= 0.05 + 0.15 * published, (row["device"], row["paper_model"], ours)
        checked += 1
    assert checked >= 90


def test_engine_terms_and_ridge():
    from nas.latency.fit import fit_weights
    from nas.latency.opcount import OpCost
    from nas.latency.terms import OFF_CHIP, ON_CHIP_ELEMENTS, Candidate

    big, small = ON_CHIP_ELEMENTS + 1, ON_CHIP_ELEMENTS
    ops = [
        OpCost("conv", 10**9, 3 * big, "convolution", big),
        OpCost("elem", 0, 2 * small, "gelu", small),
        OpCost("reduce", 0, 2 * big, "native_layer_norm", big),
    ]
    features = Candidate("matmul|attention", 0.0, ("norms", OFF_CHIP, "memory traffic")).features(ops)
    # GMACs of matmuls, none of attention; LayerNorm elements; only outputs above the budget are off-chip.
    assert features == pytest.approx([1.0, 0.0, 2 * big / 1e7, 2 * big / 1e7, (2 * small + 2 * big) / 1e7])
    # Noise-free latencies: no ridge recovers the weights; a ridge shrinks them and keeps them non-negative.
    rng = np.random.default_rng(0)
    X = np.hstack([rng.uniform(0.1, 2.0, (30, 3)), np.ones((30, 1))])
    truth = np.array([0.5, 2.0, 0.0, 0.3])
    y = X @ truth
    w, factors = fit_weights(X, y, ["a"] * 30, "a")
    assert w == pytest.approx(truth, abs=1e-6) and factors == {"a": 1.0}
    shrunk, _ = fit_weights(X, y, ["a"] * 30, "a", ridge=1.0)
    assert (shrunk >= 0).all() and shrunk[:3].sum() < truth[:3].sum() and shrunk[3] > truth[3]
    # One network that runs 3x slower than its features say (a family unlike the others): the
    # least-absolute-error fit keeps the other 29 right; least squares (one round) bends towards it.
    odd = y.copy()
    odd[0] *= 3
    for rounds, worst in ((8, 0.005), (1, 0.02)):
        w, _ = fit_weights(X, odd, ["a"] * 30, "a", rounds=rounds)
        error = np.abs(X[1:] @ w / y[1:] - 1).max()
        assert (error < worst) if rounds > 1 else (error > worst)


def test_fusable_timm_models_are_priced_fused(caplog, monkeypatch):
    import timm
    from timm.models import reparameterize_model

    from nas.latency import graphs

    fused = reparameterize_model(timm.create_model("mobileone_s0", pretrained=False).eval())
    net = graphs.timm_network("mobileone_s0")
    assert net.fusion == "fused" and net.params == sum(p.numel() for p in fused.parameters()) == 2_078_504
    assert graphs.timm_network("mobilenetv2_100").fusion == "nothing to fuse"

    def broken(model, inplace=False):
        raise RuntimeError("cannot fuse this")

    monkeypatch.setattr(timm.models, "reparameterize_model", broken)
    graphs.timm_network.cache_clear()
    try:
        with caplog.at_level("WARNING"):
            net = graphs.timm_network("mobileone_s0")
        assert net.fusion == "not fused: RuntimeError: cannot fuse this" and net.params == 5_293_272
        assert "cannot re-parameterise" in caplog.text
    finally:
        graphs.timm_network.cache_clear()


def test_conformal_interval_covers_its_level():
    from nas.latency.costmodel import conformal_factors

    assert conformal_factors(np.log([0.5, 1.0, 2.0, 4.0]), level=0.5) == pytest.approx((0.5, 4.0))
    rng = np.random.default_rng(0)
    lo, hi = conformal_factors(rng.normal(0, 0.3, 400))
    fresh = np.exp(rng.normal(0, 0.3, 20_000))
    assert np.mean((fresh >= lo) & (fresh <= hi)) == pytest.approx(0.8, abs=0.04)


@pytest.mark.slow  # fits the phone model on published facts for every shot count
def test_few_shot_calibration():
    from dataclasses import replace

    from nas.latency.fewshot import calibrate
    from nas.latency.published import Fact

    model = fit_cost_model("iphone12")
    names = ["mobilenetv2_100", "efficientformerv2_s0", "efficientformer_l1", "deit_tiny_patch16_224", "resnet18"]
    ops = {n: timm_ops(n) for n in names}
    # A phone 1.5x slower than the prior everywhere: one timed network recovers it exactly.
    slow = [Fact(n, 1.5 * model.predict_ops(ops[n]), "test", ops[n]) for n in names]
    one = calibrate(model, slow[:1])
    assert one.calibration["k"] == 1 and one.calibration["method"] == "scale"
    for fact in slow:
        assert one.predict_ops(fact.ops) == pytest.approx(fact.latency_ms, rel=1e-6)
    # A phone whose weights differ from the prior's: five networks bring the predictions closer.
    other = replace(model, weights=tuple(w * (3.0 if i == 0 else 0.7) for i, w in enumerate(model.weights)))
    truth = [Fact(n, other.predict_ops(ops[n]), "test", ops[n]) for n in names]
    five = calibrate(model, truth)

    def error(m):
        return np.mean([abs(m.predict_ops(f.ops) / f.latency_ms - 1) for f in truth])

    assert error(five) < error(calibrate(model, truth[:1])) and error(five) < error(model)
    assert five.calibration["leave_one_out"]["n_models"] == 5 and five.interval_factors == model.interval_factors
    # Three or more timings fit a * prior + b * MACs + c: a phone the prior fits up to scale is
    # recovered exactly (b = c = 0) ...
    scaled = calibrate(model, slow)
    assert scaled.calibration["method"].startswith("1.5 x prior + 0 ms/GMAC")
    assert scaled.predict_ops(timm_ops("resnet50")) == pytest.approx(1.5 * model.predict_ops(timm_ops("resnet50")))
    # ... and a phone whose latency is MACs plus an overhead, unlike the prior, drops the prior (a = 0)
    # and then prices every network right.
    macs = {n: sum(op.macs for op in ops[n]) / 1e9 for n in names}
    plain = [Fact(n, 0.2 + 3.0 * macs[n], "test", ops[n]) for n in names]
    fitted = calibrate(model, plain)
    assert fitted.calibration["method"] == "0 x prior + 3 ms/GMAC x MACs + 0.2 ms"
    assert fitted.calibration["leave_one_out"]["mean"] == pytest.approx(0, abs=1e-6)
    assert fitted.predict_ops(timm_ops("resnet50")) == pytest.approx(0.2 + 3.0 * 4.09, rel=0.01)
    # The calibrated model is a cost model like any other: its header reads back to the same model.
    assert "all MACs" in fitted.summary()["hardware_terms"]


@pytest.mark.parametrize("device", ["iphone12", "iphone14", "pixel6"])
@pytest.mark.parametrize("space_name", ["efficientformerv2", "efficientformer", "swiftformer"])
def test_shipped_predicted_tables(device, space_name):
    space = load_space(space_name)
    table = LatencyTable.load(device, space, 224)
    assert table.path == table_path(device, space_name, 224)
    error = table.header.error
    assert table.source == "predicted" and "nested leave-one-family-out" in error["metric"]
    assert {"leave_one_family_out", "leave_one_model_out", "interval", "signed_mean"} <= set(error)
    lo, hi = table.interval(1.0)
    assert lo < 1.0 < hi and table.format_latency(1.0).endswith(f"{hi:.3f}, 80%)")
    assert len(table.entries) == len(reachable_signatures(space, 224, 1000))
    for arch in space.members.values():
        assert 0.1 < table.latency(arch) < 1000


def test_profile_shows_latency_source_and_mes(capsys):
    assert main(["profile", "efficientformerv2_s1", "--device", "iphone12", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["latency_source"] == "predicted" and result["latency_ms"] == pytest.approx(1.1, rel=0.35)
    assert result["mes"] == pytest.approx(100 * (result["params"] / 3e6) ** -0.5 / result["latency_ms"])
    lo, hi = result["latency_interval_ms"]
    assert lo < 1.1 < hi and lo < result["latency_ms"] < hi and result["interval_level"] == 0.8  # published: 1.1 ms
    assert main(["profile", "--timm", "resnet18", "--device", "iphone12"]) == 0
    out = capsys.readouterr().out
    assert "predicted for iphone12" in out and "leave-one-family-out" in out and ", 80%)" in out
    assert main(["profile", "--timm", "mobileone_s0", "--device", "iphone12", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["fusion"] == "fused" and result["params"] == 2_078_504
    assert result["latency_interval_ms"][0] < result["latency_ms"] < result["latency_interval_ms"][1]


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["build-table", "--device", "iphone99", "--space", "efficientformerv2"], "unknown device 'iphone99'"),
        (["build-table", "--device", "cpu", "--space", "nope"], "unknown search space 'nope'"),
        (["check-table", "--device", "iphone12", "--space", "efficientformerv2"], "cannot be timed here"),
        (["profile", "efficientformerv2_s0", "--device", "cpu", "--img-size", "77"], "no latency table for device cpu"),
        (["profile", "--timm", "no_such_model", "--device", "iphone12"], "timm cannot build 'no_such_model'"),
    ],
)
def test_bad_latency_input_is_one_line(capsys, argv, fragment):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0]


def test_export_a_block_to_core_ml(tmp_path):
    from nas.latency.onphone import BlockExport, export_blocks

    export = BlockExport(img_size=32, num_classes=10, limit=2)
    manifest = export_blocks("iphone12", load_space("efficientformerv2-tiny"), tmp_path, export, progress=False)
    blocks = [item for item in manifest["items"] if item["kind"] == "block"]
    assert len(blocks) == 2 and len(manifest["items"]) == 2  # a limited export has no whole networks
    for item in blocks:
        assert (tmp_path / item["file"] / "Manifest.json").exists()
    assert json.loads((tmp_path / "manifest.json").read_text())["items"][0]["key"] == blocks[0]["key"]
    assert (tmp_path / "measurements.csv").read_text().splitlines() == ["id,latency_ms", "b0000,", "b0001,"]
    with pytest.raises(NasError, match="iphone12 is timed through coreml, not executorch"):
        export_blocks(
            "iphone12", load_space("efficientformerv2-tiny"), tmp_path, BlockExport(limit=1, runtime="executorch")
        )
    with pytest.raises(NasError, match="cpu is measured here by `nas build-table --device cpu`"):
        export_blocks("cpu", load_space("efficientformerv2-tiny"), tmp_path, BlockExport(limit=1))


def _filled_export(tmp_path, rng_seed=0, drop=None):
    """A manifest of the whole tiny space and a CSV of plausible phone timings for it."""
    from nas.latency.onphone import plan_export, write_manifest
    from nas.latency.predicted import device_cost_model

    space = load_space("efficientformerv2-tiny")
    manifest = plan_export("iphone12", space, img_size=32, num_classes=10)
    write_manifest(manifest, tmp_path)
    model = device_cost_model("iphone12")
    rng = random.Random(rng_seed)
    rows = ["id,latency_ms"]
    for item in manifest["items"]:
        if item["id"] == drop:
            rows.append(f"{item['id']},")
            continue
        if item["kind"] == "block":
            from nas.core.signature import BlockSignature

            ms = model.predict_ops(block_ops(space.family, BlockSignature.from_key(item["key"])), intercept=False)
        else:
            ms = 1.3 * predict_timm_arch(item["arch"], model)
        rows.append(f"{item['id']},{ms * rng.uniform(0.9, 1.1) + 0.001:.5f}")
    path = tmp_path / "measurements.csv"
    path.write_text("\n".join(rows) + "\n")
    return manifest, path


def _prior():
    from nas.latency.predicted import device_cost_model

    return device_cost_model("iphone12")


def predict_timm_arch(arch_dict, model):
    from nas import ArchConfig
    from nas.latency.opcount import record_ops
    from supernets import build_static

    static = build_static(ArchConfig.from_dict(arch_dict), img_size=32, num_classes=10, device="meta")
    return model.predict_ops(record_ops(static, (1, 3, 32, 32)))


def test_import_phone_timings_and_refit(tmp_path):
    from nas.latency.onphone import import_table

    _, csv_path = _filled_export(tmp_path)
    table, refitted = import_table(csv_path, tmp_path / "manifest.json", out=tmp_path / "imported.json", refit=True)
    assert table.source == "imported" and table.header.device == "iphone12"
    assert table.header.method["calibration"]["fit_on"] == ["efficientformerv2_tiny_max", "efficientformerv2_tiny_min"]
    assert table.header.error["value"] < 0.2
    again = LatencyTable.load("iphone12", "efficientformerv2-tiny", img_size=32, path=tmp_path / "imported.json")
    assert again.latency(load_space("efficientformerv2-tiny").smallest()) > 0
    calibration = refitted.header.error["calibration"]
    assert refitted.source == "predicted" and calibration["k"] == 2 and calibration["method"] == "scale"
    assert calibration["networks"] == ["efficientformerv2_tiny_max", "efficientformerv2_tiny_min"]
    assert "efficientformerv2_tiny_max" in refitted.header.method["fitted_on"]
    # The timings were 1.3x the prior's prediction: the calibrated model prices the networks near them.
    largest = load_space("efficientformerv2-tiny").largest()
    assert refitted.latency(largest) == pytest.approx(1.3 * predict_timm_arch(largest.to_dict(), _prior()), rel=0.12)


def test_a_new_phone_from_a_few_timed_networks_alone(tmp_path, capsys):
    """`--refit` with only whole networks timed (no block): the calibrated predicted table is the device's
    table, priced near the phone's timings, and there is no imported table."""
    from nas.latency.onphone import import_table

    manifest, full_csv = _filled_export(tmp_path)
    network_ids = {item["id"] for item in manifest["items"] if item["kind"] == "network"}
    rows = full_csv.read_text().splitlines()
    kept = [rows[0]] + [r if r.split(",")[0] in network_ids else r.split(",")[0] + "," for r in rows[1:]]
    csv_path = tmp_path / "networks-only.csv"
    csv_path.write_text("\n".join(kept) + "\n")
    out = tmp_path / "tables" / "iphone12" / "efficientformerv2-tiny-32.json"
    table, refitted = import_table(csv_path, tmp_path / "manifest.json", out=out, refit=True)
    assert table is None and refitted.path == out and out.exists()
    assert refitted.source == "predicted" and refitted.header.error["calibration"]["k"] == len(network_ids) == 2
    largest = load_space("efficientformerv2-tiny").largest()
    assert refitted.latency(largest) == pytest.approx(1.3 * predict_timm_arch(largest.to_dict(), _prior()), rel=0.12)
    # Without --refit, untimed blocks are still one line that says what to do.
    with pytest.raises(NasError, match="only whole networks with --refit"):
        import_table(csv_path, tmp_path / "manifest.json", out=tmp_path / "imported.json")
    from nas.cli import main

    again = tmp_path / "cli.json"
    assert (
        main(["import-table", str(csv_path), "--manifest", str(tmp_path / "manifest.json"), "--out", str(again)]) == 2
    )
    assert not again.exists()
    argv = ["import-table", str(csv_path), "--manifest", str(tmp_path / "manifest.json"), "--out", str(again)]
    assert main([*argv, "--refit"]) == 0 and again.exists()
    assert capsys.readouterr().out.startswith(f"refit        {again}: calibrated on 2 timed networks (scale)")


def _set_row(lines, index, value):
    lines[index] = lines[index].split(",")[0] + "," + value
    return lines


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda lines: _set_row(lines, 4, "abc"), "not a number"),
        (lambda lines: _set_row(lines, 4, "-1"), "must be positive"),
        (lambda lines: lines + ["b9999,1.0"], "unknown id 'b9999'"),
        (lambda lines: ["name,ms"] + lines[1:], "columns id, latency_ms or the output of time_on_android.sh"),
    ],
)
def test_bad_phone_csv(tmp_path, mutate, fragment, capsys):
    _, csv_path = _filled_export(tmp_path)
    csv_path.write_text("\n".join(mutate(csv_path.read_text().splitlines())) + "\n")
    assert (
        main(argv("import-table {} --manifest {} --out {}", csv_path, tmp_path / "manifest.json", tmp_path / "x.json"))
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0]
    assert not (tmp_path / "x.json").exists()


def test_missing_block_rows_are_refused(tmp_path, capsys):
    _, csv_path = _filled_export(tmp_path, drop="b0007")
    assert (
        main(argv("import-table {} --manifest {} --out {}", csv_path, tmp_path / "manifest.json", tmp_path / "x.json"))
        == 2
    )
    err = capsys.readouterr().err
    assert "1 of 52 blocks have no latency_ms, e.g. b0007" in err


def test_check_table_cli_on_a_measured_table(tiny_table, tmp_path, capsys):
    path = tiny_table.save(tmp_path / "cpu.json")
    assert (
        main(
            argv(
                "check-table --device cpu --space efficientformerv2-tiny --img-size 32 --table {} "
                "--random 1 --repeats 3 --busy-retries 0 --json",
                path,
            )
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in result["rows"]] == [
        "efficientformerv2_tiny_max",
        "efficientformerv2_tiny_min",
        "random-0",
    ]
    assert result["median_ape"] == sorted(r["ape"] for r in result["rows"])[1]


def test_profile_timm_model_measured_on_cpu(capsys):
    assert main(["profile", "--timm", "efficientformerv2_s0", "--device", "cpu", "--img-size", "64", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["latency_ms"] > 0 and "measured end to end on cpu" in result["latency_source"]
