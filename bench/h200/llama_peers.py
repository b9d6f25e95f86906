#!/usr/bin/env python3
"""PyTorch peers of `tern bench` for the Llama family, and GPT-2 124M's batched decoding, on
the same GPU in the same run (scripts/h200/llama_speed.sh and decode_batch.sh alternate them
with tern). Random initialisation from configs built here (no network): the shapes of
tern_llama_config_named (src/core/llama_config.c) and GPT-2 124M's. Each measurement prints
one 'peer:' line. For GPT-2, decode and check only (fast, fast-graph, hf, hf-static).

  decode --config NAME --impl hf-static,fast-graph[,fast-pipe,fast,hf] --batch B --prompt P --tokens N
      greedy, bf16 weights, B random prompts of P tokens (default B 1) decoded together by N
      new tokens (tern's `bench generate --batch B --prompt-tokens P --tokens N`).
      hf:         transformers' generate() with its dynamic cache (eager);
      hf-static:  generate() with cache_implementation="static": transformers then compiles
                  its decoding forward itself (CompileConfig: mode reduce-overhead, i.e. CUDA
                  graphs);
      fast:       a decode step written here (static KV cache, fused q|k|v and gate|up
                  products, grouped heads folded into the query rows so no K/V copy),
                  torch.compile(mode="reduce-overhead", fullgraph=True);
      fast-graph: the same step compiled with fullgraph=True and captured by hand into one
                  CUDA graph that feeds its token and position back on the GPU: one replay a
                  token, no Python between kernels.
      fast-pipe:  fast-graph with the host a step behind, as tern's generate: the next
                  replay is queued before the last token is read (a non-blocking copy into
                  page-locked memory and an event), so the GPU never waits for the host.
      Reported: the median time per decoding step (a new token of each sequence) with each
      step's tokens read back to the host (what tern's bench measures: its clock stamps each
      step on the host), tokens/s (B per step), and end-to-end tokens/s (prefill included).
  train  --config NAME --impl hf|hand --batch B --seq T --steps N --warmup W [--eager]
      hf:   transformers' LlamaForCausalLM (SDPA attention); hand: the model written here
      (fused products, SDPA flash attention with grouped heads). bf16 autocast over f32
      weights, the loss (cross-entropy over the logits in f32) inside the compiled function,
      torch.compile of it (default mode) unless --eager; fused AdamW (lr 1e-4, betas .9/.95,
      eps 1e-8, wd .1), gradient clipping at 1.0, each step synchronised (as tern's step,
      which reads its gradient norm back). Median ms/step of the timed steps; tokens/s.
  check  --config NAME
      the model written here against transformers in float32 (TF32 off): its greedy ids
      from a random prompt equal generate()'s for 32 tokens (proves the peer computes the
      same model, rope scaling included).
"""
import argparse, math, statistics, sys, time

import torch
import torch.nn as nn
import torch.nn.functional as F

# tern_llama_config_named's shapes: layers, hidden, intermediate, heads, kv heads, head dim,
# vocab, context, rms eps, rope theta, llama3 scaling, family
CONFIGS = {
    "smollm2-135m": (30, 576, 1536, 9, 3, 64, 49152, 8192, 1e-5, 1e5, False, "llama"),
    "qwen2.5-0.5b": (24, 896, 4864, 14, 2, 64, 151936, 32768, 1e-6, 1e6, False, "qwen2"),
    "llama-3.2-1b": (16, 2048, 8192, 32, 8, 64, 128256, 131072, 1e-5, 5e5, True, "llama"),
    "tiny":         (2, 64, 176, 4, 2, 16, 4096, 128, 1e-5, 1e4, False, "llama"),
    # GPT-2 124M (learned positions, layer norm with bias, GELU MLP; theta unused)
    "gpt2":         (12, 768, 3072, 12, 12, 64, 50257, 1024, 1e-5, None, False, "gpt2"),
}
LLAMA3_SCALING = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 8192}
dev = "cuda" if torch.cuda.is_available() else "cpu"


def sync():
    if dev == "cuda": torch.cuda.synchronize()


def hf_config(name):
    import transformers
    L, C, I, H, KV, D, V, ctx, eps, theta, llama3, family = CONFIGS[name]
    if family == "gpt2":
        return transformers.GPT2Config(n_layer=L, n_embd=C, n_inner=I, n_head=H, n_positions=ctx, vocab_size=V,
                                       layer_norm_epsilon=eps, activation_function="gelu_new",
                                       bos_token_id=V - 1, eos_token_id=V - 1)
    kw = dict(vocab_size=V, hidden_size=C, intermediate_size=I, num_hidden_layers=L, num_attention_heads=H,
              num_key_value_heads=KV, max_position_embeddings=ctx, rms_norm_eps=eps, rope_theta=theta,
              tie_word_embeddings=True, bos_token_id=0, eos_token_id=1, hidden_act="silu")
    if family == "qwen2":
        return transformers.Qwen2Config(**kw)
    return transformers.LlamaConfig(head_dim=D, rope_scaling=LLAMA3_SCALING if llama3 else None, **kw)


def hf_model(name, dtype):
    from transformers import AutoModelForCausalLM
    torch.manual_seed(0)
    with torch.device(dev):   # initialise on the GPU (the 1B takes long on the host)
        m = AutoModelForCausalLM.from_config(hf_config(name), attn_implementation="sdpa", torch_dtype=dtype)
    return m.to(dev, dtype=dtype)


def inv_freq(name):
    """The rotary inverse frequencies [D/2] (float64), llama3 scaling when the shape has it."""
    L, C, I, H, KV, D, V, ctx, eps, theta, llama3, family = CONFIGS[name]
    f = [theta ** (-2 * i / D) for i in range(D // 2)]
    if llama3:
        s = LLAMA3_SCALING
        lo, hi, orig, fac = s["low_freq_factor"], s["high_freq_factor"], s["original_max_position_embeddings"], s["factor"]
        out = []
        for x in f:
            w = 2 * math.pi / x
            if w > orig / lo: out.append(x / fac)
            elif w < orig / hi: out.append(x)
            else:
                t = (orig / w - lo) / (hi - lo)
                out.append((1 - t) * x / fac + t * x)
        f = out
    return torch.tensor(f, dtype=torch.float64)


# ---------------------------------------------------------------- the model written here
class HandLlama(nn.Module):
    """A Llama/Qwen2 forward from an HF model's weights: q|k|v and gate|up each one product;
    decoding with a preallocated KV cache per layer [batch, KV, max_len, D]."""

    def __init__(s, hf, name, max_len, dtype, cache=True, batch=1):
        super().__init__()
        L, C, I, H, KV, D, V, ctx, eps, theta, llama3, family = CONFIGS[name]
        s.L, s.C, s.I, s.H, s.KV, s.D, s.eps = L, C, I, H, KV, D, eps
        cp = lambda w: nn.Parameter(w.detach().to(dtype).clone())
        m = hf.model
        s.embed = cp(m.embed_tokens.weight)                      # [V, C], tied: the head too
        s.norm = cp(m.norm.weight)                                # [C]
        s.layers = nn.ModuleList()
        for b in m.layers:
            a, p, ly = b.self_attn, b.mlp, nn.Module()
            ly.ln1, ly.ln2 = cp(b.input_layernorm.weight), cp(b.post_attention_layernorm.weight)   # [C]
            ly.wqkv = cp(torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]))            # [(H+2KV)D, C]
            ly.bqkv = cp(torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias])) if a.q_proj.bias is not None else None
            ly.wo = cp(a.o_proj.weight)                                                             # [C, H D]
            ly.wgu = cp(torch.cat([p.gate_proj.weight, p.up_proj.weight]))                          # [2I, C]
            ly.wd = cp(p.down_proj.weight)                                                          # [C, I]
            if cache:
                ly.register_buffer("k", torch.zeros(batch, KV, max_len, D, dtype=dtype))
                ly.register_buffer("v", torch.zeros(batch, KV, max_len, D, dtype=dtype))
            s.layers.append(ly)
        ang = torch.arange(max_len, dtype=torch.float64)[:, None] * inv_freq(name)[None]   # [max_len, D/2]
        ang = torch.cat([ang, ang], dim=1)                                                  # rotate-half layout
        s.register_buffer("cos", ang.cos().float().to(dtype))                               # [max_len, D]
        s.register_buffer("sin", ang.sin().float().to(dtype))
        s.register_buffer("causal", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))
        s.gqa_kw = {"enable_gqa": True} if tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (2, 5) else None

    def rms(s, x, w):   # as transformers: in f32, scaled back in x's dtype
        xf = x.float()
        return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + s.eps)).to(x.dtype)

    @staticmethod
    def rope(x, cos, sin):   # x [1|B, heads, S, D]; cos, sin [S, D]
        h = x.shape[-1] // 2
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)   # training: f32 tables, bf16 products
        return x * cos + torch.cat([-x[..., h:], x[..., :h]], dim=-1) * sin

    def block_qkv(s, w, x, cos, sin):
        B, S, _ = x.shape
        H, KV, D = s.H, s.KV, s.D
        qkv = F.linear(s.rms(x, w.ln1), w.wqkv, w.bqkv)                         # [B, S, (H+2KV) D]
        q, k, v = qkv.split([H * D, KV * D, KV * D], dim=-1)
        q = s.rope(q.view(B, S, H, D).transpose(1, 2), cos, sin)                # [B, H, S, D]
        k = s.rope(k.view(B, S, KV, D).transpose(1, 2), cos, sin)               # [B, KV, S, D]
        return q, k, v.view(B, S, KV, D).transpose(1, 2)

    def block_rest(s, w, x, y):   # y [B, H, S, D]: attention's output
        B, S, _ = x.shape
        x = x + F.linear(y.transpose(1, 2).reshape(B, S, s.H * s.D), w.wo)
        g, u = F.linear(s.rms(x, w.ln2), w.wgu).split(s.I, dim=-1)              # [B, S, I] each
        return x + F.linear(F.silu(g) * u, w.wd)

    def forward(s, idx, pos):
        """Decoding: idx [B, S] at positions pos [S]; writes the cache; the next greedy ids [B, 1]."""
        B, S, G = idx.shape[0], idx.shape[1], s.H // s.KV
        x = s.embed[idx]                                                       # [B, S, C]
        cos, sin = s.cos[pos], s.sin[pos]
        mask = s.causal[pos].repeat(G, 1)[None, None]                          # [1, 1, G S, max_len]
        for w in s.layers:
            q, k, v = s.block_qkv(w, x, cos, sin)
            w.k.index_copy_(2, pos, k)
            w.v.index_copy_(2, pos, v)
            # the G query heads of a key/value head as G S rows of one head: no K/V copy
            y = F.scaled_dot_product_attention(q.reshape(B, s.KV, G * S, s.D), w.k, w.v, attn_mask=mask)
            x = s.block_rest(w, x, y.reshape(B, s.H, S, s.D))
        x = s.rms(x[:, -1:], s.norm)
        return torch.argmax(F.linear(x, s.embed), dim=-1)                      # [B, 1]

    def logits(s, idx):
        """Training: idx [B, T] from position 0; logits [B, T, V]."""
        T, G = idx.shape[1], s.H // s.KV
        x = s.embed[idx]
        cos, sin = s.cos[:T], s.sin[:T]
        for w in s.layers:
            q, k, v = s.block_qkv(w, x, cos, sin)
            if s.gqa_kw is None:
                k, v = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, **(s.gqa_kw or {}))
            x = s.block_rest(w, x, y)
        return F.linear(s.rms(x, s.norm), s.embed)

    def reset(s):
        for w in s.layers:
            w.k.zero_(); w.v.zero_()


class HandGPT2(nn.Module):
    """GPT-2 from an HF GPT2LMHeadModel's weights (its Conv1D [in, out] weights transposed for
    F.linear): decoding with a preallocated KV cache per layer [batch, H, max_len, D]."""

    def __init__(s, hf, name, max_len, dtype, cache=True, batch=1):
        super().__init__()
        L, C, I, H, KV, D, V, ctx, eps, *_ = CONFIGS[name]
        s.C, s.H, s.D, s.eps = C, H, D, eps
        cp = lambda w: nn.Parameter(w.detach().to(dtype).clone())
        t = hf.transformer
        s.wte, s.wpe = cp(t.wte.weight), cp(t.wpe.weight[:max_len])      # [V, C] (tied head), [max_len, C]
        s.lnf_w, s.lnf_b = cp(t.ln_f.weight), cp(t.ln_f.bias)
        s.layers = nn.ModuleList()
        for b in t.h:
            ly = nn.Module()
            ly.ln1_w, ly.ln1_b, ly.ln2_w, ly.ln2_b = (cp(x) for x in (b.ln_1.weight, b.ln_1.bias, b.ln_2.weight, b.ln_2.bias))
            ly.wqkv, ly.bqkv = cp(b.attn.c_attn.weight.t()), cp(b.attn.c_attn.bias)     # [3C, C], [3C]
            ly.wo, ly.bo = cp(b.attn.c_proj.weight.t()), cp(b.attn.c_proj.bias)         # [C, C]
            ly.wfc, ly.bfc = cp(b.mlp.c_fc.weight.t()), cp(b.mlp.c_fc.bias)             # [4C, C]
            ly.wp, ly.bp = cp(b.mlp.c_proj.weight.t()), cp(b.mlp.c_proj.bias)           # [C, 4C]
            if cache:
                ly.register_buffer("k", torch.zeros(batch, H, max_len, D, dtype=dtype))
                ly.register_buffer("v", torch.zeros(batch, H, max_len, D, dtype=dtype))
            s.layers.append(ly)
        s.register_buffer("causal", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def ln(s, x, w, b):
        return F.layer_norm(x, (s.C,), w, b, s.eps)

    def block(s, w, x, attend):
        B, S, _ = x.shape
        q, k, v = (t.view(B, S, s.H, s.D).transpose(1, 2) for t in
                   F.linear(s.ln(x, w.ln1_w, w.ln1_b), w.wqkv, w.bqkv).split(s.C, dim=-1))   # [B, H, S, D]
        y = attend(w, q, k, v)
        x = x + F.linear(y.transpose(1, 2).reshape(B, S, s.C), w.wo, w.bo)
        h = F.gelu(F.linear(s.ln(x, w.ln2_w, w.ln2_b), w.wfc, w.bfc), approximate="tanh")
        return x + F.linear(h, w.wp, w.bp)

    def forward(s, idx, pos):
        """Decoding: idx [B, S] at positions pos [S]; writes the cache; the next greedy ids [B, 1]."""
        mask = s.causal[pos][None, None]                                      # [1, 1, S, max_len]

        def cached(w, q, k, v):
            w.k.index_copy_(2, pos, k)
            w.v.index_copy_(2, pos, v)
            return F.scaled_dot_product_attention(q, w.k, w.v, attn_mask=mask)
        x = s.wte[idx] + s.wpe[pos]                                           # [B, S, C]
        for w in s.layers:
            x = s.block(w, x, cached)
        x = s.ln(x[:, -1:], s.lnf_w, s.lnf_b)
        return torch.argmax(F.linear(x, s.wte), dim=-1)                      # [B, 1]

    def logits(s, idx):
        """idx [B, T] from position 0; logits [B, T, V]."""
        x = s.wte[idx] + s.wpe[:idx.shape[1]]
        for w in s.layers:
            x = s.block(w, x, lambda w, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        return F.linear(s.ln(x, s.lnf_w, s.lnf_b), s.wte)

    def reset(s):
        for w in s.layers:
            w.k.zero_(); w.v.zero_()


def hand_model(hf, name, max_len, dtype, cache=True, batch=1):
    cls = HandGPT2 if CONFIGS[name][-1] == "gpt2" else HandLlama
    return cls(hf, name, max_len, dtype, cache=cache, batch=batch)


# ---------------------------------------------------------------- training
def train(a):
    L, C, I, H, KV, D, V, *_ = CONFIGS[a.config]
    hf = hf_model(a.config, torch.float32)
    if a.impl == "hf":
        hf.config.use_cache = False
        model = hf
        logits_of = lambda x: model(input_ids=x).logits
    else:
        model = HandLlama(hf, a.config, a.seq, torch.float32, cache=False).to(dev)
        del hf
        logits_of = model.logits
    n_params = sum(p.numel() for p in model.parameters())

    def loss_of(x, y):
        with torch.autocast(dev, dtype=torch.bfloat16):
            logits = logits_of(x)
        return F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
    run = loss_of if a.eager else torch.compile(loss_of)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
                            fused=dev == "cuda")
    xy = torch.randint(0, V, (a.batch, a.seq + 1), device=dev)
    x, y = xy[:, :-1].contiguous(), xy[:, 1:].contiguous()
    times, losses = [], []
    t_first = time.perf_counter()
    t_warm = 0
    for s in range(a.warmup + a.steps):
        sync(); t0 = time.perf_counter()
        loss = run(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step(); opt.zero_grad(set_to_none=True)
        sync(); dt = time.perf_counter() - t0
        if s == a.warmup - 1: t_warm = time.perf_counter() - t_first
        if s >= a.warmup: times.append(dt * 1e3)
        losses.append(loss.item())
    med = statistics.median(times)
    mem = f"; peak allocated {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB" if dev == "cuda" else ""
    name = ("hf" if a.impl == "hf" else "hand-written") + (" eager" if a.eager else "+torch.compile")
    print(f"peer: train {name} {a.config} ({n_params / 1e6:.0f}M params) B={a.batch} T={a.seq} bf16 autocast: "
          f"median {med:.2f} ms/step, {a.batch * a.seq / med * 1e3:.0f} tokens/s; min {min(times):.2f} "
          f"max {max(times):.2f}; warm-up incl. compile {t_warm:.0f} s; loss {losses[0]:.3f}->{losses[-1]:.3f}{mem}",
          flush=True)


# ---------------------------------------------------------------- decoding
class Stamps:
    """A generate() streamer that records when each token reaches the host."""
    def __init__(s): s.t = []
    def put(s, value): s.t.append(time.perf_counter())
    def end(s): pass


def decode_hf(a, hf, prompt, static):
    N = a.tokens
    kw = dict(do_sample=False, pad_token_id=0, max_new_tokens=N, min_new_tokens=N)
    if static:
        from transformers import CompileConfig
        cc = CompileConfig()
        if dev != "cuda": cc._compile_all_devices = True
        kw.update(cache_implementation="static", compile_config=cc)

    def run():
        st = Stamps()
        sync(); t0 = time.perf_counter(); hf.generate(prompt, streamer=st, **kw); sync()
        steps = [b - c for c, b in zip(st.t[1:], st.t[2:])]   # st.t[0]: the prompt, [1]: the first token
        return time.perf_counter() - t0, statistics.median(steps)
    t_c = time.perf_counter()
    run(); run()                      # warm-up: compiles, captures graphs
    warm = time.perf_counter() - t_c
    rs = [run() for _ in range(3)]
    name = "hf generate static cache + its compile (reduce-overhead)" if static else "hf generate (dynamic cache, eager)"
    extra = f"; generate compiled its forward: {hasattr(hf, '_compiled_call')}" if static else ""
    return name, statistics.median(r[1] for r in rs), statistics.median(r[0] for r in rs), warm, \
        ", ".join(f"{r[1] * 1e3:.3f}" for r in rs), extra


def decode_hand(a, hf, prompt, graph):
    N, P = a.tokens, a.prompt
    B = prompt.shape[0]
    fast = hand_model(hf, a.config, P + N + 8, torch.bfloat16, batch=B).to(dev)
    ppos = torch.arange(P, device=dev)
    t_c = time.perf_counter()
    pipe = graph == "pipe"
    if graph:   # one compiled step captured in a CUDA graph that feeds its token and position back
        stepc = torch.compile(fast, fullgraph=True)
        tok_b = torch.zeros(B, 1, dtype=torch.long, device=dev)
        pos_b = torch.zeros(1, dtype=torch.long, device=dev)

        def one():
            tok_b.copy_(stepc(tok_b, pos_b))
            pos_b.add_(1)
        pos_b.fill_(P)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3): one()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g): one()
        host = [torch.empty(B, 1, dtype=torch.long).pin_memory() for _ in range(2)]
        evs = [torch.cuda.Event(), torch.cuda.Event()]
    else:
        step = torch.compile(fast, mode="reduce-overhead", fullgraph=True)

    def gen(stamps):
        """Prefill (eager, one call), then N - 1 steps; each step's tokens read back to the host.
        Returns the first sequence's ids."""
        fast.reset()
        tok = fast(prompt, ppos)
        ids = [tok.tolist()[0][0]]
        stamps.append(time.perf_counter())
        if pipe:   # token k copied after replay k; read after replay k + 1 is queued
            tok_b.copy_(tok); pos_b.fill_(P)
            pending = None
            for k in range(1, N):
                g.replay()
                host[k % 2].copy_(tok_b, non_blocking=True); evs[k % 2].record()
                if pending is not None:
                    evs[pending % 2].synchronize()
                    ids.append(int(host[pending % 2][0, 0])); stamps.append(time.perf_counter())
                pending = k
            if pending is not None:
                evs[pending % 2].synchronize()
                ids.append(int(host[pending % 2][0, 0])); stamps.append(time.perf_counter())
        elif graph:
            tok_b.copy_(tok); pos_b.fill_(P)
            for _ in range(1, N):
                g.replay()
                ids.append(tok_b.tolist()[0][0]); stamps.append(time.perf_counter())
        else:
            pos = torch.tensor([P], device=dev)
            for _ in range(1, N):
                tok = step(tok.clone(), pos)
                pos += 1
                ids.append(tok.tolist()[0][0]); stamps.append(time.perf_counter())
        return ids

    def run():
        st = []
        sync(); t0 = time.perf_counter(); ids = gen(st); sync()
        return time.perf_counter() - t0, statistics.median(b - c for c, b in zip(st, st[1:])), ids
    run(); run()
    warm = time.perf_counter() - t_c
    rs = [run() for _ in range(3)]
    ref = hf.generate(prompt[:1], max_new_tokens=16, min_new_tokens=16, do_sample=False, pad_token_id=0)[0, P:].tolist()
    same = next((i for i, (p, q) in enumerate(zip(rs[0][2], ref)) if p != q), len(ref))
    name = ("hand-written static KV + compile(fullgraph), one hand-captured CUDA graph a token" if graph else
            "hand-written static KV + compile(reduce-overhead, fullgraph)")
    if pipe: name += ", the host a step behind"
    extra = f"; first {same}/16 greedy ids equal HF generate's (bf16: near-ties on a random model)"
    return name, statistics.median(r[1] for r in rs), statistics.median(r[0] for r in rs), warm, \
        ", ".join(f"{r[1] * 1e3:.3f}" for r in rs), extra


def decode(a):
    hf = hf_model(a.config, torch.bfloat16).eval()
    V = CONFIGS[a.config][6]
    prompt = torch.randint(3, V, (a.batch, a.prompt), device=dev, generator=torch.Generator(device=dev).manual_seed(11))
    for impl in a.impl.split(","):
        if impl not in ("hf", "hf-static", "fast", "fast-graph", "fast-pipe"): sys.exit(f"decode: unknown --impl {impl}")
        with torch.no_grad():
            if impl.startswith("hf"):
                name, t_tok, t_e2e, warm, detail, extra = decode_hf(a, hf, prompt, impl == "hf-static")
            else:
                graph = {"fast": False, "fast-graph": True, "fast-pipe": "pipe"}[impl]
                name, t_tok, t_e2e, warm, detail, extra = decode_hand(a, hf, prompt, graph)
        unit = "token" if a.batch == 1 else "step"
        print(f"peer: decode {name} {a.config} bf16 batch={a.batch} prompt={a.prompt} tokens={a.tokens}: "
              f"median {t_tok * 1e3:.3f} ms/{unit} ({a.batch / t_tok:.0f} tokens/s, each step read back to the host); "
              f"end-to-end {a.batch * a.tokens / t_e2e:.0f} tokens/s ({t_e2e * 1e3:.1f} ms incl. prefill); "
              f"per-token medians of 3 runs: {detail} ms; warm-up {warm:.0f} s{extra}", flush=True)
        torch._dynamo.reset()


def check(a):
    torch.backends.cuda.matmul.allow_tf32 = False
    hf = hf_model(a.config, torch.float32).eval()
    n, P, V = 32, 16, CONFIGS[a.config][6]
    prompt = torch.randint(3, V, (1, P), device=dev, generator=torch.Generator(device=dev).manual_seed(5))
    with torch.no_grad():
        ref = hf.generate(prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)[0, P:].tolist()
        m = hand_model(hf, a.config, P + n + 8, torch.float32).to(dev)
        tok, ids = m(prompt, torch.arange(P, device=dev)), []
        for i in range(n):
            ids.append(int(tok))
            tok = m(tok.view(1, 1), torch.tensor([P + i], device=dev))
        full = m.logits(prompt)[0, -1]                               # the training path's last logits
        hf_last = hf(prompt).logits[0, -1]
    same = next((i for i, (p, q) in enumerate(zip(ids, ref)) if p != q), len(ref))
    err = ((full - hf_last).abs().max() / hf_last.abs().max()).item()
    ok = same == n and err < 1e-4
    print(f"peer-check {a.config}: hand-written decode (float32) against HF generate: first {same}/{n} greedy ids "
          f"equal; training-path logits within {err:.1e} of HF's (max-relative, bound 1e-4): "
          f"{'passed' if ok else 'FAILED'}", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["train", "decode", "check"])
    p.add_argument("--config", default="smollm2-135m", choices=list(CONFIGS))
    p.add_argument("--impl", default=None, help="decode: hf,hf-static,fast,fast-graph,fast-pipe (comma list); train: hf|hand")
    p.add_argument("--eager", action="store_true", help="train: no torch.compile")
    p.add_argument("--batch", type=int, default=None, help="train: 16; decode: 1")
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--tokens", type=int, default=512)
    a = p.parse_args()
    if a.impl is None: a.impl = "hf-static,fast-graph" if a.what == "decode" else "hf"
    if a.batch is None: a.batch = 1 if a.what == "decode" else 16
    if a.what == "train" and a.impl not in ("hf", "hand"): sys.exit("train: --impl hf or hand")
    if a.what == "train" and a.config == "gpt2": sys.exit("train: GPT-2's peers are ../shared/bench/gpu_torch_peers.py's")
    if dev == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        print("torch", torch.__version__, torch.cuda.get_device_name(), flush=True)
    {"train": train, "decode": decode, "check": check}[a.what](a)
