"""What a layer's bias gradient costs as one more row of its weight gradient's product.

GPT-2's q|k|v and fc weights are stored [C, N] with their bias [N] right after them, so the
product dW_ext [C + 1, N] = X_ext^T dY, with X_ext = [X | 1] (X: the layer norm's output
[BT, C] in a buffer of row stride C + 8 whose column C holds ones), writes the weight
gradient and the bias gradient in one product. This times, with cuBLAS through PyTorch
(bf16 in and out, f32 accumulation, as tern's training step):
  plain  dW = X^T dY                            (the product alone)
  sum    dY summed over its rows                (what tern runs after it today: a pass over dY)
  ext    dW_ext = X_ext^T dY, X_ext strided     (the product with the bias row)
at B*T = 16384 for GPT-2 124M (C 768) and 1.5B (C 1600). Run: python3 bias_row_probe.py
"""
import torch

BT = 16384
SHAPES = [("124M qkv", 768, 2304), ("124M fc", 768, 3072), ("1.5B qkv", 1600, 4800), ("1.5B fc", 1600, 6400)]


def timed(fn, reps=40):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / reps * 1000.0)
    return best


def main():
    torch.manual_seed(0)
    dev = "cuda"
    print(torch.cuda.get_device_name(0))
    print("| shape | plain us | row sum us | plain + sum | ext us | ext / (plain + sum) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, C, N in SHAPES:
        ld = C + 8
        store = torch.randn(BT, ld, device=dev, dtype=torch.bfloat16)
        store[:, C] = 1.0
        store[:, C + 1:] = 0.0
        x = store[:, :C]
        x_ext = store[:, :C + 1]
        dy = torch.randn(BT, N, device=dev, dtype=torch.bfloat16)
        dw = torch.empty(C, N, device=dev, dtype=torch.bfloat16)
        dw_ext = torch.empty(C + 1, N, device=dev, dtype=torch.bfloat16)
        db = torch.empty(N, device=dev, dtype=torch.bfloat16)
        # the extended product agrees with the two it replaces (bf16 rounding of a sum of 16384)
        torch.mm(x_ext.t(), dy, out=dw_ext)
        ref_db = dy.float().sum(0)
        err = (dw_ext[C].float() - ref_db).abs().max().item() / ref_db.abs().max().item()
        t_plain = timed(lambda: torch.mm(x.t(), dy, out=dw))
        t_sum = timed(lambda: torch.sum(dy, 0, out=db))
        t_ext = timed(lambda: torch.mm(x_ext.t(), dy, out=dw_ext))
        print(f"| {name} C={C} N={N} | {t_plain:.1f} | {t_sum:.1f} | {t_plain + t_sum:.1f} | {t_ext:.1f} | "
              f"{t_ext / (t_plain + t_sum):.3f} (bias row rel err {err:.1e}) |")


if __name__ == "__main__":
    main()
