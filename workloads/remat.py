"""JAX rematerialisation policies, as MaxText names them: which of a block's tensors backward keeps.

A policy lists the named tensors a block keeps from its forward for its backward
(`jax.checkpoint_policies.save_only_these_names`); backward recomputes, from the block's input, every other
tensor it needs and nothing else (JAX's partial evaluation prunes the forward to what backward uses). The
names and policies are MaxText's (AI-Hypercomputer/maxtext, `layers/decoders.py get_remat_policy` and
`minimal_policy`; `configs/base.yml` lists them, `remat_policy: 'full'` the default, which passes no policy:
nothing kept). MaxText's names map onto a block's matmuls (workloads.model.TransformerModel.layer_gemms):
query_proj, key_proj, value_proj, kv_proj and qkv_proj onto `qkv`; out_proj onto `attn_out`; mlpwi, mlpwi_0
and mlpwi_1 onto `mlp_up`; mlpwo onto `mlp_down`; `context` is the attention kernel's output with its
log-sum-exp (MaxText's attention_op.py names both so).

What backward of a pre-norm block (norm, q/k/v, attention, output projection, residual; norm, gated MLP,
down projection, residual) needs, and so recomputes where the policy does not keep it:
- q, k and v (attention's backward): the qkv matmul;
- the attention output and its log-sum-exp (attention's backward, the output projection's weight gradient):
  the attention kernel, from q, k, v;
- the sum after the attention's residual (the second norm's input): the output projection, from the
  attention output;
- the MLP's up and gate outputs (the activation's backward, the down projection's weight gradient): mlp_up.
The down projection's output feeds only the residual add, whose backward needs no input: it is never
recomputed, whatever the policy; keeping it (MaxText's minimal, save_dot_except_mlpwi) keeps nothing backward
uses. Norms and element-wise work are always recomputed from what is kept. A mixture of experts or MLA names
its tensors otherwise (moe_mlpwi_0, mla_q, ...): only nothing_saveable, which keeps none of them, is modelled
there (TransformerModel.remat_recomputed_gemms).
"""

from __future__ import annotations

import re
from typing import Final

# a policy's kept tensors, in layer_gemms' names plus "context" (module docstring); mlp_down is left out of
# every set, as backward never uses it
REMAT_POLICIES: Final[dict[str, frozenset[str]]] = {
    "nothing_saveable": frozenset(),  # MaxText's 'full': no policy, jax.checkpoint's default
    "save_out_proj": frozenset({"attn_out"}),
    "save_qkv_proj": frozenset({"qkv"}),
    "save_dot_except_mlp": frozenset({"qkv", "attn_out"}),
    "save_dot_except_mlpwi": frozenset({"qkv", "attn_out"}),  # its mlpwo is never a backward input
    "save_dot_with_context_except_mlp": frozenset({"qkv", "context", "attn_out"}),
    "minimal": frozenset({"qkv", "attn_out", "mlp_up"}),
    "minimal_with_context": frozenset({"qkv", "context", "attn_out", "mlp_up"}),
}
# MaxText's names for them where ours differ: 'full' is jax.checkpoint without a policy; 'minimal_flash' is the
# former name of minimal_with_context (decoders.py: "will be deprecated soon")
REMAT_ALIASES: Final[dict[str, str]] = {"full": "nothing_saveable", "minimal_flash": "minimal_with_context"}
# matmuls a block re-runs in backward when its policy does not keep their output, in forward order
_NEEDED_GEMMS: Final = ("qkv", "attn_out", "mlp_up")


def is_remat_policy(checkpointing: str) -> bool:
    """Whether `checkpointing` names one of REMAT_POLICIES."""
    return checkpointing in REMAT_POLICIES


def recomputed_gemms(policy: str) -> tuple[str, ...]:
    """The block matmuls (layer_gemms names) that `policy` re-runs in backward (module docstring)."""
    kept = REMAT_POLICIES[policy]
    return tuple(name for name in _NEEDED_GEMMS if name not in kept)


def recomputes_attention(policy: str) -> bool:
    """Whether `policy` re-runs the attention kernel in backward: it does unless it keeps `context`."""
    return "context" not in REMAT_POLICIES[policy]


def policy_name(value: str) -> str | None:
    """A MaxText remat_policy value ('save_qkv_proj', 'remat_policy=full', 'remat_policy save_qkv_proj') as the
    policy it names in REMAT_POLICIES; None where it names none. A bare 'full' is not MaxText's: it stays the
    general full recomputation."""
    text = value.strip().lower()
    prefixed = re.match(r"remat[-_]policy[\s=:]*(.*)$", text)
    name = prefixed.group(1).strip() if prefixed else text
    if prefixed or name != "full":
        name = REMAT_ALIASES.get(name, name)
    return name if name in REMAT_POLICIES else None
