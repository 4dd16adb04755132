"""`as_torch_iterable`: torch imported only when asked; workers split the rows by index."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType, SimpleNamespace

import pytest

from gencoach.library import CanonicalDatasetAdapter, DatasetQuery, LibraryError, TrainingView
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


@pytest.mark.slow
@pytest.mark.timeout(300)  # two worker processes each import torch
@pytest.mark.skipif(not HAS_TORCH, reason="needs the torch extra")
def test_dataloader_workers_yield_each_example_once(library: CanonicalDatasetAdapter) -> None:
    """Two DataLoader workers together yield every turn example exactly once."""
    from torch.utils.data import DataLoader

    dataset = library.as_torch_iterable(view="turn")
    loader = DataLoader(dataset, batch_size=None, num_workers=2)
    ids = sorted(example["sample_id"] for example in loader)
    assert ids == sorted(example.sample_id for example in library.iter_examples(view="turn"))


def test_each_worker_iterates_its_own_share(
    library: CanonicalDatasetAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the dataset's own iteration, workers 0 and 1 of 2 yield disjoint halves
    covering every example (torch's module stood in for by its two names used)."""
    worker: list[SimpleNamespace | None] = [None]
    data = ModuleType("torch.utils.data")
    data.IterableDataset = type("IterableDataset", (), {})  # type: ignore[attr-defined]
    data.get_worker_info = lambda: worker[0]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", ModuleType("torch"))
    monkeypatch.setitem(sys.modules, "torch.utils", ModuleType("torch.utils"))
    monkeypatch.setitem(sys.modules, "torch.utils.data", data)
    dataset = library.as_torch_iterable(view="turn")
    alone = [example["sample_id"] for example in dataset]
    shares = []
    for index in range(2):
        worker[0] = SimpleNamespace(id=index, num_workers=2)
        shares.append([example["sample_id"] for example in dataset])
    assert alone == [example.sample_id for example in library.iter_examples(view="turn")]
    assert not set(shares[0]) & set(shares[1])
    assert sorted(shares[0] + shares[1]) == sorted(alone)


@pytest.mark.slow
@pytest.mark.timeout(300)  # two worker processes each import torch
@pytest.mark.skipif(not HAS_TORCH, reason="needs the torch extra")
def test_the_documented_torch_example(library: CanonicalDatasetAdapter) -> None:
    """The documented example: a training query's turns through a two-worker DataLoader."""
    torch_dataset = library.as_torch_iterable(
        DatasetQuery.for_training(splits=("train",)),
        view=TrainingView.ASSISTANT_TURN,
    )

    # Standard torch DataLoader worker processes are sharded by item index.
    from torch.utils.data import DataLoader

    loader = DataLoader(torch_dataset, batch_size=None, num_workers=2)
    ids = sorted(example["sample_id"] for example in loader)
    expected = library.iter_examples(DatasetQuery.for_training(splits=("train",)), view="turn")
    assert ids == sorted(example.sample_id for example in expected)
    assert ids
