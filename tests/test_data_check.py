"""The decode check paid once per data set (nas.data.check): kept in a manifest, reused by every
later command, done again for new or changed files only, in parallel, by one rank of a job; and the
per-image memory of a listed folder."""

import hashlib
import json
import os
import shutil

import numpy as np
import pytest
import torch
from helpers import in_a_ray_task_without_fork

from nas.cli import main
from nas.config.recipe import Recipe
from nas.core.errors import NasError
from nas.data import load_splits
from nas.data.check import Manifest, check_images, manifest_path
from nas.data.source import list_folder


@pytest.fixture
def data(real_images, tmp_path):
    """A private copy of the real-image folder (hard links: the files are not rewritten in place)."""
    root = tmp_path / "data"
    shutil.copytree(real_images, root, copy_function=os.link)
    return root


def _check(capsys, root, *extra) -> dict:
    code = main(["data", "check", str(root), "--json", *extra])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def _replace(path, content: bytes, same_size: bool = False) -> None:
    """A new file at ``path`` (a new inode, as a user copying a file in would make)."""
    if same_size:
        content = (content * (path.stat().st_size // len(content) + 1))[: path.stat().st_size]
    path.unlink()
    path.write_bytes(content)


def test_check_reports_the_folder_and_is_reused(data, capsys):
    code, report, _ = _check(capsys, data)
    assert code == 0 and report["checked"] == 150 and report["reused"] == 0 and not report["corrupt"]
    train, test = report["splits"]["train"], report["splits"]["test"]
    assert train["images"] == 120 and train["classes"] == 3 and test["images"] == 30
    assert train["per_class"] == {"flower": 40, "leaves": 40, "pagoda": 40}
    assert train["width"] == {"min": 32, "median": 32, "max": 32} and train["modes"] == {"RGB": 120}
    assert manifest_path(data).is_file() and len(Manifest.load(manifest_path(data))) == 150
    code, again, _ = _check(capsys, data)
    assert code == 0 and again["checked"] == 0 and again["reused"] == 150
    # Training reads the manifest too: nothing is decoded again for the check.
    root, listings = list_folder(str(data))
    files = np.concatenate([listing.files for listing in listings.values()])
    sizes = np.concatenate([listing.sizes for listing in listings.values()])
    mtimes = np.concatenate([listing.mtimes for listing in listings.values()])
    assert check_images(root, files, sizes, mtimes, workers=1).checked == 0


def test_only_new_or_changed_files_are_checked_again(data, capsys):
    assert _check(capsys, data)[0] == 0
    new = data / "train" / "flower" / "extra.jpg"
    shutil.copy(data / "train" / "flower" / "0000.jpg", new)
    touched = data / "test" / "pagoda" / "0003.jpg"
    _replace(touched, touched.read_bytes())  # same bytes, a new modification time
    os.utime(touched, ns=(touched.stat().st_atime_ns, touched.stat().st_mtime_ns + 10**9))
    code, report, _ = _check(capsys, data)
    assert code == 0 and report["checked"] == 2 and report["reused"] == 149


@pytest.mark.parametrize("same_size", [False, True], ids=["truncated", "same-size"])
def test_a_corrupt_file_added_after_the_check_is_refused_by_name(data, tmp_path, capsys, same_size):
    assert _check(capsys, data)[0] == 0
    bad = data / "train" / "leaves" / "0005.jpg"
    content = bad.read_bytes()
    _replace(bad, content[: len(content) // 2] if not same_size else b"not a jpeg ", same_size=same_size)
    run = tmp_path / "run"
    argv = ["train", "efficientformerv2_s0", "--img-size", "32", "--data", str(data), "--run", str(run)]
    assert main([*argv, "--batch-size", "16", "--max-steps", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and "cannot decode image" in err[0], err
    assert not run.exists()
    code, report, err = _check(capsys, data)
    assert code == 2 and [c["path"] for c in report["corrupt"]] == [str(bad)]
    assert err.strip().endswith("1 corrupt images (listed above); remove or replace them")


def test_every_corrupt_file_is_found_in_parallel(data, capsys):
    bad = [data / "train" / "flower" / "0001.jpg", data / "test" / "leaves" / "0009.jpg"]
    for path in bad:
        _replace(path, b"\x89PNG but not really")
    code, two, _ = _check(capsys, data, "--processes", "2")
    assert code == 2 and sorted(c["path"] for c in two["corrupt"]) == sorted(map(str, bad))
    assert two["checked"] == 150 and two["workers"] == 2
    # The corrupt ones were not recorded: a check with one process finds them again, and nothing else.
    code, one, _ = _check(capsys, data, "--workers", "1")  # the former name still works
    assert code == 2 and one["checked"] == 2 and one["corrupt"] == two["corrupt"]
    splits = load_splits(str(data), Recipe(img_size=32), 0, decode_all=False)
    with pytest.raises(NasError, match="more corrupt images"):
        load_splits(str(data), Recipe(img_size=32), 0)
    assert len(splits.train) + len(splits.search) == 120


@pytest.mark.xdist_group("ray")  # one local Ray cluster at a time under pytest -n
@pytest.mark.slow
def test_decoding_inside_a_ray_task_never_forks_it(data):
    """A fork of a Ray worker copies the locks its gRPC threads held, and a child that needs one
    waits forever (ray-project/ray#28328; a compare's Ray part sat so): inside Ray the pool decodes
    in threads, the same pixels as one process."""
    from nas.data.check import decode_all

    files = np.array(sorted(str(p.relative_to(data)).encode() for p in (data / "train").rglob("*.jpg")))
    alone = decode_all(data, files, (32, 32, 3), workers=1)

    def decode(root, files):
        from nas.data.check import decode_all

        return decode_all(root, files, (32, 32, 3), workers=2)

    in_ray = in_a_ray_task_without_fork(decode, data, files)
    assert np.array_equal(in_ray, alone)


def test_an_unreadable_manifest_is_rebuilt(data, capsys):
    assert _check(capsys, data)[0] == 0
    manifest_path(data).write_bytes(b"garbage")
    code, report, _ = _check(capsys, data)
    assert code == 0 and report["checked"] == 150
    assert len(Manifest.load(manifest_path(data))) == 150


def test_listing_is_arrays_not_python_objects_per_image(data):
    splits = load_splits(str(data), Recipe(img_size=32, cache_images=False), 0)
    for source in (splits.train, splits.search, splits.val):
        assert source.files.dtype.kind == "S" and source.labels.dtype == np.int32
        assert source.pixels is None
        assert os.path.isfile(source.path(0)) and isinstance(source.label(0), int)
    cached = load_splits(str(data), Recipe(img_size=32), 0)
    assert cached.train.pixels.shape == (len(cached.train), 32, 32, 3)


def test_fingerprint_is_the_listing_hash_runs_recorded_before(data):
    # Resume checks compare this with config.yaml of earlier runs: the hashed text must not change.
    h = hashlib.sha256()
    for split in ("train", "val", "test"):
        if not (data / split).is_dir():
            continue
        for class_dir in sorted(p for p in (data / split).iterdir() if p.is_dir()):
            for path in sorted(class_dir.iterdir()):
                h.update(f"{split}/{class_dir.name}/{path.name}:{path.stat().st_size}\n".encode())
    from nas.data import data_fingerprint

    assert data_fingerprint(str(data)) == h.hexdigest()[:16]
    assert load_splits(str(data), Recipe(img_size=32), 0, decode_all=False).fingerprint == h.hexdigest()[:16]


def test_data_check_bad_input_is_one_line(tmp_path, capsys):
    assert main(["data", "check", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "data folder not found" in err[0]


class _Unreadable(torch.utils.data.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, index):
        raise NasError(f"/data/{index}.jpg: cannot decode image (broken); remove or replace the file")


def test_an_error_in_a_loader_worker_stays_one_line():
    # torch re-raises a worker's exception with the worker's traceback as its message
    with pytest.raises(NasError) as caught:
        list(torch.utils.data.DataLoader(_Unreadable(), num_workers=1))
    assert str(caught.value) == "/data/0.jpg: cannot decode image (broken); remove or replace the file"
