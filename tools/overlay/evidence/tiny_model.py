"""Build a tiny random Llama and a locally trained tokenizer (no download): the model
`make evidence-e2e` serves on CPU.

Run by the engine environment's Python (it needs torch, transformers and
tokenizers, which the tool's own environment does not have):

    <env>/bin/python tools/overlay/evidence/tiny_model.py OUT_DIR

2 layers, hidden 128, vocabulary 4096, random weights (seeded), about 6 MB. The
tokenizer is a byte-level BPE trained on seeded random words, so `vllm bench serve
--dataset-name random` can sample and decode its token ids.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

VOCAB = 4096
HIDDEN = 128
LAYERS = 2
HEADS = 4
MAX_LEN = 1024
SEED = 0


def build(out: Path) -> dict:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(SEED)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 8))) for _ in range(3000)]
    corpus = [" ".join(rng.choice(words) for _ in range(40)) for _ in range(2000)]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>")
    fast.save_pretrained(out)
    torch.manual_seed(SEED)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN,
                      num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=HEADS,
                      max_position_embeddings=MAX_LEN, bos_token_id=1, eos_token_id=2,
                      tie_word_embeddings=False)
    LlamaForCausalLM(cfg).to(torch.float32).save_pretrained(out)
    size = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    return {"dir": str(out), "vocab": len(fast), "layers": LAYERS, "hidden": HIDDEN, "bytes": size}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: tiny_model.py OUT_DIR", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(build(Path(sys.argv[1]))))
