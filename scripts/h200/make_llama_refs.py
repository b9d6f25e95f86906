#!/usr/bin/env python3
"""Independent references for tern's Llama family, made by PyTorch + Hugging Face transformers
in float64 on the CPU (no GPU, no internet, no tokenizer): two tiny models from a seeded random
init, each saved by save_pretrained with its expected values in the layout of
../shared/fixtures/llama-tiny-a (see the README.md written next to them).

    python3 scripts/h200/make_llama_refs.py OUTDIR           # both models
    python3 scripts/h200/make_llama_refs.py OUTDIR --only qwen2-tiny-b
    python3 scripts/h200/make_llama_refs.py OUTDIR --dry-run # the plan; needs no torch

Models (OUTDIR/<name>/):
  qwen2-tiny-b   Qwen2ForCausalLM: q/k/v biases (transformers hard-codes them for qwen2),
                 untied embeddings, 4 heads / 2 key-value heads of 16, rope_theta 1e6,
                 rms_norm_eps 1e-6
  llama3-tiny-c  LlamaForCausalLM: rope_scaling llama3 (factor 4, low 1, high 4, original
                 context 32: at head_dim 16 the pairs fall in all three bands, and the
                 positions run to 63), attention_bias and mlp_bias true (q/k/v/o and
                 gate/up/down biases), tied embeddings, 4 heads / 1 key-value head

Random init is transformers' (normal(0, initializer_range)) with initializer_range 0.1 so the
logits spread and greedy decoding has margins an f32 path can follow; then RMSNorm weights
1 + 0.2 N(0, 1) and biases 0.1 N(0, 1) (transformers would leave them 1 and 0, which would not
test loading them). Weights are saved in float32; every expected value is computed in float64
from exactly those float32 weights, then stored as float32 copies (expected.safetensors) or
JSON numbers (expected.json). Deterministic: fixed seeds, one thread, deterministic algorithms.
"""
import argparse
import copy
import json
import math
import os
import sys

SEED = 20241201
B, T = 4, 64           # the forward batch: B sequences of T tokens (targets the next tokens)
ADAMW = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1}
ADAMW_STEPS = 3
GREEDY_NEW = 32
PROMPT_LENGTHS = [1, 5, 9, 16]
MAX_BYTES = 2_000_000  # per model folder, to stay small enough to commit

COMMON = {
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
    "num_attention_heads": 4, "head_dim": 16, "max_position_embeddings": 128,
    "hidden_act": "silu", "initializer_range": 0.1, "attention_dropout": 0.0,
    "bos_token_id": 1, "eos_token_id": 2, "use_cache": True,
}
MODELS = {
    "qwen2-tiny-b": dict(COMMON, model_type="qwen2", architectures=["Qwen2ForCausalLM"],
                         num_key_value_heads=2, rms_norm_eps=1e-6, rope_theta=1000000.0,
                         rope_scaling=None, tie_word_embeddings=False,
                         use_sliding_window=False, max_window_layers=2),
    "llama3-tiny-c": dict(COMMON, model_type="llama", architectures=["LlamaForCausalLM"],
                          num_key_value_heads=1, rms_norm_eps=1e-5, rope_theta=10000.0,
                          rope_scaling={"rope_type": "llama3", "factor": 4.0,
                                        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                        "original_max_position_embeddings": 32},
                          attention_bias=True, mlp_bias=True, tie_word_embeddings=True,
                          pretraining_tp=1),
}


def param_count(c):
    """Parameters as the model holds them (tied embedding once), from the shapes alone."""
    C, I, V, L = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["num_hidden_layers"]
    q = c["num_attention_heads"] * c["head_dim"]
    kv = c["num_key_value_heads"] * c["head_dim"]
    qwen = c["model_type"] == "qwen2"
    qkv_bias = qwen or c.get("attention_bias", False)
    o_bias = (not qwen) and c.get("attention_bias", False)
    mlp_bias = (not qwen) and c.get("mlp_bias", False)
    attn = C * q + 2 * C * kv + q * C + (q + 2 * kv if qkv_bias else 0) + (C if o_bias else 0)
    mlp = 3 * C * I + (2 * I + C if mlp_bias else 0)
    return V * C + L * (attn + mlp + 2 * C) + C + (0 if c["tie_word_embeddings"] else V * C)


def plan(names):
    """What would be made, checked against the size limit; no torch needed."""
    out = []
    for name in names:
        c = MODELS[name]
        n = param_count(c)
        # model + gradients + parameters after AdamW (float32), logits and losses
        est = 3 * 4 * n + 4 * (2 * 4 * c["vocab_size"] + 3 * B * T) + 64 * 1024
        if est > MAX_BYTES:
            raise SystemExit(f"{name}: about {est} bytes, over the {MAX_BYTES} limit")
        if c["num_attention_heads"] % c["num_key_value_heads"]:
            raise SystemExit(f"{name}: key-value heads must divide the heads")
        if max(PROMPT_LENGTHS) + GREEDY_NEW > c["max_position_embeddings"] or T > c["max_position_embeddings"]:
            raise SystemExit(f"{name}: sequences longer than the context")
        out.append({"name": name, "model_type": c["model_type"], "parameters": n, "approx_bytes": est})
    return out


def token_rows(gen, torch, rows, length, vocab):
    """Token ids in [3, vocab) (0-2 are left to the special ids), from generator gen."""
    return torch.randint(3, vocab, (rows, length), generator=gen, dtype=torch.int64)


def make_model(name, torch, transformers):
    c = dict(MODELS[name])
    cls = transformers.Qwen2Config if c["model_type"] == "qwen2" else transformers.LlamaConfig
    kwargs = {k: v for k, v in c.items() if k != "model_type"}
    config = cls(**kwargs)
    torch.manual_seed(SEED)
    # eager: plain softmax attention, exact in float64
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    model = model.to(torch.float32).eval()
    gen = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("norm.weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=gen))
            elif pname.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
    return model


def expected_values(model, torch, vocab):
    """Forward, gradients, AdamW steps and greedy continuations, all in float64."""
    m64 = copy.deepcopy(model).to(torch.float64)
    names = [n for n, _ in m64.named_parameters()]
    gen = torch.Generator().manual_seed(SEED + 2)
    seq = token_rows(gen, torch, B, T + 1, vocab)
    inputs, targets = seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
    F = torch.nn.functional

    def losses_of(m):
        logits = m(input_ids=inputs).logits
        per = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1), reduction="none")
        return logits, per.reshape(B, T)

    tensors = {"inputs": inputs.to(torch.int32), "targets": targets.to(torch.int32)}
    logits, losses = losses_of(m64)
    loss = losses.mean()
    loss.backward()
    tensors["losses"] = losses.detach()
    tensors["logits_b0_last4"] = logits[0, -4:, :].detach()
    tensors["logits_blast_first4"] = logits[-1, :4, :].detach()
    for n, p in m64.named_parameters():
        tensors["grad." + n] = p.grad.detach().clone()
    rot = m64.model.rotary_emb
    tensors["rope_inv_freq"] = rot.inv_freq.detach().clone()

    # greedy continuations from the untrained weights, full recomputation each step
    greedy = []
    pgen = torch.Generator().manual_seed(SEED + 3)
    with torch.no_grad():
        for length in PROMPT_LENGTHS:
            ids = token_rows(pgen, torch, 1, length, vocab)
            ids[0, 0] = COMMON["bos_token_id"]
            prompt = ids[0].tolist()
            margin, new = math.inf, []
            for _ in range(GREEDY_NEW):
                last = m64(input_ids=ids).logits[0, -1]
                top = torch.topk(last, 2)
                margin = min(margin, float(top.values[0] - top.values[1]))
                nxt = int(top.indices[0])
                new.append(nxt)
                ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
            greedy.append({"prompt_ids": prompt, "new_ids": new, "min_top2_margin": margin})

    # AdamW on the forward batch: PyTorch's defaults otherwise (decay on every tensor)
    m64.zero_grad(set_to_none=True)
    opt = torch.optim.AdamW(m64.parameters(), lr=ADAMW["lr"], betas=(ADAMW["beta1"], ADAMW["beta2"]),
                            eps=ADAMW["eps"], weight_decay=ADAMW["weight_decay"])
    trace = []
    for _ in range(ADAMW_STEPS):
        opt.zero_grad(set_to_none=True)
        _, per = losses_of(m64)
        step_loss = per.mean()
        trace.append(float(step_loss))
        step_loss.backward()
        opt.step()
    with torch.no_grad():
        trace.append(float(losses_of(m64)[1].mean()))
    for n, p in m64.named_parameters():
        tensors["after3." + n] = p.detach().clone()
    summary = {
        "forward": {"B": B, "T": T, "loss": float(loss)},
        "adamw": dict(ADAMW, steps=ADAMW_STEPS,
                      applies_to="every parameter (PyTorch AdamW: decoupled decay on all tensors)",
                      loss_before_each_step_and_after_last=trace),
        "greedy": greedy,
        "rope": {"inv_freq": [float(v) for v in rot.inv_freq], "attention_scaling": float(rot.attention_scaling)},
        "parameters": names,
    }
    return tensors, summary


README = """# {name}: an independent reference for tern's Llama family

Made by `scripts/h200/make_llama_refs.py` (PyTorch {torch_v}, transformers {tf_v}, float64 on
the CPU) from a seeded random init, never by tern. {what}

Files
- `config.json`, `generation_config.json`, `model.safetensors`: `save_pretrained` (float32).
- `expected.json`: `config` (as transformers holds it), `forward` (B, T, mean loss),
  `adamw` (hyper-parameters; the loss before each of {steps} steps on the forward batch and
  after the last), `greedy` (prompts of token ids, BOS first; {new} greedy tokens by full
  recomputation from the untrained weights; the smallest top-1/top-2 logit margin seen),
  `rope` (transformers' inv_freq, float32 as it computes them, and attention_scaling),
  `parameters` (every parameter's name).
- `expected.safetensors` (float32 copies of float64 values): `inputs`, `targets` int32
  [B, T]; `losses` [B, T]; `logits_b0_last4`, `logits_blast_first4` [4, V]; `grad.<name>` of
  the mean loss for every parameter (a tied embedding's gradient includes the output
  layer's); `after3.<name>` the parameters after the AdamW steps; `rope_inv_freq`.
No tokenizer: the inputs are token ids (0-2 reserved: BOS {bos}, EOS {eos}).

Tolerances as llama-tiny-a's README suggests for a float32 implementation.
"""


def write_model(outdir, name, torch, transformers, safetensors_torch):
    folder = os.path.join(outdir, name)
    os.makedirs(folder, exist_ok=True)
    model = make_model(name, torch, transformers)
    model.save_pretrained(folder, safe_serialization=True)
    tensors, summary = expected_values(model, torch, MODELS[name]["vocab_size"])
    # the saved files give the same values: reload and recompute the logits
    again = transformers.AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float64,
                                                              attn_implementation="eager")
    with torch.no_grad():
        re = again(input_ids=tensors["inputs"].to(torch.int64)).logits
    # (equal unless transformers rebuilds inv_freq in float64 on a float64 load: then a
    # difference of float32 rounding shows here, and is printed)
    drift = float((re[0, -4:, :] - tensors["logits_b0_last4"]).abs().max())
    if drift > 1e-5:
        raise SystemExit(f"{name}: the reloaded model's logits differ by {drift}")
    store = {k: (v.to(torch.float32) if v.is_floating_point() else v).contiguous() for k, v in tensors.items()}
    safetensors_torch.save_file(store, os.path.join(folder, "expected.safetensors"), metadata={"format": "pt"})
    cfg = MODELS[name]
    summary = dict({"family": cfg["model_type"], "config": model.config.to_dict()}, **summary)
    with open(os.path.join(folder, "expected.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=False)
        f.write("\n")
    what = ("A Qwen2 with q/k/v biases, untied embeddings and grouped key/value heads."
            if cfg["model_type"] == "qwen2" else
            "A Llama with rope_scaling llama3, attention and MLP biases and tied embeddings.")
    with open(os.path.join(folder, "README.md"), "w") as f:
        f.write(README.format(name=name, torch_v=torch.__version__, tf_v=transformers.__version__,
                              what=what, steps=ADAMW_STEPS, new=GREEDY_NEW,
                              bos=cfg["bos_token_id"], eos=cfg["eos_token_id"]))
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    margins = [round(g["min_top2_margin"], 4) for g in summary["greedy"]]
    print(f"{name}: {size} bytes, loss {summary['forward']['loss']:.6f}, greedy margins {margins}, "
          f"reload drift {drift:.3g}")
    if size > MAX_BYTES:
        raise SystemExit(f"{name}: {size} bytes is over the {MAX_BYTES} limit")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", help="folder to write one subfolder per model into")
    ap.add_argument("--only", choices=sorted(MODELS), action="append",
                    help="make only this model (repeatable)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan; needs no torch")
    args = ap.parse_args(argv)
    names = args.only or list(MODELS)
    p = plan(names)
    if args.dry_run:
        print(json.dumps({"outdir": args.outdir, "models": p}, indent=1))
        return 0
    import torch
    import transformers
    import safetensors.torch as safetensors_torch
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(args.outdir, exist_ok=True)
    for name in names:
        write_model(args.outdir, name, torch, transformers, safetensors_torch)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
