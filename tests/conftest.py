"""Fixtures shared by the test files: a real-image folder, one tiny supernet, one search of it and one
comparison of its result, each built once per session through the CLI and only read by the tests (a
test that damages or continues one works on a copy: ``helpers.copy_run``)."""

import os
import random
import shutil
import tempfile
from pathlib import Path

import pytest
from helpers import compare_argv, search_argv

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Under `pytest -n 2` each worker (and every process a test starts, which inherits this) computes
    # on one thread: two workers of two threads each on 2 cores ran the suite 1.7x slower in all.
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_name, "1")

# The decode check's manifests (nas.data.check) go to a folder of this session, not ~/.cache.
os.environ.setdefault("NAS_DATA_CACHE", tempfile.mkdtemp(prefix="nas-data-check-"))
# Latency tables are read from (and a predicted one missing at a size is built into) a copy of the shipped
# ones, so that no test writes into the checkout: one copy per xdist worker (a worker inherits the
# controller's environment), so that a table one worker's test writes (the tutorial's `nas build-table`)
# never replaces the one a run in the other worker has recorded and resumes against.
_TABLES_OWNER = os.environ.get("PYTEST_XDIST_WORKER", "main")
if "NAS_LATENCY_DIR" not in os.environ or os.environ.get("NAS_TEST_TABLES_OWNER", _TABLES_OWNER) != _TABLES_OWNER:
    os.environ["NAS_LATENCY_DIR"] = str(
        shutil.copytree(
            Path(__file__).resolve().parents[1] / "latency_tables", Path(tempfile.mkdtemp(prefix="nas-tables-")) / "t"
        )
    )
    os.environ["NAS_TEST_TABLES_OWNER"] = _TABLES_OWNER

#: Three classes of real photographs, cut from the two pictures scikit-learn ships (no download):
#: class -> (picture, region (left, top, right, bottom) the crops come from).
PHOTO_CLASSES = {
    "flower": ("flower.jpg", (190, 90, 430, 330)),
    "leaves": ("flower.jpg", (0, 0, 160, 427)),
    "pagoda": ("china.jpg", (80, 40, 320, 360)),
}


@pytest.fixture(scope="session")
def real_images(tmp_path_factory):
    """A real-image folder in ImageNet layout: 3 classes, 40 training and 10 test images each
    (32x32 JPEGs: seeded random crops of 32-64 pixels of a region of a photograph, scaled down).
    Shared: a test that changes files works on a copy."""
    from PIL import Image
    from sklearn.datasets import load_sample_images

    pictures = load_sample_images()
    photos = {Path(name).name: Image.fromarray(pixels) for name, pixels in zip(pictures.filenames, pictures.images)}
    root = tmp_path_factory.mktemp("photos")
    rng = random.Random(0)
    for cls, (picture, (left, top, right, bottom)) in PHOTO_CLASSES.items():
        for split, n in (("train", 40), ("test", 10)):
            (root / split / cls).mkdir(parents=True)
            for i in range(n):
                size = rng.randint(32, 64)
                x, y = rng.randint(left, right - size), rng.randint(top, bottom - size)
                crop = photos[picture].crop((x, y, x + size, y + size)).resize((32, 32), Image.BILINEAR)
                crop.save(root / split / cls / f"{i:04d}.jpg", quality=90)
    return root


@pytest.fixture(scope="session")
def tiny_supernet(tmp_path_factory):
    """A (briefly) trained tiny EfficientFormerV2 supernet on the built-in digits."""
    from nas.cli import main

    run = tmp_path_factory.mktemp("supernet") / "run"
    argv = ["train-supernet", "efficientformerv2", "--space", "efficientformerv2-tiny", "--run", str(run)]
    assert main([*argv, "--epochs", "1", "--batch-size", "32", "--max-steps", "4", "--bn-calib-batches", "1"]) == 0
    return run


@pytest.fixture(scope="session")
def tiny_search(tmp_path_factory, tiny_supernet):
    """A greedy search of ``tiny_supernet`` to MES 420 on iphone12 (``helpers.search_argv``)."""
    from nas.cli import main

    run = tmp_path_factory.mktemp("search") / "run"
    assert main(search_argv(tiny_supernet, run)) == 0
    return run


@pytest.fixture(scope="session")
def tiny_comparison(tmp_path_factory, tiny_search):
    """``tiny_search``'s result against 2 random networks of its MES, each trained 2 steps from scratch
    (``helpers.compare_argv``: objective, device and supernet are the search's)."""
    from nas.cli import main

    out = tmp_path_factory.mktemp("compare") / "out"
    assert main(compare_argv(tiny_search, out)) == 0
    return out


@pytest.fixture(scope="session", autouse=True)
def _one_thread_per_xdist_worker():
    """torch in an xdist worker computes on one thread (the variables above reach only new processes
    if torch was imported before this file)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)


@pytest.fixture(scope="session")
def pipeline(tiny_supernet, tiny_search, tiny_comparison):
    """A search of the tiny supernet and a comparison of its result, as users run them."""
    return {"supernet": tiny_supernet, "search": tiny_search, "compare": tiny_comparison}
