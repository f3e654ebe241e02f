"""Reading a Megatron-LM launch script or NeMo command line into flag -> value.

The text is split as a shell would (quotes, backslash-continued lines, comments), anywhere in the file: a
`torchrun ... pretrain_gpt.py \\` prefix, bash arrays (`GPT_MODEL_ARGS=( --num-layers 96 ... )`) and simple
assignments (`TP=8`, used later as `$TP` or `${TP}`) are all read. `--flag value`, `--flag=value` and a flag
alone (true) are arguments; NeMo's Hydra overrides (`trainer.num_nodes=16`, `model.tensor_model_parallel_size=8`,
`++model.x=y`) become the Megatron flag of the same meaning. Anything else (the launcher, the script's name) is
skipped.
"""

from __future__ import annotations

import re
import shlex

from simulator.core.errors import ConfigError

# Megatron flags that take no value (argparse store_true): a following word is never theirs.
SWITCHES = frozenset((
    "sequence-parallel", "use-distributed-optimizer", "recompute-activations", "checkpoint-activations", "bf16",
    "fp16", "overlap-grad-reduce", "overlap-param-gather", "swiglu", "untie-embeddings-and-output-weights",
    "disable-bias-linear", "group-query-attention", "use-flash-attn", "tp-comm-overlap",
    "no-overlap-p2p-communication", "overlap-p2p-communication-warmup-flush", "use-mcore-models",
    "use-legacy-models", "accumulate-allreduce-grads-in-fp32",
    "no-position-embedding", "use-rotary-position-embeddings", "standalone"))
# NeMo model.* / trainer.* keys whose Megatron flag is not the same name with dashes
NEMO_NAMES = {"model.encoder_seq_length": "seq-length", "model.num_moe_experts": "num-experts",
              "model.activations_checkpoint_granularity": "recompute-granularity",
              "model.activations_checkpoint_method": "recompute-method",
              "model.activations_checkpoint_num_layers": "recompute-num-layers",
              "model.virtual_pipeline_model_parallel_size": "num-virtual-stages-per-pipeline-rank",
              "model.num_query_groups": "nemo-query-groups", "model.optim.name": "nemo-optimizer",
              "trainer.precision": "nemo-precision", "trainer.num_nodes": "nemo-nodes",
              "trainer.devices": "nemo-devices", "model.bias": "nemo-bias", "model.activation": "nemo-activation",
              "model.share_embeddings_and_output_weights": "nemo-tied-embeddings"}
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=([^()]*)")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_HYDRA = re.compile(r"\+{0,2}((?:model|trainer)\.[A-Za-z0-9_.]+)=(.*)", re.S)


def argument_tokens(text: str, source: str) -> list[str]:
    """The file's words as a shell splits them, with comments dropped; ConfigError on unbalanced quotes."""
    try:
        return shlex.split(text.replace("\\\n", " "), comments=True)
    except ValueError as exc:
        raise ConfigError(f"{source}: cannot split into arguments: {exc}") from None


def parse_arguments(text: str, source: str) -> dict[str, str | bool]:
    """{flag without dashes: value, or True for a flag alone}; a flag given twice keeps its last value (argparse)."""
    tokens = argument_tokens(text, source)
    variables: dict[str, str] = {}
    for token in tokens:
        match = _ASSIGNMENT.fullmatch(token)
        if match:
            variables[match.group(1)] = match.group(2)
    args: dict[str, str | bool] = {}
    i = 0
    while i < len(tokens):
        token = _expanded(tokens[i], variables)
        i += 1
        hydra = _HYDRA.fullmatch(token)
        if hydra:
            key = hydra.group(1)
            args[NEMO_NAMES.get(key, key.split(".", 1)[1].replace("_", "-"))] = hydra.group(2)
            continue
        if not token.startswith("--") or len(token) == 2:
            continue
        flag, equals, value = token[2:].partition("=")
        if equals:
            args[flag] = value
        elif flag not in SWITCHES and i < len(tokens) and _is_value(tokens[i]):
            args[flag] = _expanded(tokens[i], variables)
            i += 1
        else:
            args[flag] = True
    return args


def _expanded(token: str, variables: dict[str, str]) -> str:
    """`$NAME` and `${NAME}` replaced by the file's own assignments (others left as written)."""
    return _VARIABLE.sub(lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), token)


def _is_value(token: str) -> bool:
    """Whether a word after a flag is its value: not another flag, a bash array's bracket or an array expansion."""
    return not (token.startswith("--") or token in ("(", ")") or token.endswith("=(") or "[@]" in token
                or _HYDRA.fullmatch(token) is not None)
