"""`as_torch_iterable`: torch imported only when asked; workers split the rows by index."""

from __future__ import annotations

import importlib.util

import pytest

from gencoach.library import CanonicalDatasetAdapter, LibraryError
from gencoach.library.loaders import worker_share

HAS_TORCH = importlib.util.find_spec("torch") is not None


def test_workers_take_disjoint_shares_covering_everything() -> None:
    """Each of n workers takes every n-th row from its index: together each row once."""
    rows = list(range(11))
    shares = [worker_share(rows, worker, 3) for worker in range(3)]
    assert shares == [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8]]


@pytest.mark.skipif(HAS_TORCH, reason="torch is installed")
def test_without_torch_the_extra_is_named(library: CanonicalDatasetAdapter) -> None:
    """Without torch, asking for a torch dataset says which extra to install."""
    with pytest.raises(LibraryError, match=r"pip install 'gencoach\[torch\]'"):
        library.as_torch_iterable()


@pytest.mark.skipif(not HAS_TORCH, reason="needs the torch extra")
def test_dataloader_workers_yield_each_example_once(library: CanonicalDatasetAdapter) -> None:
    """Two DataLoader workers together yield every turn example exactly once."""
    from torch.utils.data import DataLoader

    dataset = library.as_torch_iterable(view="turn")
    loader = DataLoader(dataset, batch_size=None, num_workers=2)
    ids = sorted(example["id"] for example in loader)
    assert ids == sorted(example.id for example in library.iter_examples(view="turn"))
