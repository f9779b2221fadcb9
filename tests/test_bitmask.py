"""Bitmask layout and ``apply_token_bitmask_`` semantics (CPU fast path and generic path)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import guided
from guided.bitmask import unpack_token_bitmask


def _bitmask_for(allowed_rows, vocab_size):
    bm = torch.zeros(len(allowed_rows), (vocab_size + 31) // 32, dtype=torch.int32)
    for r, allowed in enumerate(allowed_rows):
        for t in allowed:
            word = int(bm[r, t // 32]) & 0xFFFFFFFF
            word |= 1 << (t % 32)
            bm[r, t // 32] = word - (1 << 32) if word >= 1 << 31 else word
    return bm


def test_allocate_allows_everything():
    bm = guided.allocate_token_bitmask(3, 100)
    assert bm.shape == (3, 4) and bm.dtype == torch.int32
    assert unpack_token_bitmask(bm, 100).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_apply_masks_exactly_the_disallowed(dtype):
    vocab = 70
    allowed = [[0, 31, 32, 63, 69], [5]]
    bm = _bitmask_for(allowed, vocab)
    logits = torch.randn(2, vocab).to(dtype)
    before = logits.clone()
    out = guided.apply_token_bitmask_(logits, bm)
    assert out is logits
    for r, ok in enumerate(allowed):
        finite = torch.isfinite(logits[r]).nonzero().flatten().tolist()
        assert finite == ok
        assert torch.equal(logits[r, ok], before[r, ok])


def test_apply_with_indices_leaves_other_rows():
    bm = _bitmask_for([[1], [2], [3]], 40)
    logits = torch.zeros(3, 40)
    guided.apply_token_bitmask_(logits, bm, indices=[1])
    assert torch.isfinite(logits[0]).all() and torch.isfinite(logits[2]).all()
    assert torch.isfinite(logits[1]).nonzero().flatten().tolist() == [2]


def test_apply_one_dimensional_logits():
    bm = _bitmask_for([[4, 7]], 40)[0]
    logits = torch.zeros(40)
    guided.apply_token_bitmask_(logits, bm)
    assert torch.isfinite(logits).nonzero().flatten().tolist() == [4, 7]


def test_logits_wider_than_bitmask_are_masked():
    bm = _bitmask_for([[1, 33]], 40)  # 2 words = 64 bits
    logits = torch.zeros(1, 100)
    guided.apply_token_bitmask_(logits, bm)
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [1, 33]


def test_cpu_fast_path_equals_generic_path():
    torch.manual_seed(0)
    bm = torch.randint(-(2**31), 2**31 - 1, (4, 10), dtype=torch.int32)
    logits = torch.randn(4, 300)
    ref = logits.clone().masked_fill_(~unpack_token_bitmask(bm, 300), float("-inf"))
    for _ in range(2):  # second time from the cache
        got = logits.clone()
        guided.apply_token_bitmask_(got, bm)
        assert torch.equal(got, ref)


@pytest.mark.parametrize("batch", [3, 40])  # the cached-row path and the vectorised path
def test_cpu_batches_equal_generic_path(batch):
    torch.manual_seed(batch)
    bm = torch.randint(-(2**31), 2**31 - 1, (batch, 5), dtype=torch.int32)
    logits = torch.randn(batch, 150)
    shifts = torch.arange(32, dtype=torch.int32)
    allowed = ((bm.unsqueeze(-1) >> shifts) & 1).bool().flatten(-2)[:, :150]
    ref = logits.clone().masked_fill_(~allowed, float("-inf"))
    got = logits.clone()
    guided.apply_token_bitmask_(got, bm)
    assert torch.equal(got, ref)
    rows = [0, batch - 1]
    got = logits.clone()
    guided.apply_token_bitmask_(got, bm, indices=rows)
    assert torch.equal(got[rows], ref[rows]) and torch.equal(got[1:-1], logits[1:-1])


def test_write_host_row_fills_a_row_and_clears_its_padding():
    from guided.bitmask import write_host_row

    row = np.array([5, -1], dtype=np.int32)
    tensor = torch.full((3, 4), 7, dtype=torch.int32)
    assert write_host_row(tensor, 1, row)
    assert tensor.tolist() == [[7] * 4, [5, -1, 0, 0], [7] * 4]
    strided = torch.full((4, 4), 7, dtype=torch.int32)[::2]  # a view: rows 0 and 2
    assert write_host_row(strided, 1, row) and strided[1].tolist() == [5, -1, 0, 0]
    array = np.full((2, 3), 7, dtype=np.int32)
    assert write_host_row(array, 0, row) and array.tolist() == [[5, -1, 0], [7, 7, 7]]
    # Not in host memory: nothing written, the caller copies on the device.
    assert not write_host_row(torch.empty((2, 4), dtype=torch.int32, device="meta"), 0, row)


def test_write_host_row_follows_a_bitmask_whose_storage_or_shape_changed():
    # The numpy view of the last tensor written is kept; it must never write into a
    # storage the tensor no longer uses, nor miss rows a reshaped tensor gained.
    from guided.bitmask import write_host_row

    row = np.array([5, -1], dtype=np.int32)
    tensor = torch.full((2, 3), 7, dtype=torch.int32)
    assert write_host_row(tensor, 1, row) and tensor.tolist() == [[7] * 3, [5, -1, 0]]
    old = tensor.clone()
    tensor.set_(torch.full((3, 3), 7, dtype=torch.int32))  # a new storage, one more row
    assert write_host_row(tensor, 2, row)
    assert tensor.tolist() == [[7] * 3, [7] * 3, [5, -1, 0]]
    other = torch.full((1, 3), 7, dtype=torch.int32)
    assert write_host_row(other, 0, row) and other.tolist() == [[5, -1, 0]]
    assert write_host_row(tensor, 0, row) and tensor.tolist() == [[5, -1, 0], [7] * 3, [5, -1, 0]]
    assert old.tolist() == [[7] * 3, [5, -1, 0]]
    same_storage = tensor.view(9)[:6].view(2, 3)  # another tensor object on the same memory
    assert write_host_row(same_storage, 1, np.array([1], dtype=np.int32))
    assert tensor.tolist() == [[5, -1, 0], [1, 0, 0], [5, -1, 0]]


def test_host_views_of_several_bitmasks_are_kept_and_follow_their_storage():
    # Two generation loops (or a server's bitmasks per batch shape) filled in turn:
    # each keeps its numpy view (taking it again costs 10-160 µs after a walk), and a
    # kept view is never written once its tensor moved to another storage.
    from guided.bitmask import host_array, write_host_row

    a = torch.full((2, 3), 7, dtype=torch.int32)
    b = torch.full((2, 3), 7, dtype=torch.int32)
    view_a, view_b = host_array(a), host_array(b)
    for _ in range(3):
        assert host_array(a) is view_a and host_array(b) is view_b
    a.set_(torch.full((2, 3), 7, dtype=torch.int32))  # a new storage while b was written last
    assert write_host_row(a, 0, np.array([5], dtype=np.int32)) and a.tolist() == [[5, 0, 0], [7] * 3]
    assert view_a.tolist() == [[7] * 3, [7] * 3]
    others = [torch.zeros((1, 3), dtype=torch.int32) for _ in range(10)]
    for t in others:
        host_array(t)
    assert host_array(others[-1]) is host_array(others[-1])
    assert host_array(b) is not view_b  # dropped: the least recently written of more than eight
    assert host_array(b).tolist() == [[7] * 3, [7] * 3]
