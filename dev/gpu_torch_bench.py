#!/usr/bin/env python3
"""PyTorch beside Scorch's CUDA path on the same checkpoint (bin/gpu-check runs it on the GPU machine).

Loads the small demo model with Hugging Face transformers' DeepseekV3ForCausalLM in BF16 on the GPU, checks its
next-token log-probs against the Scorch CPU engine's (small_prompts.json, written by GpuCheck), then times
scoring prefill (forward + log-softmax gather of every token) at 8 x 256, 1 x 1024 and 32 x 512 and greedy decode
at batch 1 and 16, the shapes GpuCheck times. Writes torch.json beside GpuCheck's figures.
"""
import json
import sys
import time
from pathlib import Path

import torch

model_dir, out_dir = Path(sys.argv[1]), Path(sys.argv[2])
results = {"torch": torch.__version__}


def timed(fn, warmup=3, runs=7):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    secs = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        secs.append(time.perf_counter() - t0)
    secs.sort()
    return secs[len(secs) // 2]


def score(model, ids):
    logits = model(input_ids=ids).logits.float()
    lp = torch.log_softmax(logits[:, :-1], dim=-1)
    return lp.gather(-1, ids[:, 1:, None])[..., 0]


try:
    import transformers
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    results["transformers"] = transformers.__version__
    # The demo config names itself kimi_k2 (as Kimi K2's files do, with remote code); transformers' own
    # DeepseekV3 classes read the same keys.
    raw = json.loads((model_dir / "config.json").read_text())
    for k in ("auto_map", "model_type", "architectures", "transformers_version", "torch_dtype"):
        raw.pop(k, None)
    raw["rope_scaling"] = dict(raw["rope_scaling"], rope_type=raw["rope_scaling"].get("type", "yarn"))
    config = DeepseekV3Config(**raw)
    for dtype_name, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        model = DeepseekV3ForCausalLM.from_pretrained(model_dir, config=config, dtype=dtype).cuda().eval()
        cfg = model.config
        r = results[dtype_name] = {}
        with torch.inference_mode():
            prompts = json.loads((out_dir / "small_prompts.json").read_text())
            worst = 0.0
            for p in prompts:
                ids = torch.tensor([p["token_ids"]], device="cuda")
                got = score(model, ids)[0].cpu()
                worst = max(worst, (got - torch.tensor(p["cpu_logprobs"])).abs().max().item())
            r["max_abs_dlogprob_vs_scorch_cpu"] = worst
            print(f"torch {dtype_name}: max |dlogprob| vs the Scorch CPU engine {worst:.3g}", flush=True)
            if dtype_name != "bf16":
                continue
            g = torch.Generator(device="cuda").manual_seed(5)
            for batch, seq in ((8, 256), (1, 1024), (32, 512)):
                ids = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda", generator=g)
                med = timed(lambda: score(model, ids))
                r[f"prefill_{batch}x{seq}"] = {"tokens_per_s": batch * seq / med, "median_s": med}
                print(f"  torch bf16 prefill {batch} x {seq}: {batch * seq / med:.0f} tokens/s, median {med * 1e3:.2f} ms", flush=True)
            for batch, steps in ((1, 128), (16, 64)):
                ids = torch.randint(0, cfg.vocab_size, (batch, 128), device="cuda", generator=g)
                mask = torch.ones_like(ids)

                def gen():
                    model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=steps, min_new_tokens=steps, do_sample=False)

                def pre():
                    model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=1, min_new_tokens=1, do_sample=False)

                full = timed(gen, warmup=1, runs=3)
                prefill_only = timed(pre, warmup=1, runs=3)
                per_step = (full - prefill_only) / (steps - 1)
                r[f"decode_b{batch}"] = {"tokens_per_s": batch / per_step, "ms_per_step": per_step * 1e3}
                print(f"  torch bf16 decode batch {batch}: {batch / per_step:.0f} tokens/s, {per_step * 1e3:.2f} ms/step", flush=True)
        del model
        torch.cuda.empty_cache()
except Exception as e:  # report and keep what was measured
    import traceback

    traceback.print_exc()
    results["error"] = repr(e)

(out_dir / "torch.json").write_text(json.dumps(results, indent=2))
