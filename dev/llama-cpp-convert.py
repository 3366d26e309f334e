#!/usr/bin/python3
"""llama.cpp's own convert_hf_to_gguf.py on a Scorch demo checkpoint, with Debian's Python (no PyPI).

    /usr/bin/python3 dev/llama-cpp-convert.py LLAMA_CPP_SRC MODEL_DIR --outtype bf16 --outfile OUT.gguf

Runs the converter of the llama.cpp clone LLAMA_CPP_SRC unchanged (its tensors, names, dtypes and metadata), with
three stand-ins, each used only where what it replaces is missing or refuses the demo model, and reported on stderr:

- `transformers` (not in Debian): a module whose AutoConfig and AutoTokenizer raise; the converter then reads
  config.json itself (its own fallback).
- torch's float8 dtypes (Debian's torch 1.13 has none): distinct placeholders, so the converter's dtype tables load;
  an FP8 checkpoint then fails loudly rather than converting wrong (this script is for BF16 demo checkpoints).
- the vocabulary: the demo's byte-level BPE tokenizer is not one whose pre-tokenizer llama.cpp recognises (its
  `get_vocab_base_pre` hash check refuses every unknown tokenizer, and needs AutoTokenizer besides), so where the
  converter's set_vocab raises, the token list, merges and special tokens are written from tokenizer.json as its own
  `_set_vocab_gpt2` writes them (padded to vocab_size with [PADi] tokens), pre-tokenizer "default". The vocabulary does
  not touch the decode timings (the bench tools feed token ids), only the file's validity.
"""
import json
import os
import runpy
import sys
import types

src, model = sys.argv[1], sys.argv[2]
sys.path.insert(0, src)
sys.path.insert(1, os.path.join(src, "gguf-py"))
note = lambda msg: print("llama-cpp-convert: " + msg, file=sys.stderr)

try:
    import transformers  # noqa: F401
except ImportError:
    stub = types.ModuleType("transformers")

    class _Absent:
        @staticmethod
        def from_pretrained(*args, **kwargs):
            raise ImportError("transformers is not installed (llama-cpp-convert's stand-in)")

    stub.AutoConfig = stub.AutoTokenizer = _Absent
    sys.modules["transformers"] = stub
    note("transformers not installed: a stand-in whose AutoConfig/AutoTokenizer raise (config.json is read directly)")

import torch  # noqa: E402

for name in ("float8_e4m3fn", "float8_e5m2"):
    if not hasattr(torch, name):
        setattr(torch, name, object())
        note(f"torch {torch.__version__} has no {name}: a placeholder (FP8 checkpoints are not for this script)")

import gguf  # noqa: E402
from conversion import deepseek  # noqa: E402


def vocab_from_tokenizer_json(self):
    with open(os.path.join(self.dir_model, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    bpe = tok["model"]
    if bpe.get("type") != "BPE":
        raise ValueError("tokenizer.json is not a BPE tokenizer")
    by_id = {i: t for t, i in bpe["vocab"].items()}
    special = {}
    for added in tok.get("added_tokens", []):
        by_id[added["id"]] = added["content"]
        special[added["id"]] = added.get("special", False)
    size = self.hparams.get("vocab_size", len(by_id))
    tokens, types_ = [], []
    for i in range(size):
        if i not in by_id:
            tokens.append(f"[PAD{i}]")
            types_.append(gguf.TokenType.UNUSED)
        else:
            tokens.append(by_id[i])
            types_.append(gguf.TokenType.CONTROL if special.get(i) else gguf.TokenType.NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in bpe.get("merges", [])]
    self.gguf_writer.add_tokenizer_model("gpt2")
    self.gguf_writer.add_tokenizer_pre("default")
    self.gguf_writer.add_token_list(tokens)
    self.gguf_writer.add_token_types(types_)
    self.gguf_writer.add_token_merges(merges)
    gguf.SpecialVocab(self.dir_model, load_merges=False).add_to_gguf(self.gguf_writer)


original = deepseek.DeepseekV2Model.set_vocab


def set_vocab(self):
    try:
        original(self)
    except Exception as e:  # the converter's own refusal: unknown pre-tokenizer, or no AutoTokenizer
        note(f"the converter's set_vocab refused this tokenizer ({type(e).__name__}: {e}); "
             "writing the BPE vocabulary from tokenizer.json, pre-tokenizer 'default'")
        vocab_from_tokenizer_json(self)


deepseek.DeepseekV2Model.set_vocab = set_vocab
sys.argv = [os.path.join(src, "convert_hf_to_gguf.py"), model] + sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
