"""NCCL_BUFFSIZE: the Simple protocol's buffer a channel has per connection (4 MiB by default), a slot being an
eighth of it (NCCL_STEPS); larger slots mean fewer chunks, so fewer handshakes, for the same bytes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.collectives.algorithms import ring_shape
from simulator.collectives.cost import CHUNK_SLOTS, chunk_bytes
from simulator.collectives.predict import predict_collective
from simulator.collectives.select import view_for_env
from simulator.core.errors import ConfigError
from tests.collectives.test_collective_model import view


@pytest.mark.parametrize("text", ["8388608", "0x800000", " 8388608 "])
def test_the_buffer_size_read_as_nccl_reads_it(text):
    assert view_for_env(view(nodes=2), {"NCCL_BUFFSIZE": text}).simple_buffer_bytes == 8 << 20


def test_the_default_buffer_is_4_mib():
    assert view_for_env(view(nodes=2), {}).simple_buffer_bytes == 4 << 20


@pytest.mark.parametrize("text", ["", "eight", "0", "-4194304", "4.5e6"])
def test_a_bad_buffer_size_is_refused_naming_the_variable(text):
    with pytest.raises(ConfigError, match="NCCL_BUFFSIZE"):
        view_for_env(view(nodes=2), {"NCCL_BUFFSIZE": text})


def test_a_ring_chunk_by_hand():
    """A 1 GiB ring all_reduce over 16 ranks on 8 channels: 8 MiB a channel and step, capped at CHUNK_SLOTS (4)
    slots of BUFFSIZE / 8: 2 MiB with the default 4 MiB, 4 MiB with 8 MiB."""
    v = view(nodes=2)
    shape = ring_shape("all_reduce", v)
    assert chunk_bytes(1 << 30, shape, 8, v, "simple") == CHUNK_SLOTS * (4 << 20) / 8 == 2 << 20
    big = view_for_env(v, {"NCCL_BUFFSIZE": str(8 << 20)})
    assert chunk_bytes(1 << 30, shape, 8, big, "simple") == 4 << 20
    assert chunk_bytes(1 << 30, shape, 8, big, "ll") == chunk_bytes(1 << 30, shape, 8, v, "ll")


@settings(max_examples=40, deadline=None)
@given(size=st.integers(min_value=1 << 20, max_value=8 << 30), nodes=st.sampled_from([2, 4, 16]))
def test_a_larger_simple_buffer_is_never_slower(size, nodes):
    """Metamorphic: the same Simple ring all_reduce with twice the buffer moves the same bytes in fewer chunks."""
    v = view(nodes=nodes)
    small = predict_collective(v, "all_reduce", size, algo="ring", proto="simple")
    large = predict_collective(v, "all_reduce", size, algo="ring", proto="simple", env={"NCCL_BUFFSIZE": "8388608"})
    assert large.time_s <= small.time_s * (1 + 1e-12)


def test_ll_ignores_the_simple_buffer():
    v = view(nodes=2)
    assert predict_collective(v, "all_reduce", 8, proto="ll", env={"NCCL_BUFFSIZE": "16777216"}).time_s == \
        pytest.approx(predict_collective(v, "all_reduce", 8, proto="ll").time_s)
