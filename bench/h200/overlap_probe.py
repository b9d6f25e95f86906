"""Does a memory-bound pass on a second stream hide under the backward's products?

Issue 24 item 3: at GPT-2 1.5B (B=16, T=1024, C=1600) the per-layer GELU output is 10 GB of
the step's peak memory; recomputing it from the pre-activation costs one read and one write
of [BT, 4C] bf16 a layer (+2.4% a step when it runs in line). This probe times, with
PyTorch on the GPU it runs on, the layer's backward products (cuBLAS bf16) alone, the GELU
pass alone, and both issued on two streams at once, to see how much of the pass the
products hide. Prints one line per case: ms per iteration (CUDA events, median of 5 runs
of 20 iterations).

    python3 bench/h200/overlap_probe.py
"""
import statistics

import torch

BT, C = 16 * 1024, 1600
H = 4 * C
dev = "cuda"
torch.manual_seed(0)
bf = torch.bfloat16
dres = torch.randn(BT, C, device=dev, dtype=bf)
w_proj = torch.randn(H, C, device=dev, dtype=bf) * 0.02
w_fc = torch.randn(C, H, device=dev, dtype=bf) * 0.02
fch = torch.randn(BT, H, device=dev, dtype=bf)
gelu_out = torch.empty_like(fch)
ln2 = torch.randn(BT, C, device=dev, dtype=bf)
dfch = torch.empty(BT, H, device=dev, dtype=bf)
dw_proj = torch.empty(H, C, device=dev, dtype=bf)
dw_fc = torch.empty(C, H, device=dev, dtype=bf)
dln = torch.empty(BT, C, device=dev, dtype=bf)
side = torch.cuda.Stream()


def products():
    # the MLP's backward products of one layer: dW_proj, d(gelu out), dW_fc, d(ln2)
    torch.mm(gelu_out.t(), dres, out=dw_proj)
    torch.mm(dres, w_proj.t(), out=dfch)
    torch.mm(ln2.t(), dfch, out=dw_fc)
    torch.mm(dfch, w_fc.t(), out=dln)


def recompute():
    torch.nn.functional.gelu(fch, approximate="tanh", out=gelu_out)


def both():
    main = torch.cuda.current_stream()
    side.wait_stream(main)
    with torch.cuda.stream(side):
        recompute()
    products()
    main.wait_stream(side)


def time_ms(fn, iters=20, runs=5):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) / iters)
    return statistics.median(out)


t_p = time_ms(products)
t_r = time_ms(recompute)
t_b = time_ms(both)
t_s = time_ms(lambda: (recompute(), products()))
gb = 2 * BT * H * 2 / 1e9
print(f"probe: {torch.cuda.get_device_name()}, BT={BT} C={C}")
print(f"probe: products alone {t_p:.3f} ms; gelu pass alone {t_r:.3f} ms ({gb / t_r:.2f} TB/s)")
print(f"probe: in line {t_s:.3f} ms (+{t_s - t_p:.3f}); on two streams {t_b:.3f} ms (+{t_b - t_p:.3f})")
