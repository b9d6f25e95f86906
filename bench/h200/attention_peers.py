"""PyTorch's attention kernels at GPT-2's training sizes, beside tern's (bench_ops).

B=16, T=1024, head size 64, causal, bf16; 12 heads (GPT-2 124M) and 25 (1.5B); q, k, v, the
output and its gradient contiguous [B, NH, T, hs] (no layout copies in the timings). Each
backend that runs here (cuDNN, FlashAttention-2 as PyTorch ships it, memory-efficient) is
timed forward (without autograd) and backward (autograd.grad of one saved forward, repeated).
Milliseconds: medians of 7 runs of 10 calls each, timed by CUDA events; then the kernels'
own time a call from the profiler (every CUDA kernel of 10 calls, summed). FLOPs as
FlashAttention's papers count them: forward 4 B NH T^2 hs / 2 (the causal half), backward
2.5 times that.

    python3 bench/h200/attention_peers.py
"""
import statistics

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

B, T, HS = 16, 1024, 64
BACKENDS = [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash2", SDPBackend.FLASH_ATTENTION),
            ("efficient", SDPBackend.EFFICIENT_ATTENTION)]


def timed(fn, calls=10, runs=7):
    """Median milliseconds a call of fn, over runs of `calls` calls after a warm-up."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def kernel_ms(fn, calls=10):
    """The CUDA kernels' own milliseconds a call of fn (the profiler's sum over `calls`)."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total_us = sum(e.device_time_total for e in prof.key_averages())
    return total_us / 1e3 / calls


def main():
    torch.manual_seed(0)
    print(f"gpu: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"cudnn {torch.backends.cudnn.version()}")
    for nh in (12, 25):
        q, k, v = (torch.randn(B, nh, T, HS, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        dout = torch.randn(B, nh, T, HS, device="cuda", dtype=torch.bfloat16)
        flops = 4.0 * B * nh * T * T * HS / 2
        for name, backend in BACKENDS:
            try:
                with sdpa_kernel([backend]):
                    def fwd():
                        with torch.no_grad():
                            return sdpa(q, k, v, is_causal=True)

                    out = sdpa(q, k, v, is_causal=True)

                    def bwd():
                        torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)

                    f, b = timed(fwd), timed(bwd)
                    fk, bk = kernel_ms(fwd), kernel_ms(bwd)
            except RuntimeError as e:
                print(f"NH{nh} {name}: not run here ({str(e).splitlines()[0][:120]})")
                continue
            print(f"NH{nh} {name}: forward {f:.3f} ms ({flops / f / 1e9:.0f} TFLOP/s; kernels {fk:.3f}), "
                  f"backward {b:.3f} ms ({2.5 * flops / b / 1e9:.0f} TFLOP/s; kernels {bk:.3f})")


if __name__ == "__main__":
    main()
