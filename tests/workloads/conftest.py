"""Shared inputs of the workloads tests."""

from __future__ import annotations

import pytest

# The shape keys of meta-llama/Llama-2-70b-hf config.json (other keys as there).
_LLAMA2_70B = """{
  "_name_or_path": "meta-llama/Llama-2-70b-hf",
  "architectures": ["LlamaForCausalLM"],
  "hidden_act": "silu",
  "hidden_size": 8192,
  "intermediate_size": 28672,
  "max_position_embeddings": 4096,
  "model_type": "llama",
  "num_attention_heads": 64,
  "num_hidden_layers": 80,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "float16",
  "vocab_size": 32000
}"""


@pytest.fixture
def llama2_70b_config() -> str:
    """config.json text of meta-llama/Llama-2-70b-hf (its shape keys and a few others)."""
    return _LLAMA2_70B
