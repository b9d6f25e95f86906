"""PyTorch / Hugging Face baselines for the cuda handler's benchmarks, on the same GPU in the
same run (bench/h200/run.sh calls this next to `tern bench`).

  train:    GPT-2 124M (random init), B x T tokens, bf16 autocast, AdamW (fused), eager and
            torch.compile; median ms/step over timed steps after warm-up.
  generate: batch 1, greedy, Hugging Face generate with its KV cache; tokens/s.
  gemm:     a large bf16 matrix product: the measured peak that MFU figures use.

Prints one "baseline:" line per measurement."""
import argparse
import statistics
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def timed(fn, warmup, steps):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_gemm():
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    t = timed(lambda: a @ b, 3, 10)
    print(f"baseline: bf16 gemm {n}^3: {2 * n**3 / t / 1e12:.0f} TFLOP/s")


def bench_train(B, T, compiled):
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(attn_implementation="sdpa")).cuda()
    model.config.use_cache = False
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=True)
    x = torch.randint(0, 50257, (B, T + 1), device="cuda")
    forward = torch.compile(model) if compiled else model

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = forward(input_ids=x[:, :-1], labels=x[:, 1:]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    t = timed(step, 5 if compiled else 3, 10)
    name = "torch.compile" if compiled else "eager"
    print(f"baseline: pytorch {name} train B={B} T={T} bf16: {t * 1e3:.1f} ms/step, "
          f"{B * T / t:.0f} tokens/s")


def bench_generate(new_tokens):
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).cuda().eval()
    prompt = torch.randint(0, 50257, (1, 16), device="cuda")
    with torch.no_grad():
        run = lambda: model.generate(prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                     do_sample=False, pad_token_id=0)
        t = timed(run, 1, 3)
    print(f"baseline: hf generate fp32 batch 1: {new_tokens / t:.0f} tokens/s")
    model = model.to(torch.bfloat16)
    with torch.no_grad():
        t = timed(run, 1, 3)
    print(f"baseline: hf generate bf16 batch 1: {new_tokens / t:.0f} tokens/s")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["gemm", "train", "compile", "generate"])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--tokens", type=int, default=256)
    a = p.parse_args()
    if a.what == "gemm":
        bench_gemm()
    elif a.what in ("train", "compile"):
        bench_train(a.batch, a.seq, a.what == "compile")
    else:
        bench_generate(a.tokens)
