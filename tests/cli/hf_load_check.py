"""Loads a checkpoint written by `tern train` with Hugging Face transformers, unchanged, and
checks that its loss on the first batch of a text file equals tern's (within 1e-4: both in
float32 on the CPU). usage: hf_load_check.py TERN_BINARY CHECKPOINT_DIR TEXT_FILE"""
import subprocess
import sys

import torch
from transformers import GPT2LMHeadModel

tern, ckpt, text_file = sys.argv[1], sys.argv[2], sys.argv[3]
T = 32
out = subprocess.run([tern, "eval", "--model", ckpt, "--data", text_file, "--batch", "1",
                      "--seq", str(T), "--batches", "1", "--backend", "cpu"],
                     capture_output=True, text=True, check=True).stdout
tern_loss = float(next(l for l in out.splitlines() if l.startswith("batch 0:")).split()[-1])

# float32, as `tern eval` computes (a bf16 checkpoint is widened exactly)
model = GPT2LMHeadModel.from_pretrained(ckpt, dtype=torch.float32).eval()
# The same ids tern's data loader used (tern's tokenizer equals tiktoken's on all of Brown).
with open(text_file, "rb") as f:
    ids_text = subprocess.run([tern, "tokenize", "--model", ckpt], stdin=f, capture_output=True,
                              check=True).stdout
ids = [int(x) for x in ids_text.split()][: T + 1]
with torch.no_grad():
    hf_loss = model(torch.tensor([ids]), labels=torch.tensor([ids])).loss.item()
print(f"tern loss {tern_loss:.6f}, transformers loss {hf_loss:.6f}")
assert abs(tern_loss - hf_loss) < 1e-4 * max(1.0, abs(hf_loss)), "losses differ"
