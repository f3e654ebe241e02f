"""The transformer as arithmetic: parameter counts, FLOPs, GEMM shapes and activation memory.

`transformer(spec)` resolves a ModelSpec's defaults into a `TransformerModel`, whose properties and
methods state each formula and its source. Notation: L layers, h hidden, a heads, kv key/value heads, d
head size (h / a unless the model sets it apart), f MLP inner size, V vocabulary, s sequence length, b
micro-batch, t tensor-parallel degree; for a mixture of experts E routed experts, k of them per token, S
shared experts, f_e one expert's inner size. Parameters are counted per weight matrix, so GQA (kv < a)
and gated MLPs (SwiGLU, three matrices) are exact; what is not modelled: BERT's token-type embeddings
and pooler, T5-style encoder-decoders and relative position biases, MoE blocks interleaved with dense
ones other than dense blocks first.

Multi-head latent attention (MLA; DeepSeek-V2, DeepSeek-AI 2024, section 2.1; DeepSeek-V3): the hidden
state goes down to a query latent (q_lora_rank, when set) and a key/value latent (kv_lora_rank) plus the
shared rotary key (qk_rope_head_dim), each latent is normed and goes up to every head's query (nope +
rope wide), key part and value (nope + v wide); attention then runs over a heads of query/key width d_qk =
nope + rope and value width d_v, and the output projection takes a d_v. Training runs it so (the
absorbed form is an inference trick), so its GEMMs are q_down, q_up, kv_down, kv_up and attn_out, the
down projections replicated over tensor parallelism (Megatron-Core MLASelfAttention), the rest split by
heads.

Mixture of experts (Shazeer et al. 2017; GShard, Lepikhin et al. 2021; Mixtral, Jiang et al. 2024):
every block's MLP is E expert MLPs and a router (an h x E linear layer); each token passes through
the k experts the router picks (and the S shared ones), so a block holds E + S expert MLPs of
parameters but a token's FLOPs are those of k + S of them: the "active" parameters. The expert
GEMMs are grouped (one per expert, each over the tokens routed to it): `gemm_experts` says how many
groups a GEMM's rows split into. The first `dense_layers` blocks may keep a dense MLP (DeepSeek-V3's
first three of 61): the model's blocks are then two kinds (`blocks`), each with its own per-layer
formulas (`dense_block` for the first), and the whole-model totals sum over them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from simulator.core.errors import ConfigError
from workloads.remat import REMAT_POLICIES, is_remat_policy, recomputed_gemms, recomputes_attention
from workloads.spec import MEGATRON_RECOMPUTE_DEFAULT, Checkpointing, ModelSpec

ACTIVATION_BYTES = 2  # bf16/fp16 activations, as Korthikanti et al. 2022 assume
LOGIT_BYTES = 4  # logits are kept in fp32 for the cross-entropy loss


@dataclass(frozen=True)
class TransformerModel:
    """A ModelSpec with its defaults resolved (kv_heads, ffn_hidden), and its cost formulas; with `mtp_layers`
    multi-token prediction modules after the last block (DeepSeek-V3 report section 2.2; Megatron-Core
    --mtp-num-layers): each one more block of the last kind and one more pass through the output layer and loss
    (its 2h x h projection and norms, under 1% of the module, are not counted)."""

    spec: ModelSpec
    kv_heads: int
    ffn_hidden: int
    mtp_layers: int = 0

    @property
    def head_dim(self) -> int:
        """d = h / a, or the model's own head_dim."""
        return self.spec.head_dim or self.spec.hidden // self.spec.heads

    @property
    def q_dim(self) -> int:
        """Width of the queries: a x d (= h unless head_dim is set apart); with MLA a x (nope + rope)."""
        mla = self.spec.mla
        return self.spec.heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim if mla else self.head_dim)

    @property
    def kv_dim(self) -> int:
        """Width of the K (and of the V) projection: kv x d (= h without GQA); with MLA the keys' (k_dim)."""
        return self.k_dim if self.spec.mla else self.kv_heads * self.head_dim

    @property
    def k_dim(self) -> int:
        """Width of the keys attention reads: kv_dim; with MLA a x (nope + rope), every head its own."""
        return self.q_dim if self.spec.mla else self.kv_dim

    @property
    def v_dim(self) -> int:
        """Width of the values: kv_dim; with MLA a x v_head_dim."""
        return self.spec.heads * self.spec.mla.v_head_dim if self.spec.mla else self.kv_dim

    @property
    def out_dim(self) -> int:
        """Width of the attention output (the output projection's input): q_dim; with MLA a x v_head_dim."""
        return self.v_dim if self.spec.mla else self.q_dim

    # --- parameters --------------------------------------------------------------------------

    @property
    def attention_params_per_layer(self) -> int:
        """Q and O are h x (a d) (h x h when d = h / a), K and V are h x (kv d) (Ainslie et al. 2023, GQA);
        with biases (GPT-2/3, BERT) add a d + 2 kv d + h. With MLA: its GEMMs' matrices (layer_gemms) and the
        two latents' RMSNorm weights (q_lora_rank + kv_lora_rank)."""
        mla = self.spec.mla
        if mla:
            latents = (mla.q_lora_rank or 0) + mla.kv_lora_rank
            return sum(n * k for name, _, n, k in self._attention_gemms(1)) + latents
        h = self.spec.hidden
        weights = 2 * h * self.q_dim + 2 * h * self.kv_dim
        return weights + (self.q_dim + 2 * self.kv_dim + h if self.spec.bias else 0)

    @property
    def expert_ffn_hidden(self) -> int:
        """f_e: one expert's inner size (ModelSpec.expert_ffn_hidden, default ffn_hidden)."""
        return self.spec.expert_ffn_hidden or self.ffn_hidden

    def _mlp_params(self, f: int) -> int:
        h = self.spec.hidden
        matrices = 3 if self.spec.gated_mlp else 2
        biases = (matrices - 1) * f + h if self.spec.bias else 0
        return matrices * h * f + biases

    @property
    def mlp_params_per_layer(self) -> int:
        """2 h f (up, down), or 3 h f when gated (gate, up, down; Shazeer 2020, Llama); with biases
        add f (or 2 f) + h. A mixture of experts: E + S such MLPs of width f_e and the router's h E."""
        if not self.spec.moe:
            return self._mlp_params(self.ffn_hidden)
        return self.expert_params_per_layer + self.spec.shared_experts * self._mlp_params(
            self.expert_ffn_hidden) + self.spec.hidden * self.spec.experts

    @property
    def expert_params_per_layer(self) -> int:
        """The routed experts' parameters of one block, E MLPs of width f_e (0 for a dense model): what
        expert parallelism splits; the rest of the block is replicated over the expert-parallel ranks."""
        return self.spec.experts * self._mlp_params(self.expert_ffn_hidden) if self.spec.moe else 0

    @property
    def norm_params_per_layer(self) -> int:
        """Two norms per block: LayerNorm with bias has 2 h each; RMSNorm (Llama) and MPT's
        bias-free LayerNorm have h."""
        return 2 * self._norm_params

    @property
    def params_per_layer(self) -> int:
        """Attention + MLP + norms of one transformer block."""
        return self.attention_params_per_layer + self.mlp_params_per_layer + self.norm_params_per_layer

    @property
    def matmul_params_per_layer(self) -> int:
        """The weight-matrix parameters one token meets in a block (no biases, no norms): what the GEMMs
        multiply; of a mixture of experts the router, the k routed and S shared experts (its active
        matrices)."""
        return sum(m * n * k for _, m, n, k in self.layer_gemms(1))

    @property
    def embedding_params(self) -> int:
        """V h token embedding, plus max_seq_len x h when positions are learned (GPT-2/3, BERT)."""
        positions = self.spec.max_seq_len if self.spec.learned_positions else 0
        return (self.spec.vocab + positions) * self.spec.hidden

    @property
    def output_params(self) -> int:
        """V h output projection; 0 when it is tied to the token embedding (GPT-2/3, MPT, BERT)."""
        return 0 if self.spec.tied_embeddings else self.spec.vocab * self.spec.hidden

    @property
    def final_norm_params(self) -> int:
        """The norm after the last block (for BERT, the embedding LayerNorm: same count)."""
        return self._norm_params

    @cached_property
    def dense_block(self) -> TransformerModel:
        """The model of one of a mixture's first `dense_layers` blocks: the same attention and norms, a dense
        MLP of ffn_hidden (the model itself when it is dense)."""
        if not self.spec.moe:
            return self
        return transformer(self.spec.model_copy(update={
            "experts": 1, "experts_per_token": 1, "shared_experts": 0, "expert_ffn_hidden": None, "dense_layers": 0}))

    @property
    def moe_layers(self) -> int:
        """Blocks whose MLP is a mixture of experts, the MTP modules' included (0 for a dense model)."""
        return self.block_layers - self.spec.dense_layers if self.spec.moe else 0

    @property
    def block_layers(self) -> int:
        """The blocks a step runs: the model's layers and its multi-token prediction modules after them."""
        return self.spec.layers + self.mtp_layers

    @cached_property
    def blocks(self) -> tuple[tuple[TransformerModel, int], ...]:
        """The model's kinds of block with how many of each, in order: (dense_block, dense_layers) first when
        a mixture keeps some dense, then (self, the mixture blocks); ((self, L),) when all are alike."""
        if not self.spec.moe or not self.spec.dense_layers:
            return ((self, self.block_layers),)
        return ((self.dense_block, self.spec.dense_layers), (self, self.moe_layers))

    def block_counts(self, start: int, stop: int) -> tuple[tuple[TransformerModel, int], ...]:
        """Blocks `start` .. `stop` - 1 (a pipeline chunk's) by kind, in order; kinds with none left out."""
        dense = max(0, min(stop, self.spec.dense_layers if self.spec.moe else 0) - start)
        counts = ((self.dense_block, dense), (self, stop - start - dense)) if dense else ((self, stop - start),)
        return tuple((block, n) for block, n in counts if n > 0)

    @property
    def root_params(self) -> int:
        """Parameters outside the blocks: embeddings, output projection and final norm."""
        return self.embedding_params + self.output_params + self.final_norm_params

    @property
    def total_params(self) -> int:
        """Sum over blocks of params_per_layer + embeddings + output projection + final norm."""
        return sum(n * block.params_per_layer for block, n in self.blocks) + self.root_params

    @property
    def active_params(self) -> int:
        """What one token meets: total_params less the routed experts it is not sent to, (1 - k / E) of each
        mixture block's expert parameters (total_params for a dense model)."""
        unused = self.moe_layers * self.expert_params_per_layer * (self.spec.experts - self.spec.experts_per_token)
        return self.total_params - unused // self.spec.experts

    @property
    def _norm_params(self) -> int:
        return (2 if self.spec.bias else 1) * self.spec.hidden

    # --- FLOPs -------------------------------------------------------------------------------

    def layer_gemms(self, tokens: int) -> list[tuple[str, int, int, int]]:
        """The forward GEMMs of one block as (name, m, n, k), C[m, n] = A[m, k] B[k, n], m = tokens.

        qkv is fused (Megatron, MPT Wqkv, GPT-2 c_attn): n = a d + 2 kv d; for gated MLPs mlp_up
        fuses gate and up (Megatron's linear_fc1): n = 2 f. Each costs 2 m n k FLOPs; the attention
        score and value matmuls are not weight GEMMs (see attention_forward_flops). A mixture of
        experts replaces the MLP's pair by the router (n = E), the shared experts as one MLP S f_e wide,
        and the routed experts' pair over k x tokens rows, every token once per expert it is routed to
        (grouped by expert: gemm_experts).
        """
        h, f = self.spec.hidden, self.ffn_hidden
        gate = 2 if self.spec.gated_mlp else 1
        attention = self._attention_gemms(tokens)
        if not self.spec.moe:
            return [*attention, ("mlp_up", tokens, gate * f, h), ("mlp_down", tokens, h, f)]
        fe, shared, routed = self.expert_ffn_hidden, self.spec.shared_experts, tokens * self.spec.experts_per_token
        shared_gemms = [("shared_up", tokens, gate * shared * fe, h), ("shared_down", tokens, h, shared * fe)]
        return [*attention, ("router", tokens, self.spec.experts, h), *(shared_gemms if shared else []),
                ("mlp_up", routed, gate * fe, h), ("mlp_down", routed, h, fe)]

    def sharded_layer_gemms(self, tokens: int, tp: int,
                            expert_tp: int | None = None) -> list[tuple[str, int, int, int]]:
        """layer_gemms on one GPU of a tensor-parallel group of `tp` (sharded_gemms). With the routed experts
        whole on each GPU (`expert_tp` 1, ParallelSpec.etp) their pair is not split: each GPU runs it over its own
        1 / tp of the routed rows (its sequence-parallel share of the tokens), at full width."""
        full = self.layer_gemms(tokens)
        gemms = sharded_gemms(full, tp)
        if not self.spec.moe or expert_tp != 1 or tp == 1:
            return gemms
        whole = {name: (name, -(-m // tp), n, k) for name, m, n, k in full if name in ("mlp_up", "mlp_down")}
        return [whole.get(name, (name, m, n, k)) for name, m, n, k in gemms]

    def lora_adapters(self, gemms: list[tuple[str, int, int, int]],
                      targets: tuple[str, ...] | None) -> list[tuple[str, int, int, int]]:
        """LoRA's adapters beside a block's weight GEMMs `gemms` (as one GPU runs them, sharded_layer_gemms), each as
        (target, m, n, k) of the weight share it adapts: x A [k, r] then B [r, n] (Hu et al. 2021). `targets` None:
        one beside every weight GEMM. A fused layer (qkv, mlp_up) has one adapter over its whole width, its parts
        (q, k, v; a gated MLP's gate and up, apart in Hugging Face models) one each over theirs: q_dim and kv_dim of
        the qkv width, half of a gated mlp_up. ConfigError names a target the block lacks."""
        if targets is None:
            return gemms
        shapes = {name: (m, n, k) for name, m, n, k in gemms}
        qkv = self.q_dim + 2 * self.kv_dim
        parts = {"q": ("qkv", self.q_dim / qkv), "k": ("qkv", self.kv_dim / qkv), "v": ("qkv", self.kv_dim / qkv),
                 "gate": ("mlp_up", 0.5), "up": ("mlp_up", 0.5 if self.spec.gated_mlp else 1.0)}
        adapters = []
        for target in targets:
            layer, share = parts.get(target, (target, 1.0))
            if target == "gate" and not self.spec.gated_mlp:
                raise ConfigError(f"lora_targets gate: model {self.spec.name} has no gated MLP (its first MLP matrix "
                                  "is up, or mlp_up)")
            if layer not in shapes:
                raise ConfigError(f"lora_targets {target}: model {self.spec.name} has no {layer} matrix (its block's "
                                  f"weight matrices: {', '.join(shapes)})")
            m, n, k = shapes[layer]
            adapters.append((target, m, max(1, round(n * share)), k))
        return adapters

    def _attention_gemms(self, tokens: int) -> list[tuple[str, int, int, int]]:
        """The attention's weight GEMMs: the fused qkv and attn_out, or MLA's (module docstring): q_down (h to
        q_lora_rank) and q_up (to a (nope + rope)), or q_up straight from h without a query latent; kv_down
        (h to kv_lora_rank + rope, the shared rotary key riding along), kv_up (to a (nope + v)); attn_out."""
        h, mla = self.spec.hidden, self.spec.mla
        if mla is None:
            return [("qkv", tokens, self.q_dim + 2 * self.kv_dim, h), ("attn_out", tokens, h, self.q_dim)]
        heads = self.spec.heads
        query = ([("q_down", tokens, mla.q_lora_rank, h), ("q_up", tokens, self.q_dim, mla.q_lora_rank)]
                 if mla.q_lora_rank else [("q_up", tokens, self.q_dim, h)])
        return [*query, ("kv_down", tokens, mla.kv_lora_rank + mla.qk_rope_head_dim, h),
                ("kv_up", tokens, heads * (mla.qk_nope_head_dim + mla.v_head_dim), mla.kv_lora_rank),
                ("attn_out", tokens, h, self.out_dim)]

    def unfused_gemms(self) -> list[tuple[str, float, int]]:
        """A dense block's weight matmuls one by one in forward order, as separate Linear layers run them
        (torchtitan's Llama: wq, wk, wv, wo, then w1, w3, w2, or up and down without a gate): (the layer_gemms
        entry it belongs to, its share of that entry's FLOPs, its output width before tensor parallelism).
        ConfigError for a mixture of experts or MLA, whose matmuls are not laid out so."""
        if self.spec.moe or self.spec.mla:
            raise ConfigError("activation_checkpointing 'op' (torchtitan's per-op policy) is modelled for dense "
                              "blocks without MLA; use selective or full for this model")
        h, f, q, kv = self.spec.hidden, self.ffn_hidden, self.q_dim, self.kv_dim
        width = q + 2 * kv
        mlp = ([("mlp_up", 0.5, f), ("mlp_up", 0.5, f)] if self.spec.gated_mlp else [("mlp_up", 1.0, f)])
        return [("qkv", q / width, q), ("qkv", kv / width, kv), ("qkv", kv / width, kv), ("attn_out", 1.0, h),
                *mlp, ("mlp_down", 1.0, h)]

    def op_recomputed_gemms(self) -> list[tuple[str, float, int]]:
        """The matmuls torchtitan's per-op policy recomputes (activation_checkpointing 'op'): every second one
        (torchtitan/models/llama/parallelize_llama.py: "save every other mm", with SDPA and reduce-scatter
        outputs saved), up to the last output backward needs; the block's last matmul is never re-run (the
        recomputation stops once every tensor backward needs is back: torch.utils.checkpoint's early stop)."""
        gemms = self.unfused_gemms()
        return [gemm for i, gemm in enumerate(gemms) if i % 2 == 1 and i < len(gemms) - 1]

    def remat_recomputed_gemms(self, policy: str) -> tuple[str, ...]:
        """The layer_gemms entries a JAX policy re-runs in backward (workloads.remat: every needed matmul output
        the policy does not keep). nothing_saveable re-runs every matmul but the down projections, whatever the
        block; the other policies ConfigError for a mixture of experts or MLA, whose tensors MaxText names
        otherwise."""
        if policy == "nothing_saveable":
            return tuple(name for name, *_ in self.layer_gemms(1) if name not in ("mlp_down", "shared_down"))
        if self.spec.moe or self.spec.mla:
            raise ConfigError(f"activation_checkpointing {policy!r} (a JAX policy as MaxText names it) is modelled "
                              "for dense blocks without MLA; use nothing_saveable, selective or full for this model")
        return recomputed_gemms(policy)

    def gemm_experts(self, name: str) -> int:
        """Into how many expert GEMMs the rows of layer_gemms' `name` split: E for a mixture of experts'
        routed mlp_up and mlp_down, 1 otherwise."""
        return self.spec.experts if self.spec.moe and name in ("mlp_up", "mlp_down") else 1

    def attention_forward_flops(self, tokens: int, seq_len: int) -> float:
        """Q K^T and softmax x V: 2 x 2 x tokens x s x a d, a d = h unless head_dim is set apart (Narayanan
        et al. 2021, section 5.1); with MLA 2 x tokens x s x a (d_qk + d_v).

        Counted in full, not halved for the causal mask, as Narayanan (and MFU as usually reported)
        does; GQA does not change it (every query head still attends over s keys).
        """
        return 2.0 * tokens * seq_len * (self.q_dim + self.out_dim)

    def layer_forward_flops(self, tokens: int, seq_len: int) -> float:
        """2 x matmul_params_per_layer x tokens + attention_forward_flops; for GPT-style blocks
        24 b s h^2 + 4 b s^2 h (Narayanan et al. 2021, eq. 3 derivation)."""
        return 2.0 * self.matmul_params_per_layer * tokens + self.attention_forward_flops(tokens, seq_len)

    def head_forward_flops(self, tokens: int) -> float:
        """Output projection to the vocabulary: 2 h V per token (Narayanan et al. 2021, 2 B s h V)."""
        return 2.0 * self.spec.hidden * self.spec.vocab * tokens

    def model_flops_per_token(self, seq_len: int, routed_share: float = 1.0, packed_sample_len: int | None = None,
                              lora: bool = False) -> float:
        """Forward + backward = 3 x forward (backward is twice the forward; Kaplan et al. 2020 6N):
        6 (L matmul_params_per_layer + h V) + 12 L h s. The embedding lookup, norms, biases and
        softmax are not counted; this is the numerator of MFU (Narayanan et al. 2021, eq. 3 without
        recomputation; Chowdhery et al. 2022, appendix B). A mixture of experts whose capacity drops a
        share of the routed token-expert pairs computes only `routed_share` of its routed experts' GEMMs.
        Packed samples of `packed_sample_len` tokens attend within themselves: s is the sample's length.
        With LoRA's frozen weights the backward computes input gradients only: each weight GEMM once
        more, attention twice, 2 x forward + attention (the adapters' few FLOPs are not counted)."""
        routed = sum(m * n * k for name, m, n, k in self.layer_gemms(1) if self.gemm_experts(name) > 1)
        dropped = 2.0 * (1.0 - routed_share) * routed * self.moe_layers
        attended = min(seq_len, packed_sample_len or seq_len)
        forward = self.blocks_forward_flops(attended) - dropped + (1 + self.mtp_layers) * self.head_forward_flops(1)
        if lora:
            return 2.0 * forward + sum(n * block.attention_forward_flops(1, attended) for block, n in self.blocks)
        return 3.0 * forward

    def blocks_forward_flops(self, seq_len: int) -> float:
        """Forward FLOPs of all blocks for one token: the sum over kinds of count x layer_forward_flops."""
        return sum(n * block.layer_forward_flops(1, seq_len) for block, n in self.blocks)

    def hardware_flops_per_token(self, seq_len: int, checkpointing: Checkpointing) -> float:
        """model_flops_per_token plus what recomputation adds: full recomputes every block's
        forward once (not the output layer), giving Narayanan et al. 2021 eq. 3, 96 B s L h^2
        (1 + s/(6h) + V/(16 L h)) per B s tokens; selective recomputes only the attention score
        and value part (Korthikanti et al. 2022, selective activation recomputation), 4 L h s per token; op and
        JAX's policies the matmuls they re-run (op_recomputed_gemms, remat_recomputed_gemms) and, for a policy
        that does not keep attention's output, attention (dense blocks)."""
        mode = _checked(checkpointing)
        attention = self.block_layers * self.attention_forward_flops(1, seq_len)
        gemms = {name: 2.0 * m * n * k for name, m, n, k in self.layer_gemms(1)}
        if mode == "op":
            extra = self.block_layers * sum(gemms[name] * part for name, part, _ in self.op_recomputed_gemms())
        elif is_remat_policy(mode):
            extra = (self.block_layers * sum(gemms[name] for name in self.remat_recomputed_gemms(mode))
                     + (attention if recomputes_attention(mode) else 0.0))
        else:
            extra = {"none": 0.0, "selective": attention, "full": self.blocks_forward_flops(seq_len)}[mode]
        return self.model_flops_per_token(seq_len) + extra

    # --- activation memory -------------------------------------------------------------------

    def activation_bytes_per_layer(self, micro_batch: int, seq_len: int, checkpointing: Checkpointing,
                                   tp: int = 1, sequence_parallel: bool = False, routed_load: float = 1.0,
                                   packed_sample_len: int | None = None,
                                   recompute_modules: tuple[str, ...] = MEGATRON_RECOMPUTE_DEFAULT) -> float:
        """Bytes one block keeps for its backward (Korthikanti et al. 2022, Table 2), 16-bit
        activations and 1-byte dropout masks:

        none: s b h (34 + 5 a s / h); with TP s b h (10 + 24/t + 5 a s / (h t)); with TP and
        sequence parallelism s b h / t (34 + 5 a s / h). selective: the 5 a s / h term (attention
        scores, softmax, dropout) is recomputed, leaving s b h 34 (10 + 24/t with TP, 34/t with SP).
        full: only the block's input, 2 s b h (sharded over t with SP, as Megatron stores it). op
        (torchtitan's per-op policy): the block's input, the outputs of every first, third, ... matmul
        (unfused_gemms: a column-parallel one's split over t, a row-parallel one's partial sums whole), the
        attention output with its fp32 log-sum-exp, and, with SP, the two reduce-scatters' outputs. A JAX policy
        (workloads.remat): the block's input and the tensors the policy keeps, q/k/v and the MLP's up and gate
        outputs split over t, the output projection's partial sums whole, attention's output with its fp32
        log-sum-exp.
        The 34 assumes a GPT block (MHA, 4h GeLU MLP, dropout); for GQA/SwiGLU models it is an
        approximation. FlashAttention keeps no s x s tensors, so with it `none` is closer to
        `selective`. A mixture of experts keeps its MLP's two 16-bit intermediates (16 s b h at the
        4 h width of the 34) at the width a token meets, (k + S) f_e instead of f, and the k routed
        copies of its input (2 k s b h), all split over t (the copies too, under sequence parallelism); on
        an expert-parallel rank that gets `routed_load` times the balanced share of routed tokens, its
        routed intermediates and copies are that much more (k becomes routed_load x k). MLA keeps its
        queries, keys, values and the output projection's input at their own widths (2 B x (q + k + v +
        out) a token where the 34 counts 4 h of them, split over t by heads) and its latents before and after
        their norm (2 x 2 B x (q_lora + kv_lora) and the rotary key's 2 B x rope a token, replicated over t).
        Packed samples of `packed_sample_len` l tokens keep l scores a query, not s: 5 a l / h.
        selective re-runs Megatron-Core's `recompute_modules` (default core_attn: the scores term) and keeps no
        output of theirs (CheckpointWithoutOutput; transformer_layer.py, moe_layer.py, multi_latent_attention.py):
        layernorm drops the two norms' outputs, what the QKV GEMM and the MLP read (2 x 2 s b h); mlp a dense
        block's MLP intermediates (the 16 s b h / t of the 34); moe_act half the routed experts' (the activation's
        output, 8 s b h k f_e / (4 h t)); moe the routed and shared experts' intermediates and the routed copies;
        shared_experts the shared experts'; mla_up_proj MLA's queries, keys and values (2 B x (q + k + v) a
        token, over t). A module naming no core_attn keeps the scores, as without recomputation.
        """
        s, b, h, a, t = seq_len, micro_batch, self.spec.hidden, self.spec.heads, tp
        sbh = float(s * b * h)
        mode = _checked(checkpointing)
        if mode == "full":
            return ACTIVATION_BYTES * sbh / (t if sequence_parallel else 1)
        if mode == "op":
            row_parallel = ("attn_out", "mlp_down")
            kept = sum(width if name in row_parallel else width / t
                       for i, (name, _, width) in enumerate(self.unfused_gemms()) if i % 2 == 0)
            shard = t if sequence_parallel else 1
            kept += h / shard + self.out_dim / t + (2 * h / t if sequence_parallel and t > 1 else 0.0)
            return float(s * b) * (ACTIVATION_BYTES * kept + 4.0 * a / t)
        if is_remat_policy(mode):
            self.remat_recomputed_gemms(mode)  # dense blocks only
            names = REMAT_POLICIES[mode]
            widths = {"qkv": (self.q_dim + 2 * self.kv_dim) / t, "attn_out": float(h),
                      "mlp_up": (2 if self.spec.gated_mlp else 1) * self.ffn_hidden / t,
                      "context": self.out_dim / t}
            kept = h / (t if sequence_parallel else 1) + sum(widths[name] for name in names)
            return float(s * b) * (ACTIVATION_BYTES * kept + (4.0 * a / t if "context" in names else 0.0))
        keeps_scores = mode == "none" or (mode == "selective" and "core_attn" not in recompute_modules)
        scores = 5.0 * a * min(s, packed_sample_len or s) / h if keeps_scores else 0.0
        extra = 0.0  # beyond the 34: a mixture's wider MLP and routed copies, MLA's widths and latents
        if self.spec.moe:
            k = self.spec.experts_per_token * routed_load
            width = k + self.spec.shared_experts
            extra = sbh * (16.0 * (width * self.expert_ffn_hidden - self.ffn_hidden) / (4.0 * h) / t
                           + 2.0 * k / (t if sequence_parallel else 1))
        mla = self.spec.mla
        if mla:
            heads = self.q_dim + self.k_dim + self.v_dim + self.out_dim - 4 * h
            latents = 2 * ((mla.q_lora_rank or 0) + mla.kv_lora_rank) + mla.qk_rope_head_dim
            extra += float(s * b) * ACTIVATION_BYTES * (heads / t + latents)
        dropped = self._recomputed_outputs_bytes(micro_batch, seq_len, tp, sequence_parallel, routed_load,
                                                 recompute_modules) if mode == "selective" else 0.0
        if sequence_parallel:
            return sbh / t * (34.0 + scores) + extra - dropped
        return sbh * (10.0 + 24.0 / t + scores / t) + extra - dropped

    def _recomputed_outputs_bytes(self, micro_batch: int, seq_len: int, tp: int, sequence_parallel: bool,
                                  routed_load: float, modules: tuple[str, ...]) -> float:
        """What selective recomputation's modules drop from a block's kept activations
        (activation_bytes_per_layer)."""
        sbh, t = float(seq_len * micro_batch * self.spec.hidden), tp
        replicated = t if sequence_parallel else 1
        intermediates = 16.0 * sbh / (4.0 * self.spec.hidden) / t  # a unit of MLP width's two 16-bit tensors
        k = self.spec.experts_per_token * routed_load if self.spec.moe else 0.0
        shared = self.spec.shared_experts if self.spec.moe else 0
        dropped = {"layernorm": 4.0 * sbh / replicated,
                   "mlp": 0.0 if self.spec.moe else 16.0 * sbh / t,
                   "moe_act": intermediates * k * self.expert_ffn_hidden / 2.0,
                   "moe": intermediates * (k + shared) * self.expert_ffn_hidden + 2.0 * k * sbh / replicated,
                   "shared_experts": intermediates * shared * self.expert_ffn_hidden,
                   "mla_up_proj": (ACTIVATION_BYTES * seq_len * micro_batch * (self.q_dim + self.k_dim + self.v_dim)
                                   / t if self.spec.mla else 0.0)}
        return sum(dropped.get(name, 0.0) for name in set(modules))

    def layers_activation_bytes(self, micro_batch: int, seq_len: int, checkpointing: Checkpointing,
                                tp: int = 1, sequence_parallel: bool = False) -> float:
        """Sum over blocks of activation_bytes_per_layer (all blocks on one GPU, no pipeline parallelism)."""
        return sum(n * block.activation_bytes_per_layer(micro_batch, seq_len, checkpointing, tp, sequence_parallel)
                   for block, n in self.blocks)

    def embedding_activation_bytes(self, micro_batch: int, seq_len: int) -> float:
        """The embedding dropout mask, s b h bytes (Korthikanti et al. 2022, total activation memory)."""
        return float(seq_len * micro_batch * self.spec.hidden)

    def output_activation_bytes(self, micro_batch: int, seq_len: int, tp: int = 1) -> float:
        """Final norm and output projection inputs, 4 s b h, plus the fp32 logits for the loss,
        4 s b V / t with a vocabulary-parallel output layer (Korthikanti et al. 2022, total activation memory:
        4 s b h + 4 s b v); the logits usually dominate."""
        s, b = seq_len, micro_batch
        return float(2 * ACTIVATION_BYTES * s * b * self.spec.hidden) + LOGIT_BYTES * s * b * self.spec.vocab / tp


def _checked(checkpointing: str) -> str:
    if checkpointing not in ("none", "selective", "full", "op") and not is_remat_policy(checkpointing):
        raise ConfigError(f"activation_checkpointing must be none, selective, full, op or one of JAX's policies "
                          f"({', '.join(REMAT_POLICIES)}) (got {checkpointing!r})")
    return checkpointing


REPLICATED_GEMMS = ("router", "q_down", "kv_down")  # computed whole on every tensor-parallel rank


def sharded_gemms(gemms: list[tuple[str, int, int, int]], tp: int) -> list[tuple[str, int, int, int]]:
    """Megatron's split of a block's GEMMs over `tp` GPUs: column-parallel qkv (MLA's q_up, kv_up), mlp_up
    and shared_up (n / tp), row-parallel attn_out, mlp_down and shared_down (k / tp); the router and MLA's
    down projections are replicated (Megatron-Core MLASelfAttention)."""
    rows = ("attn_out", "mlp_down", "shared_down")
    return [(name, m, n, k) if name in REPLICATED_GEMMS else (name, m, n, -(-k // tp)) if name in rows
            else (name, m, -(-n // tp), k) for name, m, n, k in gemms]


def transformer(spec: ModelSpec, mtp_layers: int = 0) -> TransformerModel:
    """Resolve defaults: kv_heads = heads (multi-head attention); ffn_hidden = 4 h for plain MLPs
    (Vaswani et al. 2017, GPT-2/3); gated MLPs need ffn_hidden given (Llama's is not 4 h)."""
    if spec.ffn_hidden is None and spec.gated_mlp:
        moe = (" (for a mixture of experts, a dense block's MLP width, the baseline its activation memory is "
               "counted from: Qwen3-30B-A3B's intermediate_size 6144)" if spec.moe else "")
        raise ConfigError(f"model {spec.name}: ffn_hidden is required when gated_mlp is true (llama2-7b: 11008){moe}")
    ffn = spec.ffn_hidden if spec.ffn_hidden is not None else 4 * spec.hidden
    return TransformerModel(spec=spec, kv_heads=spec.kv_heads or spec.heads, ffn_hidden=ffn, mtp_layers=mtp_layers)
