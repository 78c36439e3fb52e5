"""Fixtures shared by the test files."""

from pathlib import Path

import pytest

#: CIFAR-10 in ImageNet folder layout, beside the project (tests that need it skip without it).
CIFAR = Path(__file__).resolve().parents[2] / "shared" / "data" / "cifar10"


@pytest.fixture(scope="session")
def cifar_slice(tmp_path_factory):
    """A real-image folder: 3 CIFAR-10 classes, 40 training and 10 test images each (links)."""
    if not CIFAR.is_dir():
        pytest.skip(f"{CIFAR} is not here")
    root = tmp_path_factory.mktemp("cifar-slice")
    for split, n in (("train", 40), ("test", 10)):
        for cls in ("airplane", "cat", "ship"):
            (root / split / cls).mkdir(parents=True)
            for src in sorted((CIFAR / split / cls).iterdir())[:n]:
                (root / split / cls / src.name).symlink_to(src)
    return root


@pytest.fixture(scope="session")
def tiny_supernet(tmp_path_factory):
    """A (briefly) trained tiny EfficientFormerV2 supernet on the built-in digits."""
    from nas.cli import main

    run = tmp_path_factory.mktemp("supernet") / "run"
    assert (
        main(
            [
                "train-supernet",
                "efficientformerv2",
                "--space",
                "efficientformerv2-tiny",
                "--run",
                str(run),
                "--epochs",
                "1",
                "--batch-size",
                "32",
                "--max-steps",
                "4",
                "--bn-calib-batches",
                "1",
            ]
        )
        == 0
    )
    return run


@pytest.fixture(scope="session")
def cifar_copy(tmp_path_factory, cifar_slice):
    """``cifar_slice`` with real copies of its files (tests may damage them)."""
    import shutil

    root = tmp_path_factory.mktemp("cifar-copy") / "data"
    shutil.copytree(cifar_slice, root, symlinks=False)
    return root
