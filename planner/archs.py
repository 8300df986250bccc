"""Per-architecture rules from llama.cpp's `load_arch_hparams` (src/models/*.cpp).

Each rule fills what the generic reader cannot know: which layers use a sliding
window, logit soft-capping, recurrent and expert layers, and which graph builder
computes the arena. An architecture without a rule still gets a plan, marked as an
estimate until llama.cpp's dry run confirms it at load (app.engine.verify).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from planner.errors import GGUFError, ModelError
from planner.hparams import (
    GATING_SIGMOID,
    GATING_SOFTMAX,
    AltUp,
    Experts,
    GraniteScales,
    LatentAttention,
    Rwkv,
    SparseIndexer,
    StateSpace,
)
from planner.model import SWA_CHUNKED, SWA_STANDARD, swa_pattern

if TYPE_CHECKING:
    from planner.anatomy import _Meta
    from planner.model import ModelAnatomy

ArchRule = Callable[["ModelAnatomy", "_Meta"], None]


def _load_swa_pattern(anatomy: ModelAnatomy, meta: _Meta, n_pattern: int, dense_first: bool = False) -> None:
    """llama_model_base::load_swa_pattern: an explicit per-layer array wins, else a period."""
    value = meta.get("attention.sliding_window_pattern")
    if isinstance(value, list) and len(value) == anatomy.n_layer:
        pattern = [bool(v) for v in value]
    else:
        if isinstance(value, int) and not isinstance(value, bool):
            n_pattern = value
        pattern = swa_pattern(anatomy.n_layer, n_pattern, dense_first)
    for layer, is_swa in zip(anatomy.layers, pattern):
        layer.is_swa = is_swa


def _plain(anatomy: ModelAnatomy, meta: _Meta) -> None:
    """Dense attention on every layer, no sliding window (experts read when present)."""
    _experts(anatomy, meta)


def _experts(anatomy: ModelAnatomy, meta: _Meta) -> None:
    """Mixture-of-experts hyper-parameters (llama_model_base::load_hparams and the arch loaders)."""
    n_expert = meta.int_or("expert_count", 0)
    if n_expert <= 0:
        return
    used = meta.get("expert_used_count", 0)
    anatomy.experts = Experts(
        n_expert=n_expert,
        n_used=max(used) if isinstance(used, list) and used else int(used or 0),
        n_shared=meta.int_or("expert_shared_count", 0),
        weights_scale=meta.float_or("expert_weights_scale", 0.0),
        weights_norm=bool(meta.get("expert_weights_norm", False)),
        gating_func=meta.int_or("expert_gating_func", 0),
    )


def _gemma2(anatomy: ModelAnatomy, meta: _Meta) -> None:
    anatomy.swa_type = SWA_STANDARD
    anatomy.n_swa = meta.int_or("attention.sliding_window", 4096)
    _load_swa_pattern(anatomy, meta, 2)
    anatomy.f_attn_softcap = meta.float_or("attn_logit_softcapping", 0.0)
    anatomy.f_final_softcap = meta.float_or("final_logit_softcapping", 0.0)


def _gemma3(anatomy: ModelAnatomy, meta: _Meta) -> None:
    n_swa = meta.int_or("attention.sliding_window", 0)
    if n_swa > 0:
        anatomy.swa_type = SWA_STANDARD
        anatomy.n_swa = n_swa
        _load_swa_pattern(anatomy, meta, 6)
    anatomy.f_final_softcap = meta.float_or("final_logit_softcapping", 0.0)


# Gemma 3n (llama_model_gemma3n::load_arch_hparams): only the first 20 layers own a KV cache; each later
# layer reads the cache of the last owner of its kind (layer 18's when windowed, layer 19's when global)
GEMMA3N_KV_LAYERS = 20


def gemma3n_kv_source(anatomy: ModelAnatomy, il: int) -> int:
    """The layer whose KV cache layer `il` attends to (itself when it owns one); Gemma 4 shares the same
    way past its own n_layer_kv_from_start."""
    n_kv = anatomy.n_layer_kv_from_start
    if il < n_kv:
        return il
    return n_kv - (2 if anatomy.layers[il].is_swa else 1)


def _share_kv_caches(anatomy: ModelAnatomy, meta: _Meta, n_kv: int) -> None:
    """Layers from `n_kv` on own no cache; each must reuse one in its own cache (windowed or not)."""
    for layer in anatomy.layers[n_kv:]:
        layer.has_kv = False
        source = anatomy.layers[gemma3n_kv_source(anatomy, layer.index)]
        if source.is_swa != layer.is_swa:
            raise ModelError(
                meta.path,
                f"{anatomy.architecture} layer {layer.index} would reuse layer {source.index}'s KV cache, which "
                "is in the other cache (sliding window or not): llama.cpp aborts",
            )


def _gemma3n_tensor_layers(anatomy: ModelAnatomy) -> None:
    """Where llama.cpp's tensor table puts Gemma 3n's global tensors: the AltUp projections with the
    output layer, the per-layer projection and its norm with layer 0 (LLM_TENSOR_LAYER_REPEATING,
    created as block 0), so that a quantized projection is repacked like any layer matrix."""
    to_output = ("altup_proj.weight", "altup_unembd_proj.weight")
    to_layer0 = ("per_layer_model_proj.weight", "per_layer_proj_norm.weight")
    others = anatomy.other_tensors
    anatomy.output_tensors += [t for t in others if t.name in to_output]
    anatomy.layers[0].tensors += [t for t in others if t.name in to_layer0]
    anatomy.other_tensors = [t for t in others if t.name not in to_output + to_layer0]


def _gemma3n(anatomy: ModelAnatomy, meta: _Meta) -> None:
    """Sliding window on four of every five layers (the window is required), KV caches shared past
    layer 20, and the fixed AltUp / Laurel / per-layer-input sizes of llama_hparams."""
    anatomy.swa_type = SWA_STANDARD
    anatomy.n_swa = meta.require_int("attention.sliding_window")
    _load_swa_pattern(anatomy, meta, 5)
    if not any(layer.is_swa for layer in anatomy.layers):
        raise ModelError(meta.path, "gemma3n without a sliding-window layer: llama.cpp aborts (is_swa_any)")
    anatomy.n_layer_kv_from_start = GEMMA3N_KV_LAYERS
    _share_kv_caches(anatomy, meta, GEMMA3N_KV_LAYERS)
    _gemma3n_tensor_layers(anatomy)
    anatomy.f_final_softcap = 30.0  # always applied (llama_hparams' default, not read from the header)
    anatomy.altup = AltUp()


def _gemma4_swa_pattern(anatomy: ModelAnatomy, meta: _Meta) -> None:
    """The per-layer sliding-window array is required (llama_model_gemma4::load_arch_hparams); layers past
    its end are global."""
    value = meta.get("attention.sliding_window_pattern")
    if not isinstance(value, list) or len(value) > 512:
        raise GGUFError(meta.path, f"{meta.arch}.attention.sliding_window_pattern is not a per-layer array")
    for layer in anatomy.layers:
        layer.is_swa = layer.index < len(value) and bool(value[layer.index])


def _gemma4(anatomy: ModelAnatomy, meta: _Meta) -> None:
    """Gemma 4: windowed layers from a per-layer array (their own head size), the last
    shared_kv_layers layers reading an earlier layer's cache as in Gemma 3n, optional per-layer
    embeddings and experts beside a dense FFN."""
    anatomy.swa_type = SWA_STANDARD
    anatomy.n_swa = meta.require_int("attention.sliding_window")
    _gemma4_swa_pattern(anatomy, meta)
    for key in ("embedding_length_per_layer_input", "attention.key_length_swa", "attention.value_length_swa"):
        meta.require_int(key)
    if meta.int_or("attention.key_length_swa", 0) != meta.int_or("attention.value_length_swa", 0):
        raise ModelError(meta.path, "Gemma 4 requires n_embd_head_k_swa == n_embd_head_v_swa")
    layer0 = anatomy.layers[0]
    if layer0.head_dim_k != layer0.head_dim_v:
        raise ModelError(meta.path, "Gemma 4 requires n_embd_head_k == n_embd_head_v")
    if not any(layer.is_swa for layer in anatomy.layers):
        raise ModelError(meta.path, "gemma4 without a sliding-window layer: llama.cpp aborts (is_swa_any)")
    n_kv = anatomy.n_layer - meta.int_or("attention.shared_kv_layers", 0)
    if n_kv < 2:  # GGML_ASSERT(n_layer_kv_from_start >= 2) in the cache's layer-reuse callback
        raise ModelError(meta.path, "gemma4 with fewer than 2 layers owning a KV cache: llama.cpp aborts")
    anatomy.n_layer_kv_from_start = n_kv
    _share_kv_caches(anatomy, meta, n_kv)
    anatomy.n_embd_per_layer = meta.int_or("embedding_length_per_layer_input", 0)
    to_layer0 = ("per_layer_model_proj.weight", "per_layer_proj_norm.weight")
    anatomy.layers[0].tensors += [t for t in anatomy.other_tensors if t.name in to_layer0]
    anatomy.other_tensors = [t for t in anatomy.other_tensors if t.name not in to_layer0]
    anatomy.f_final_softcap = meta.float_or("final_logit_softcapping", 0.0)
    _experts(anatomy, meta)


def _olmo2(anatomy: ModelAnatomy, meta: _Meta) -> None:
    # Olmo 3 declares a sliding window: 3 of every 4 layers use it (llama_model_olmo2::load_arch_hparams)
    n_swa = meta.int_or("attention.sliding_window", 0)
    if n_swa > 0:
        anatomy.swa_type = SWA_STANDARD
        anatomy.n_swa = n_swa
        _load_swa_pattern(anatomy, meta, 4)


def _exaone4(anatomy: ModelAnatomy, meta: _Meta) -> None:
    # only the 64-layer (32B) model has windowed layers, 3 of every 4 (llama_model_exaone4::load_arch_hparams)
    if anatomy.n_layer == 64:
        anatomy.swa_type = SWA_STANDARD
        anatomy.n_swa = meta.int_or("attention.sliding_window", 4096)
        _load_swa_pattern(anatomy, meta, 4)


def _cohere2(anatomy: ModelAnatomy, meta: _Meta) -> None:
    # every 4th layer is global (no RoPE), the rest windowed; logits scaled (llama_model_cohere2)
    anatomy.swa_type = SWA_STANDARD
    anatomy.n_swa = meta.int_or("attention.sliding_window", 4096)
    _load_swa_pattern(anatomy, meta, 4)
    anatomy.f_logit_scale = meta.float_or("logit_scale", 0.0)


def _command_r(anatomy: ModelAnatomy, meta: _Meta) -> None:
    # cohere2's parallel layer without the window, logits scaled when the header says so
    anatomy.f_logit_scale = meta.float_or("logit_scale", 0.0)


def _qwen3vl(anatomy: ModelAnatomy, meta: _Meta) -> None:
    # the text model of Qwen3-VL: qwen3 (or qwen3moe) whose first layers add "deepstack" slices of a
    # wider input embedding (n_embd x (1 + n_deepstack_layers)); multi-section RoPE keeps the sizes
    _plain(anatomy, meta)
    n_deepstack = meta.int_or("n_deepstack_layers", 0)
    anatomy.n_deepstack = n_deepstack
    anatomy.n_embd_inp = anatomy.n_embd * (1 + n_deepstack)
    anatomy.n_pos_per_embd = 4  # multi-section RoPE: four positions a token


def _llama4(anatomy: ModelAnatomy, meta: _Meta) -> None:
    """llama_model_llama4::load_arch_hparams: experts every n-th layer; without a sliding-window key (or
    with one that is not 0) three of every four layers attend within 8,192-token chunks and every
    fourth has no RoPE; a window of 0 turns both off."""
    _experts(anatomy, meta)
    if anatomy.experts is None:
        raise GGUFError(meta.path, "llama4 model cannot have zero experts (llama.cpp refuses it)")
    step = meta.get("interleave_moe_layer_step")
    if isinstance(step, bool) or not isinstance(step, int):
        raise GGUFError(meta.path, "required metadata llama4.interleave_moe_layer_step is missing")
    anatomy.experts.moe_layer_step = step
    window = meta.get("attention.sliding_window")
    if window is not None and meta.int_or("attention.sliding_window", 0) == 0:
        anatomy.n_no_rope_layer_step = anatomy.n_layer  # RoPE on every layer but the last
    else:
        anatomy.swa_type = SWA_CHUNKED
        anatomy.n_swa = 8192
        anatomy.n_no_rope_layer_step = 4
        _load_swa_pattern(anatomy, meta, 4)
    anatomy.use_kq_norm = anatomy.experts.n_expert != 128  # LLM_TYPE_17B_128E has none


def _gpt_oss(anatomy: ModelAnatomy, meta: _Meta) -> None:
    _experts(anatomy, meta)
    anatomy.swa_type = SWA_STANDARD
    anatomy.n_swa = meta.int_or("attention.sliding_window", 0)
    _load_swa_pattern(anatomy, meta, 2)


def _deepseek2(anatomy: ModelAnatomy, meta: _Meta) -> None:
    _experts(anatomy, meta)
    if anatomy.experts is not None:
        experts = anatomy.experts
        experts.n_layer_dense_lead = meta.int_or("leading_dense_block_count", 0)
        experts.gating_func = experts.gating_func or GATING_SOFTMAX  # none means softmax (the V2 routers)
        experts.n_groups = meta.int_or("expert_group_count", 0)
        experts.n_group_used = meta.int_or("expert_group_used_count", 0)
    head_k_mla = meta.int_or("attention.key_length_mla", 0)
    head_v_mla = meta.int_or("attention.value_length_mla", 0)
    latent = head_k_mla > 0 and head_v_mla > 0
    layer0 = anatomy.layers[0]
    anatomy.mla = LatentAttention(
        n_lora_q=meta.int_or("attention.q_lora_rank", 0),
        n_lora_kv=meta.int_or("attention.kv_lora_rank", 0),
        head_k=head_k_mla if latent else layer0.head_dim_k,
        head_v=head_v_mla if latent else layer0.head_dim_v,
        latent_cache=latent,
        attn_temp_scale=meta.float_or("attention.temperature_scale", 0.0),
    )
    if latent:
        anatomy.notes.append("multi-head latent attention: the KV cache holds the compressed latent only (no V)")


def _require(anatomy: ModelAnatomy, meta: _Meta, *keys: str) -> None:
    """Keys llama.cpp's loader insists on: without one it refuses the model."""
    for key in keys:
        if meta.get(key) is None:
            raise GGUFError(
                anatomy.path, f"required metadata {anatomy.architecture}.{key} is missing (llama.cpp refuses the model)"
            )


def _hadamard_size(head: int) -> int:
    """The rotation llama.cpp builds for a K head (llama_kv_cache::build_input_k_rot): the largest
    64 * 2^j dividing it, 64 when 64 does not divide it."""
    n = 64
    while head % (n * 2) == 0:
        n *= 2
    return n


def _deepseek32(anatomy: ModelAnatomy, meta: _Meta) -> None:
    """DeepSeek V3.2: DeepSeek V3 with sparse attention (DSA). A lightning indexer per layer scores
    every cached token and keeps the top k for the latent attention; its keys (one head, RoPE'd and
    Hadamard-rotated) fill a second K-only cache (llama_model_deepseek32, llama_kv_cache_dsa)."""
    _require(
        anatomy,
        meta,
        "expert_feed_forward_length",
        "expert_shared_count",
        "attention.q_lora_rank",
        "attention.kv_lora_rank",
        "attention.indexer.head_count",
        "attention.indexer.key_length",
        "attention.indexer.top_k",
        "expert_gating_func",
    )
    _deepseek2(anatomy, meta)
    if not anatomy.latent_cache:
        raise ModelError(anatomy.path, "DEEPSEEK32 architecture requires MLA (key_length_mla and value_length_mla)")
    gating = meta.int_or("expert_gating_func", 0)  # no V2 default here
    if anatomy.experts is not None:
        anatomy.experts.gating_func = gating
    if gating not in (1, 2, 3, 4):  # softmax, sigmoid, softmax_weight, sqrt_softplus
        raise ModelError(anatomy.path, f"expert gating function {gating} is unknown (llama.cpp aborts)")
    n_head = meta.int_or("attention.indexer.head_count", 0)
    head = meta.int_or("attention.indexer.key_length", 0)
    if not (0 < n_head <= 1 << 16 and 0 < head <= 1 << 16):
        raise ModelError(anatomy.path, f"indexer sizes {n_head} x {head} are out of range")
    anatomy.indexer = SparseIndexer(n_head=n_head, head_size=head, top_k=meta.int_or("attention.indexer.top_k", 0))
    # the graph multiplies the indexer's queries and keys by a head-sized rotation and ropes the
    # first n_rot values of a head: llama.cpp aborts (GGML_ASSERT) on a head that fits neither
    if _hadamard_size(head) != head or anatomy.rope_dims > head:
        raise ModelError(
            anatomy.path,
            f"indexer key length {head} is not a power-of-two multiple of 64 at least the RoPE size "
            f"{anatomy.rope_dims} (llama.cpp aborts building its graph)",
        )
    anatomy.notes.append(
        f"sparse attention (DSA): an indexer key cache of {head} values a token and layer beside the latent one"
    )


def _ssm(anatomy: ModelAnatomy, meta: _Meta) -> None:
    """Mamba-style state-space hyper-parameters (conv kernel, inner size, state size, dt rank, groups)."""
    sizes = {
        key: meta.int_or(f"ssm.{name}", 0)
        for key, name in (
            ("d_conv", "conv_kernel"),
            ("d_inner", "inner_size"),
            ("d_state", "state_size"),
            ("dt_rank", "time_step_rank"),
        )
    }
    for key, value in sizes.items():
        if not 0 < value <= 1 << 20:
            problem = f"{anatomy.architecture}: ssm {key.replace('_', ' ')} {value} is out of range"
            raise GGUFError(anatomy.path, problem)
    anatomy.ssm = StateSpace(
        **sizes, n_group=meta.int_or("ssm.group_count", 0), dt_b_c_rms=bool(meta.get("ssm.dt_b_c_rms", False))
    )


def _mamba(anatomy: ModelAnatomy, meta: _Meta) -> None:
    _ssm(anatomy, meta)
    for layer in anatomy.layers:
        layer.is_recurrent = True
        layer.has_kv = False


def _recurrent_where_no_kv_heads(anatomy: ModelAnatomy) -> None:
    for layer in anatomy.layers:
        layer.is_recurrent = layer.n_head_kv == 0
        layer.has_kv = not layer.is_recurrent


def _lfm2(anatomy: ModelAnatomy, meta: _Meta) -> None:
    _experts(anatomy, meta)
    anatomy.shortconv_l_cache = meta.int_or("shortconv.l_cache", 0)
    _recurrent_where_no_kv_heads(anatomy)
    n_swa = meta.int_or("attention.sliding_window", 0)
    if n_swa > 0:
        anatomy.swa_type, anatomy.n_swa = SWA_STANDARD, n_swa
        for layer in anatomy.layers:
            layer.is_swa = not layer.is_recurrent
    # LFM2 names its output norm "token_embd_norm"
    moved = [t for t in anatomy.other_tensors + anatomy.input_tensors if t.name.startswith("token_embd_norm.")]
    anatomy.other_tensors = [t for t in anatomy.other_tensors if t not in moved]
    anatomy.input_tensors = [t for t in anatomy.input_tensors if t not in moved]
    anatomy.output_tensors.extend(moved)


def _granite_scales(anatomy: ModelAnatomy, meta: _Meta) -> None:
    """Granite's scales (embedding, residual, attention, logits), each a ggml_scale node in the graph."""
    _experts(anatomy, meta)
    anatomy.f_logit_scale = meta.float_or("logit_scale", 0.0)
    anatomy.granite = GraniteScales(
        residual=meta.float_or("residual_scale", 0.0),
        embedding=meta.float_or("embedding_scale", 0.0),
        attention=meta.float_or("attention.scale", 0.0),
    )


def _granite_moe(anatomy: ModelAnatomy, meta: _Meta) -> None:
    if meta.get("logit_scale") is None:
        raise GGUFError(
            anatomy.path,
            f"required metadata {anatomy.architecture}.logit_scale is missing (llama.cpp refuses the model)",
        )
    _granite_scales(anatomy, meta)


def _granite(anatomy: ModelAnatomy, meta: _Meta) -> None:
    """Granite uses rope_finetuned (default true) as a switch for RoPE; granitemoe always ropes."""
    _granite_moe(anatomy, meta)
    anatomy.use_rope = bool(meta.get("rope.scaling.finetuned", True))


def _granite_hybrid(anatomy: ModelAnatomy, meta: _Meta) -> None:
    _granite_scales(anatomy, meta)  # logit_scale is optional here
    anatomy.use_rope = bool(meta.get("rope.scaling.finetuned", True))
    _ssm(anatomy, meta)
    _recurrent_where_no_kv_heads(anatomy)


def _jamba(anatomy: ModelAnatomy, meta: _Meta) -> None:
    """Mamba-1 layers where a layer has no KV heads, attention elsewhere; experts on some layers."""
    _experts(anatomy, meta)
    _ssm(anatomy, meta)
    assert anatomy.ssm is not None
    if anatomy.ssm.d_inner != 2 * anatomy.n_embd:  # GGML_ASSERT in llama.cpp: the process aborts
        raise GGUFError(
            anatomy.path,
            f"jamba: ssm inner size {anatomy.ssm.d_inner} is not twice the "
            f"embedding length {anatomy.n_embd}, which llama.cpp requires",
        )
    _recurrent_where_no_kv_heads(anatomy)


def _rwkv(anatomy: ModelAnatomy, meta: _Meta) -> None:
    """RWKV-6 / RWKV-7: every layer recurrent (token shift + WKV state), no KV cache."""
    head = meta.int_or("wkv.head_size", 0)
    if not 0 < head <= 4096 or anatomy.n_embd % head:
        raise GGUFError(
            anatomy.path,
            f"{anatomy.architecture}: wkv head size {head} does not divide the embedding length {anatomy.n_embd}",
        )
    anatomy.rwkv = Rwkv(
        head_size=head,
        token_shift_count=meta.int_or("token_shift_count", 2),
        rescale_every_n_layers=meta.int_or("rescale_every_n_layers", 0),
    )
    for layer in anatomy.layers:
        layer.is_recurrent = True
        layer.has_kv = False
    # token_embd_norm is the first layer's norm (LLM_TENSOR_LAYER_REPEATING, created for block 0)
    moved = [t for t in anatomy.other_tensors if t.name.startswith("token_embd_norm.")]
    anatomy.other_tensors = [t for t in anatomy.other_tensors if t not in moved]
    anatomy.layers[0].tensors.extend(moved)


def _qwen3next(anatomy: ModelAnatomy, meta: _Meta) -> None:
    """Qwen3-Next: gated delta-net layers (conv + recurrent state) and full-attention layers, MoE FFN."""
    _experts(anatomy, meta)
    _ssm(anatomy, meta)
    n_trunk = anatomy.n_trunk
    value = meta.get("attention.recurrent_layers")
    if isinstance(value, list) and len(value) == anatomy.n_layer:
        recurrent = [bool(v) and il < n_trunk for il, v in enumerate(value)]
    else:
        interval = meta.int_or("full_attention_interval", 4)
        if interval <= 0:
            raise GGUFError(anatomy.path, f"{anatomy.architecture}: full attention interval {interval} is out of range")
        recurrent = [il < n_trunk and (il + 1) % interval != 0 for il in range(anatomy.n_layer)]
    for layer, is_recurrent in zip(anatomy.layers, recurrent):
        layer.is_recurrent = is_recurrent
        layer.has_kv = layer.has_kv and not is_recurrent


def _qwen35(anatomy: ModelAnatomy, meta: _Meta) -> None:
    """Qwen3.5: Qwen3-Next's layers (dense FFN in qwen35, experts in qwen35moe), multi-section RoPE."""
    _qwen3next(anatomy, meta)
    anatomy.n_pos_per_embd = 4


def _glm4moe(anatomy: ModelAnatomy, meta: _Meta) -> None:
    """GLM-4.5: llama's attention (biases), sigmoid-routed experts after the leading dense layers, plus
    an ungated shared expert; multi-token-prediction layers are skipped."""
    _experts(anatomy, meta)
    if anatomy.experts is not None and not anatomy.experts.gating_func:
        anatomy.experts.gating_func = GATING_SIGMOID  # llama.cpp's default for glm4moe


def _falcon_h1(anatomy: ModelAnatomy, meta: _Meta) -> None:
    """Every layer runs attention and a Mamba-2 mixer side by side: a KV cache and a recurrent state each."""
    _ssm(anatomy, meta)
    for layer in anatomy.layers:
        layer.is_recurrent = layer.kv_beside_rs = True


def _nemotron_h(anatomy: ModelAnatomy, meta: _Meta) -> None:
    """Each layer is Mamba-2 (no KV heads, no FFN), attention (no FFN) or a feed-forward block alone
    (routed experts in nemotron_h_moe, whose top-k may differ per layer)."""
    _experts(anatomy, meta)
    _ssm(anatomy, meta)
    experts = anatomy.experts
    if experts is not None:
        experts.n_used_per_layer = meta.per_layer("expert_used_count", anatomy.n_layer, experts.n_used)
        experts.n_groups = meta.int_or("expert_group_count", 0)
        experts.n_group_used = meta.int_or("expert_group_used_count", 0)
    for layer in anatomy.layers:
        layer.is_recurrent = layer.n_head_kv == 0 and layer.n_ff == 0
        layer.has_kv = not layer.is_recurrent and layer.n_ff == 0 and not layer.is_mtp


def _plamo2(anatomy: ModelAnatomy, meta: _Meta) -> None:
    """Mamba layers where a layer has no KV heads. Layer 0 is a Mamba layer with no heads, so the head
    sizes come from key/value_length alone (llama_model_plamo2::load_arch_hparams)."""
    _ssm(anatomy, meta)
    layer0 = anatomy.layers[0]
    head_k = meta.int_or("attention.key_length", layer0.head_dim_k)
    head_v = meta.int_or("attention.value_length", layer0.head_dim_v)
    if not (0 <= head_k <= 1 << 16 and 0 <= head_v <= 1 << 16):
        raise GGUFError(anatomy.path, f"attention head sizes {head_k}/{head_v} are out of range")
    for layer in anatomy.layers:
        layer.head_dim_k, layer.head_dim_v = head_k, head_v
    _recurrent_where_no_kv_heads(anatomy)


def _phi3(anatomy: ModelAnatomy, meta: _Meta) -> None:
    # llama.cpp disables Phi's sliding window (set_swa_pattern(1): no layer is SWA).
    anatomy.notes.append("Phi-3 sliding window is disabled in this llama.cpp build: full KV cache on every layer")


ARCH_RULES: dict[str, ArchRule] = {
    "llama": _plain,
    # llama's tensors and graph shape (llama.cpp: exaone, smollm3 with its RoPE-less layers, ernie4_5,
    # minicpm with its scales, internlm2, xverse, seed_oss, arcee, orion, starcoder2, stablelm); matched
    # byte for byte on tiny models
    "exaone": _plain,
    "smollm3": _plain,
    "ernie4_5": _plain,
    "minicpm": _plain,
    "internlm2": _plain,
    "xverse": _plain,
    "seed_oss": _plain,  # its FFN pre-norm is named post_attention_norm
    "arcee": _plain,  # a ReLU² FFN without a gate
    "orion": _plain,  # layer norms with biases
    "starcoder2": _plain,  # biases everywhere, a GELU FFN without a gate
    "stablelm": _plain,  # layer norms with biases, partial RoPE (same sizes)
    "gpt2": _plain,  # learned position embeddings instead of RoPE, biases, a GELU FFN
    "starcoder": _plain,  # GPT-2's shape with multi-query attention
    "olmo2": _olmo2,
    "exaone4": _exaone4,
    "cohere2": _cohere2,
    "command-r": _command_r,
    "falcon": _plain,  # attention and FFN side by side (planner.graphs.dense.build_cohere2)
    "phi2": _plain,  # attention and FFN side by side (planner.graphs.dense.build_cohere2)
    "mistral3": _plain,
    "qwen2": _plain,
    "qwen3": _plain,
    "qwen2moe": _plain,
    "qwen3moe": _plain,
    "ernie4_5-moe": _plain,  # softmax routing with a selection bias, an ungated shared expert
    "glm4moe": _glm4moe,
    "minimax-m2": _plain,  # OLMoE's flat Q/K norms, routing from the header with a selection bias
    "qwen3vl": _qwen3vl,
    "qwen35": _qwen35,
    "qwen35moe": _qwen35,
    "qwen3vlmoe": _qwen3vl,
    "olmoe": _plain,
    "phi3": _phi3,
    "gpt-oss": _gpt_oss,
    "llama4": _llama4,
    "deepseek2": _deepseek2,
    "mistral4": _deepseek2,  # llama.cpp builds it as deepseek2 (latent attention, experts), plain RoPE
    "deepseek32": _deepseek32,
    "mamba": _mamba,
    "mamba2": _mamba,
    "lfm2": _lfm2,
    "lfm2moe": _lfm2,  # LFM2 with routed experts after the leading dense layers
    "granitehybrid": _granite_hybrid,
    "granite": _granite,
    "granitemoe": _granite_moe,
    "jamba": _jamba,
    "rwkv6": _rwkv,
    "rwkv7": _rwkv,
    "qwen3next": _qwen3next,
    "falcon-h1": _falcon_h1,
    "nemotron_h": _nemotron_h,
    "nemotron_h_moe": _nemotron_h,
    "plamo2": _plamo2,
    "gemma": _plain,
    "gemma2": _gemma2,
    "gemma3": _gemma3,
    "gemma3n": _gemma3n,
    "gemma4": _gemma4,
}


# llama_model::create_memory gives these no KV cache at all: text encoders (embedding models),
# diffusion language models and an audio decoder. What each is for, in words.
NO_CACHE_ARCHS: dict[str, str] = {
    **dict.fromkeys(
        (
            "bert",
            "modern-bert",
            "nomic-bert",
            "nomic-bert-moe",
            "neo-bert",
            "jina-bert-v2",
            "jina-bert-v3",
            "eurobert",
            "gemma-embedding",
        ),
        "an embedding model (it turns text into vectors)",
    ),
    **dict.fromkeys(("dream", "llada", "llada-moe", "rnd1"), "a diffusion language model"),
    "wavtokenizer-dec": "an audio decoder",
}


def not_for_chat(architecture: str) -> str | None:
    """Why a model of this architecture cannot hold a chat, or None when it can."""
    purpose = NO_CACHE_ARCHS.get(architecture)
    return f"{purpose}, not a chat model" if purpose else None


def _no_cache(anatomy: ModelAnatomy) -> None:
    for layer in anatomy.layers:
        layer.has_kv = False
    anatomy.no_cache = True  # no graph builder either: the compute buffer is estimated
    anatomy.exact = False
    anatomy.notes.append(
        f"architecture '{anatomy.architecture}' is {NO_CACHE_ARCHS[anatomy.architecture]}: llama.cpp keeps no "
        "KV cache for it; weights are exact, the compute buffer is estimated"
    )


def apply_arch_rules(anatomy: ModelAnatomy, meta: _Meta) -> None:
    if anatomy.architecture in NO_CACHE_ARCHS:
        _no_cache(anatomy)
        return
    rule = ARCH_RULES.get(anatomy.architecture)
    if rule is None:
        anatomy.exact = False
        anatomy.notes.append(
            f"architecture '{anatomy.architecture}' has no exact rules in this planner yet: "
            "figures assume dense attention on every layer and are estimates"
        )
        # a sliding window declared in the header is honoured as a standard window on every layer
        _experts(anatomy, meta)
        return
    rule(anatomy, meta)
