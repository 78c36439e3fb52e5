"""WebDataset shards (issue 35, point 3; issue 47): ``nas data pack``, training from shards, the seeded
per-epoch stream and its exact mid-epoch resume, shards read by index with the folder's results, and
one-line errors for corrupt members."""

import json
import tarfile
from pathlib import Path

import pytest
import torch
from helpers import copy_run

from nas.cli import main
from nas.config.recipe import Recipe, load_recipe
from nas.data import data_fingerprint, load_splits
from nas.data.shard_index import ShardIndex
from nas.data.shards import shard_eval_loader, shard_train_loader

SUPERNET = ["train-supernet", "efficientformerv2", "--space", "efficientformerv2-tiny"]
CHEAP = ["--img-size", "32", "--batch-size", "8", "--epochs", "1", "--bn-calib-batches", "1", "--eval-batch-size", "32"]


def pack(data: Path, out: Path, *extra: str) -> int:
    return main(["data", "pack", str(data), "--out", str(out), *extra])


@pytest.fixture(scope="module")
def shards(real_images, tmp_path_factory):
    """``real_images`` (120 training images of 3 classes, 30 test) packed 16 images a shard."""
    out = tmp_path_factory.mktemp("shards") / "shards"
    assert pack(real_images, out, "--shard-size", "16") == 0
    return out


def _members(shard: Path) -> dict[str, bytes]:
    with tarfile.open(shard) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def test_pack_writes_the_original_bytes_in_shuffled_shards(real_images, shards):
    index = json.loads((shards / "shards.json").read_text())
    assert index["classes"] == ["flower", "leaves", "pagoda"] and index["val_folder"] == "test"
    assert index["source_fingerprint"] == data_fingerprint(str(real_images))
    train, val = index["splits"]["train"], index["splits"]["val"]
    assert [s["samples"] for s in train] == [16] * 7 + [8] and [s["samples"] for s in val] == [16, 14]
    names = ["shards.json", "members.npz", *(s["name"] for s in train + val)]
    assert sorted(p.name for p in shards.iterdir()) == sorted(names)
    assert all((shards / s["name"]).stat().st_size == s["bytes"] for s in train + val)
    seen = {}
    for s in train:
        members = _members(shards / s["name"])
        classes = {int(v) for k, v in members.items() if k.endswith(".cls")}
        assert len(classes) > 1 or s["samples"] < 8  # shuffled: a shard mixes the classes
        seen.update(members)
    # every training image once, as its own bytes (no re-encoding), with its class index
    files = sorted((real_images / "train").glob("*/*.jpg"))
    assert len(seen) == 2 * len(files)
    for path in files:
        key = f"{path.parent.name}/{path.stem}"
        assert seen[f"{key}.jpg"] == path.read_bytes()
        assert int(seen[f"{key}.cls"]) == index["classes"].index(path.parent.name)


def test_pack_refuses_bad_input_and_replaces_only_a_previous_pack(real_images, shards, tmp_path, capsys):
    assert pack(tmp_path / "missing", tmp_path / "out") == 2
    assert pack(tmp_path, tmp_path / "out") == 2  # no train/
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    assert pack(real_images, tmp_path / "busy") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("nas: error: ") for line in err), err
    assert "data folder not found" in err[0] and "no train/" in err[1] and "not a shard folder" in err[2]
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine" and not (tmp_path / "out").exists()
    # a previous pack is replaced as a whole; the same folder and seed give the same fingerprint
    copy = tmp_path / "again"
    assert pack(real_images, copy, "--shard-size", "16") == 0
    assert data_fingerprint(str(copy)) == data_fingerprint(str(shards))
    assert pack(real_images, copy, "--shard-size", "50") == 0
    assert sorted(p.name for p in copy.iterdir()) == [
        "members.npz",
        "shards.json",
        "train-000000.tar",
        "train-000001.tar",
        "train-000002.tar",
        "val-000000.tar",
    ]
    assert data_fingerprint(str(copy)) not in (data_fingerprint(str(shards)), data_fingerprint(str(real_images)))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary folder left


def test_a_killed_pack_leaves_the_previous_pack_untouched(real_images, tmp_path, monkeypatch):
    import webdataset

    out = tmp_path / "out"
    assert pack(real_images, out, "--shard-size", "50") == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    calls = []

    def write(self, sample):
        calls.append(sample["__key__"])
        if len(calls) == 70:
            raise KeyboardInterrupt  # killed mid-pack, after two shards are written
        return real_write(self, sample)

    real_write = webdataset.TarWriter.write
    monkeypatch.setattr(webdataset.TarWriter, "write", write)
    assert pack(real_images, out, "--shard-size", "16") == 130
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def _folder_search_keys(real_images: Path, seed: int, fraction: float) -> set[str]:
    """The shard keys of the images the image folder holds out as the search split of ``seed``."""
    search = load_splits(str(real_images), Recipe(img_size=32, search_fraction=fraction), seed, decode_all=False).search
    return {Path(f.decode()).relative_to("train").with_suffix("").as_posix() for f in search.files}


def _keys(loader) -> list[list[str]]:
    return [list(keys) for _, _, keys in loader]


@pytest.mark.parametrize("workers", [0, 2])
def test_stream_resumed_mid_epoch_reads_what_an_uninterrupted_one_does(real_images, shards, workers):
    recipe = Recipe(img_size=32, batch_size=4, loader_workers=workers, search_fraction=0.2)
    splits = load_splits(str(shards), recipe, seed=3, allow_shards=True)

    def loader():
        return shard_train_loader(splits.train, lambda image: torch.zeros(1), recipe, seed=3, keys=True)

    full, stream, _ = loader()
    per_epoch = stream.batches_per_epoch
    assert per_epoch == len(splits.train) // 4 and len(splits.train) == 96  # 120 - round(0.2 * 120)
    held_out = _folder_search_keys(real_images, 3, 0.2)
    uninterrupted = []
    for epoch in range(2):
        stream.set_epoch(epoch)
        uninterrupted.append(_keys(full))
    assert [len(e) for e in uninterrupted] == [per_epoch, per_epoch]
    assert uninterrupted[0] != uninterrupted[1]  # a seeded order per epoch
    for epoch_keys in uninterrupted:
        flat = [k for batch in epoch_keys for k in batch]
        assert not held_out & set(flat)  # the folder's search split stays held out
        # a few may repeat: a worker's stretch of shards may hold fewer kept images than its batches
        assert len(set(flat)) >= len(flat) - 8
    stop = 5
    first, stream_a, _ = loader()
    stream_a.set_epoch(0)
    taken = []
    for batch in first:
        taken.append(list(batch[2]))
        if len(taken) == stop:
            break
    resumed, stream_b, _ = loader()  # a new process: a fresh loader, resumed at batch `stop`
    stream_b.set_epoch(0, stop)
    rest = _keys(resumed)
    stream_b.set_epoch(1)
    assert taken + rest == uninterrupted[0] and _keys(resumed) == uninterrupted[1]


def test_stream_workers_started_from_a_fresh_interpreter_read_what_forked_ones_do(shards, monkeypatch):
    # Inside a Ray task workers are not forked (nas.data.workers.fork_is_safe): the stream is pickled to
    # them instead, and must read and augment as it does in forked workers.
    from nas.data import train_transform

    recipe = Recipe(img_size=32, batch_size=4, loader_workers=2, search_fraction=0.2)
    splits = load_splits(str(shards), recipe, seed=0, allow_shards=True)

    def batches():
        loader = shard_train_loader(splits.train, train_transform(recipe), recipe, 0, keys=True)[0]
        return loader.loader.multiprocessing_context, [(list(keys), images) for images, _, keys in loader]

    forked_context, forked = batches()
    monkeypatch.setattr("nas.data.workers.fork_is_safe", lambda: False)
    fresh_context, fresh = batches()
    assert forked_context is None and fresh_context.get_start_method() in ("forkserver", "spawn")
    assert len(fresh) == len(forked) == 96 // 4
    assert all(a[0] == b[0] and torch.equal(a[1], b[1]) for a, b in zip(fresh, forked))


def test_each_rank_reads_its_own_part_and_the_augmentation_follows_the_key(shards):
    recipe = Recipe(img_size=32, batch_size=4, search_fraction=0.2)
    splits = load_splits(str(shards), recipe, seed=0, allow_shards=True)
    from nas.data import train_transform

    ranks = [
        shard_train_loader(splits.train, train_transform(recipe), recipe, 0, rank, 2, keys=True) for rank in (0, 1)
    ]
    read = [[(k, img) for images, _, keys in loader for k, img in zip(keys, images)] for loader, _, _ in ranks]
    assert ranks[0][1].batches_per_epoch == ranks[1][1].batches_per_epoch == 96 // 8
    assert len(read[0]) == len(read[1]) == 48  # the same steps on every rank
    # Each rank reads its own stretch of shards; one may hold a few fewer kept images than its batches,
    # read again from the next stretch.
    samples = [dict(r) for r in read]
    assert len(samples[0]) + len(samples[1]) >= 90 and len(samples[0].keys() & samples[1].keys()) <= 6
    # one process reading the whole epoch augments each image exactly as the rank that read it did
    alone = shard_train_loader(splits.train, train_transform(recipe), recipe, 0, keys=True)[0]
    single = {k: img for images, _, keys in alone for k, img in zip(keys, images)}
    common = (samples[0].keys() | samples[1].keys()) & single.keys()
    assert len(common) > 60
    for key in common:
        mine = samples[0].get(key, samples[1].get(key))
        assert torch.equal(mine, single[key]), key


def test_search_split_and_validation_streams(real_images, shards):
    recipe = Recipe(img_size=32, search_fraction=0.2, eval_batch_size=7)
    splits = load_splits(str(shards), recipe, seed=0, allow_shards=True)
    from nas.data import eval_transform

    def keys(source):
        return [k for _, _, ks in shard_eval_loader(source, eval_transform(recipe), recipe, keys=True) for k in ks]

    search, train, val = keys(splits.search), keys(splits.train), keys(splits.val)
    assert set(search) == _folder_search_keys(real_images, 0, 0.2) and len(search) == 24
    assert sorted(search + train) == sorted(k[: -len(".jpg")] for k in _all_train_members(shards))
    assert len(val) == 30 and splits.val_name == "test/ folder (shards)" and len(splits.search) == 24


def _all_train_members(shards: Path) -> list[str]:
    return [n for s in sorted(shards.glob("train-*.tar")) for n in _members(s) if n.endswith(".jpg")]


@pytest.fixture(scope="module")
def shard_supernet(shards, tmp_path_factory):
    """A supernet trained 2 steps on ``shards``: its run folder and result."""
    run = tmp_path_factory.mktemp("shard-supernet") / "run"
    assert main([*SUPERNET, "--data", str(shards), "--run", str(run), *CHEAP, "--max-steps", "2"]) == 0
    return run, json.loads((run / "result.json").read_text())


def test_train_supernet_from_shards_records_their_fingerprint(real_images, shards, shard_supernet, tmp_path, capsys):
    run, result = shard_supernet
    assert result["step"] == 2 and result["train_split"] == 96 and result["search_split"] == 24
    assert 0 <= result["largest_top1"] <= 1
    config = (run / "config.yaml").read_text()
    assert ShardIndex.load(shards).fingerprint() == data_fingerprint(str(shards)) in config
    # --resume with other shards (the same images, packed otherwise) is refused by the run's check
    other = tmp_path / "other"
    assert pack(real_images, other, "--shard-size", "50") == 0
    copy = copy_run(run, tmp_path / "run")
    capsys.readouterr()
    assert main([*SUPERNET, "--data", str(other), "--run", str(copy), *CHEAP, "--max-steps", "3", "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "data_fingerprint" in err, err


def test_shards_read_by_index_give_the_folders_images_in_its_order(real_images, shards):
    recipe = load_recipe("demo")
    for seed in (0, 5):
        folder, packed = (load_splits(str(d), recipe, seed, decode_all=False) for d in (real_images, shards))
        for split in ("train", "search", "val"):
            a, b = getattr(folder, split), getattr(packed, split)
            assert len(a) == len(b) and a.labels.tolist() == b.labels.tolist() and a.classes == b.classes
            for i in range(len(a)):
                assert a.image(i).tobytes() == b.image(i).tobytes(), (split, i)
    assert packed.val_name == "test/ folder (shards)" and packed.fingerprint == data_fingerprint(str(shards))


def _state(run: Path) -> dict[str, torch.Tensor]:
    return torch.load(run / "checkpoint.pt", map_location="cpu", weights_only=False)["model"]


def test_supernet_search_and_training_read_by_index_give_the_folders_results(real_images, tmp_path, capsys):
    """The same seed on the folder and on its shards (``--shard-reading index``), the folder they were
    packed from deleted: the same supernet weights, the same search (scores, noise, choice) and the
    same network trained from scratch."""
    import shutil

    copy, shards = tmp_path / "photos", tmp_path / "shards"
    shutil.copytree(real_images, copy)
    assert pack(copy, shards, "--shard-size", "16") == 0
    shutil.rmtree(copy)  # the shards alone
    runs = {}
    for name, data in (("folder", real_images), ("shards", shards)):
        run = tmp_path / f"supernet-{name}"
        argv = [*SUPERNET, "--data", str(data), "--run", str(run), *CHEAP, "--max-steps", "2"]
        assert main([*argv, "--shard-reading", "index", "--seed", "3"]) == 0
        search = tmp_path / f"search-{name}"
        argv = ["search", "--supernet", str(run), "--strategy", "random", "--set", "evaluations=4", "--seed", "1"]
        argv += ["--objective", "params", "--target", "300000", "--run", str(search), "--bn-calib-batches", "1"]
        capsys.readouterr()
        assert main([*argv, "--finalists", "2", "--noise-networks", "1", "--noise-draws", "1", "--json"]) == 0
        result = json.loads(capsys.readouterr().out)
        trained = tmp_path / f"train-{name}"
        argv = ["train", "efficientformerv2_s0", "--data", str(data), "--run", str(trained), *CHEAP, "--max-steps", "2"]
        assert main([*argv, "--shard-reading", "index", "--json"]) == 0
        runs[name] = (run, search, result, trained, json.loads(capsys.readouterr().out))
    (run_a, search_a, a, trained_a, top_a), (run_b, search_b, b, trained_b, top_b) = runs.values()
    state_a, state_b = _state(run_a), _state(run_b)
    assert state_a.keys() == state_b.keys() and all(torch.equal(state_a[k], state_b[k]) for k in state_a)
    for key in ("digest", "accuracy", "search_accuracy", "score_noise", "strategy_choice"):
        assert a[key] == b[key], key
    scores = [[json.loads(line)["accuracy"] for line in (s / "evaluations.jsonl").open()] for s in (search_a, search_b)]
    assert scores[0] == scores[1] and len(scores[0]) >= 4
    assert top_a["top1"] == top_b["top1"] and top_a["train_images"] == top_b["train_images"] == 120
    state_a, state_b = _state(trained_a), _state(trained_b)
    assert all(torch.equal(state_a[k], state_b[k]) for k in state_a)


def test_train_fixed_network_from_shards_scores_on_the_val_shards(shards, tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", "efficientformerv2_s0", "--data", str(shards), "--run", str(run), *CHEAP]
    assert main([*argv, "--max-steps", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["train_images"] == 120 and result["val"] == "test/ folder (shards)" and result["val_images"] == 30
    assert 0 <= result["top1"] <= 1


def _corrupt_first_image(shard: Path) -> str:
    """Overwrite the first image member's bytes in place (same length, so shards.json still matches)."""
    with tarfile.open(shard) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(".jpg"))
    with open(shard, "r+b") as f:
        f.seek(member.offset_data)
        f.write(b"not a jpeg " * (member.size // 11) + b"!" * (member.size % 11))
    return member.name


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_corrupt_member_is_one_line_naming_shard_and_key(real_images, tmp_path, capsys, workers):
    out = tmp_path / "shards"
    assert pack(real_images, out, "--shard-size", "16") == 0
    shard = out / "train-000000.tar"
    name = _corrupt_first_image(shard)
    capsys.readouterr()
    run = tmp_path / "run"
    argv = [*SUPERNET, "--data", str(out), "--run", str(run), *CHEAP, "--loader-workers", workers]
    assert main([*argv, "--recipe", "demo", "--search-fraction", "0.01"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert err.startswith("nas: error: ") and str(shard) in err and name in err and "cannot decode" in err
    assert not run.exists()  # refused by the decode check, before the first step


def test_data_check_decodes_every_member_once_and_names_a_corrupt_one(real_images, tmp_path, capsys):
    out = tmp_path / "shards"
    assert pack(real_images, out, "--shard-size", "16") == 0
    capsys.readouterr()
    assert main(["data", "check", str(out), "--workers", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["checked"] == 150 and report["corrupt"] == [] and report["fingerprint"] == data_fingerprint(str(out))
    train, test = report["splits"]["train"], report["splits"]["val"]
    assert train["images"] == 120 and train["per_class"] == {"flower": 40, "leaves": 40, "pagoda": 40}
    assert test["images"] == 30 and train["width"] == {"min": 32, "median": 32, "max": 32}
    assert main(["data", "check", str(out), "--json"]) == 0  # the clean verdict is kept
    again = json.loads(capsys.readouterr().out)
    assert again["checked"] == 0 and again["reused"] == 150 and again["splits"] == report["splits"]
    name = _corrupt_first_image(out / "train-000003.tar")  # in place, same size: the same fingerprint
    assert main(["data", "check", str(out)]) == 2
    captured = capsys.readouterr()
    assert f"corrupt: {out / 'train-000003.tar'}: member {name}: " in captured.out and "checked 150" in captured.out
    assert captured.err.count("\n") == 1 and "1 corrupt images" in captured.err


def test_pack_refuses_a_corrupt_image_or_leaves_it_out_by_name(real_images, tmp_path, capsys, caplog):
    import shutil

    folder = tmp_path / "photos"
    shutil.copytree(real_images, folder)
    broken = folder / "train" / "leaves" / "0007.jpg"
    broken.write_bytes(b"not a jpeg at all")
    assert pack(folder, tmp_path / "refused") == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(broken) in err and "cannot decode" in err
    assert not (tmp_path / "refused").exists()
    assert pack(folder, tmp_path / "shards", "--skip-corrupt", "--json") == 0
    index = json.loads(capsys.readouterr().out)
    assert index["skipped"] == [str(broken)] and sum(s["samples"] for s in index["splits"]["train"]) == 119
    assert any(str(broken) in r.getMessage() and "left out" in r.getMessage() for r in caplog.records)
    splits = load_splits(str(tmp_path / "shards"), load_recipe("demo"), 0, decode_all=False)
    assert len(splits.train) + len(splits.search) == 119


@pytest.mark.slow
def test_ddp_on_shards_each_rank_reads_its_own_part_with_identical_weights(real_images, tmp_path):
    """Two processes under torchrun on the CPU stream the shards: each decodes its own part of every
    epoch, their weights are identical after every step, and the shards are checked once (rank 0)."""
    import os
    import subprocess
    import sys

    data, out = tmp_path / "shards", tmp_path / "records"
    assert pack(real_images, data, "--shard-size", "16") == 0
    out.mkdir()
    driver = Path(__file__).parent / "fixtures" / "ddp_shards_driver.py"
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(driver)]
    argv += [str(out), "--", "-v", "train", "efficientformerv2_s0", "--data", str(data), "--run", str(tmp_path / "run")]
    argv += [*CHEAP, "--epochs", "2", "--loader-workers", "0"]
    env = dict(os.environ, OMP_NUM_THREADS="1", NAS_DATA_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("checking 150 images in 10 shards") == 1, proc.stderr[-3000:]
    records = [[json.loads(line) for line in (out / f"rank-{r}.jsonl").open()] for r in (0, 1)]
    keys = [[r["key"] for r in rank if r.get("shard", "").startswith("train-")] for rank in records]
    sums = [[r["step_checksum"] for r in rank if "step_checksum" in r] for rank in records]
    # 120 training images (a val folder: none held out), 8 a step per rank: 7 steps an epoch, 2 epochs
    assert len(sums[0]) == len(sums[1]) == 14 and sums[0] == sums[1]
    assert len(keys[0]) == len(keys[1]) == 14 * 8
    for epoch in (slice(0, 56), slice(56, 112)):
        mine, theirs = set(keys[0][epoch]), set(keys[1][epoch])
        assert len(mine & theirs) <= 8 and len(mine | theirs) >= 104  # each its own part, a few read twice
    assert json.loads((tmp_path / "run" / "result.json").read_text())["step"] == 14
