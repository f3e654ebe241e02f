"""DeepSpeed JSON -> training job: DeepSpeed's keys and defaults (deepspeed/runtime/config.py, zero/config.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.core.errors import ConfigError
from simulator.importers.deepspeed import import_deepspeed
from workloads.presets import load_model

DATA = Path(__file__).parent / "data"
MODEL = load_model("llama2-13b")


def job(config: dict, gpus: int = 32):
    return import_deepspeed(json.dumps(config), "ds.json", gpus, MODEL)


def test_zero3_example():
    """The ZeRO-3 example: zero3, micro-batch 2, 512 a step (2 x 8 x 32 GPUs), bf16 with fp32 master weights,
    overlap_comm, 5e8-element buckets; nothing unknown."""
    imported = import_deepspeed((DATA / "ds_zero3.json").read_text(), "ds_zero3.json", 32, MODEL)
    t = imported.training
    assert imported.model is None  # the caller writes --model
    assert (t["micro_batch"], t["global_batch"], t["precision"]) == (2, 512, "bf16")
    assert t["strategy"] == {"kind": "zero3", "grad_reduce_bytes": 2, "fp32_grad_copy": True,
                             "zero_bucket_elements": 500_000_000, "overlap_grad_reduce": True,
                             "contiguous_gradients": True}
    assert imported.unknown == [] and imported.warnings == []


@pytest.mark.parametrize(("stage", "kind", "overlap"), [(0, "ddp", False), (1, "zero1", False), (2, "zero2", False),
                                                         (3, "zero3", True)])
def test_stages_and_overlap_default(stage: int, kind: str, overlap: bool):
    """Stage 0-3 are ddp / zero1-3; overlap_comm defaults to true at stage 3 only (overlap_comm_valid)."""
    strategy = job({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": stage}}).training["strategy"]
    assert (strategy["kind"], strategy["overlap_grad_reduce"]) == (kind, overlap)


@pytest.mark.parametrize(("config", "micro", "step"), [
    ({"train_batch_size": 64}, 2, 64),  # one key: no accumulation
    ({"train_micro_batch_size_per_gpu": 4}, 4, 128),
    ({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4}, 1, 128),
    ({"train_batch_size": 256, "gradient_accumulation_steps": 4}, 2, 256),
])
def test_batch_keys_derive_each_other(config: dict, micro: int, step: int):
    """Any two of the batch keys give the third (train_batch = micro x accumulation x 32 GPUs)."""
    t = job(config).training
    assert (t["micro_batch"], t["global_batch"]) == (micro, step)


def test_auto_values_take_defaults_with_a_warning():
    """HuggingFace Trainer's "auto": read as not given (micro-batch 1, fp32), each warned."""
    imported = job({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
                    "bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 2, "overlap_comm": "auto"}})
    assert imported.training["micro_batch"] == 1 and imported.training["precision"] == "fp32"
    assert sum("filled in by the HuggingFace Trainer" in warning for warning in imported.warnings) == 4


def test_bf16_without_zero_is_the_bf16_optimizer():
    """Stage 0 with bf16: DeepSpeed's BF16_Optimizer, ZeRO-1-like, all-reducing an fp32 gradient buffer (no ZeRO
    reduction bucket)."""
    strategy = job({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}}).training["strategy"]
    assert (strategy["kind"], strategy["zero_grad_all_reduce"], strategy["grad_reduce_bytes"],
            strategy["contiguous_gradients"]) == ("zero1", True, 4, False)


@pytest.mark.parametrize(("given", "kept"), [({}, True), ({"contiguous_gradients": False}, False)])
def test_contiguous_gradients_is_read(given: dict, kept: bool):
    """zero_optimization.contiguous_gradients (default true): whether the reduce_bucket_size bucket is held."""
    strategy = job({"train_micro_batch_size_per_gpu": 1,
                    "zero_optimization": {"stage": 2, **given}}).training["strategy"]
    assert strategy["contiguous_gradients"] is kept


@pytest.mark.parametrize(("given", "all_reduce", "per_rank"), [
    ({}, True, False), ({"use_multi_rank_bucket_allreduce": False}, False, True),
    ({"reduce_scatter": False, "use_multi_rank_bucket_allreduce": False}, True, False)])
def test_bucket_reduction_keys_are_read(given: dict, all_reduce: bool, per_rank: bool):
    """Stages 1/2 all-reduce each bucket (use_multi_rank_bucket_allreduce, default true since 0.12.4); with it
    off, one reduce per rank; reduce_scatter false all-reduces the bucket whatever the other says."""
    for stage in (1, 2):
        strategy = job({"train_micro_batch_size_per_gpu": 1,
                        "zero_optimization": {"stage": stage, **given}}).training["strategy"]
        assert (strategy["bucket_all_reduce"], strategy["reduce_per_rank"]) == (all_reduce, per_rank)


def test_fp32_reduces_in_fp32_and_stage3_prefetch_off():
    """No 16-bit precision: 4-byte gradient reduction, no fp32 copy; stage3_prefetch_bucket_size 0: no prefetch."""
    strategy = job({"train_micro_batch_size_per_gpu": 1,
                    "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 0}}).training["strategy"]
    assert (strategy["grad_reduce_bytes"], strategy["fp32_grad_copy"], strategy["backward_prefetch"]) == (4, False,
                                                                                                          False)


def test_unknown_keys_listed():
    """Keys DeepSpeed does not have are listed; the scheduler and logging keys are not."""
    imported = job({"train_micro_batch_size_per_gpu": 1, "scheduler": {"type": "WarmupLR"}, "steps_per_print": 10,
                    "zero_optimization": {"stage": 1, "reduce_bucket_sise": 5}, "train_batch_sizee": 3})
    assert imported.unknown == ["zero_optimization.reduce_bucket_sise", "train_batch_sizee"]


@pytest.mark.parametrize(("config", "needle"), [
    ({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}},
     "offload_optimizer (device cpu): clustersim does not model CPU or NVMe offload"),
    ({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}},
     "offload_param (device nvme)"),
    ({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 4}}, "stage: expected 0, 1, 2 or 3"),
    ({"steps_per_print": 1}, "train_batch_size or train_micro_batch_size_per_gpu"),
    ({"train_batch_size": 100, "train_micro_batch_size_per_gpu": 2}, "train_batch_size 100: must be"),
    ({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "fp16": {"enabled": True}}, "not both"),
    ({"train_micro_batch_size_per_gpu": "two"}, "train_micro_batch_size_per_gpu: expected an integer"),
    ([1, 2], "expected a JSON object"),
])
def test_bad_configs_name_the_key(config: object, needle: str):
    """Each bad config is one ConfigError naming the file and the key."""
    with pytest.raises(ConfigError, match="ds.json") as info:
        import_deepspeed(json.dumps(config), "ds.json", 32, MODEL)
    assert needle in str(info.value)


def test_model_required():
    """A DeepSpeed config names no model: --model is required, and the error says so."""
    with pytest.raises(ConfigError, match="give --model"):
        import_deepspeed('{"train_batch_size": 32}', "ds.json", 32, None)


def test_not_json():
    """Text that is not JSON: the file and line."""
    with pytest.raises(ConfigError, match=r"ds.json: not valid JSON: .* \(line 2\)"):
        import_deepspeed('{\n"a": }', "ds.json", 32, MODEL)


def test_zeropp_keys_become_the_zero3_options():
    """DeepSpeed's ZeRO++ keys (zero_quantized_weights, zero_hpz_partition_size, zero_quantized_gradients)."""
    imported = job({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
                    "zero_optimization": {"stage": 3, "zero_quantized_weights": True, "zero_hpz_partition_size": 8,
                                          "zero_quantized_gradients": True}}, gpus=16)
    strategy = imported.training["strategy"]
    assert strategy["zeropp_quantized_weights"] and strategy["zeropp_hierarchical_partition"]
    assert strategy["zeropp_quantized_gradients"] and imported.training["framework"] == "deepspeed"
