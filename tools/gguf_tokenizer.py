#!/usr/bin/env python3
"""Writes a Hugging Face tokenizer folder (tokenizer.json, tokenizer_config.json
and chat_template.jinja) for the SentencePiece vocabulary a GGUF model
carries, so kvgate tokenises prompts as llama-server does for that model, and
a config.json with the model's attention shape (layers, heads, KV heads, head
size from the ARCH.* keys; float16, llama-server's default KV-cache type), from
which kvgate derives one token's KV bytes.

Usage: tools/gguf_tokenizer.py MODEL.gguf OUT_DIR

Only the standard library: it reads the GGUF header's key-value section
(GGUF v2/v3: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md) and
stops before the tensors. Supports tokenizer.ggml.model "llama" (SentencePiece
BPE with byte fallback, as Llama 2). The merges are the SentencePiece pieces'
two-way splits ranked by the merged piece's score, as the Hugging Face
conversion of a SentencePiece model derives them. The chat template is the
model's own (tokenizer.chat_template) or, when it has none, the ChatML
template llama-server falls back to; when the model adds a BOS token
(tokenizer.ggml.add_bos_token), as llama-server does to every rendered chat,
the template starts with it.
"""
import json
import os
import struct
import sys

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    def __init__(self, data):
        self.data = data
        self.at = 0

    def take(self, fmt):
        value = struct.unpack_from(fmt, self.data, self.at)[0]
        self.at += struct.calcsize(fmt)
        return value

    def string(self):
        length = self.take("<Q")
        value = self.data[self.at : self.at + length].decode("utf-8", errors="replace")
        self.at += length
        return value

    def value(self, kind):
        if kind in SCALARS:
            return self.take(SCALARS[kind])
        if kind == 8:
            return self.string()
        if kind == 9:
            item_kind = self.take("<I")
            count = self.take("<Q")
            return [self.value(item_kind) for _ in range(count)]
        raise ValueError(f"unknown GGUF value type {kind}")


def read_metadata(path):
    with open(path, "rb") as file:
        # The metadata precedes the tensors; 64 MiB holds any vocabulary.
        reader = Reader(file.read(64 << 20))
    if reader.take("<I") != 0x46554747:  # "GGUF"
        raise ValueError(f"{path}: not a GGUF file")
    version = reader.take("<I")
    if version < 2:
        raise ValueError(f"{path}: GGUF version {version} is not supported")
    reader.take("<Q")  # tensors
    pairs = reader.take("<Q")
    metadata = {}
    for _ in range(pairs):
        key = reader.string()
        metadata[key] = reader.value(reader.take("<I"))
    return metadata


def tokenizer_files(metadata):
    if metadata.get("tokenizer.ggml.model") != "llama":
        raise ValueError("only tokenizer.ggml.model 'llama' (SentencePiece) is supported")
    tokens = metadata["tokenizer.ggml.tokens"]
    scores = metadata["tokenizer.ggml.scores"]
    types = metadata.get("tokenizer.ggml.token_type", [1] * len(tokens))
    bos = metadata.get("tokenizer.ggml.bos_token_id", 1)
    eos = metadata.get("tokenizer.ggml.eos_token_id", 2)
    unk = metadata.get("tokenizer.ggml.unknown_token_id", 0)
    add_bos = metadata.get("tokenizer.ggml.add_bos_token", True)
    vocab = {piece: index for index, piece in enumerate(tokens)}
    # SentencePiece token types: 1 normal, 2 unknown, 3 control, 4 user defined, 6 byte.
    mergeable = {piece: index for index, piece in enumerate(tokens) if types[index] == 1}
    merges = []
    for piece, index in mergeable.items():
        for split in range(1, len(piece)):
            left, right = piece[:split], piece[split:]
            if left in mergeable and right in mergeable:
                merges.append((scores[index], index, mergeable[left], mergeable[right], left, right))
    merges.sort(key=lambda merge: (-merge[0], merge[1], merge[2], merge[3]))
    added = [
        {"id": index, "content": tokens[index], "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for index in range(len(tokens)) if types[index] in (2, 3)
    ]
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": ([{"SpecialToken": {"id": tokens[bos], "type_id": 0}}] if add_bos else [])
            + [{"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {tokens[bos]: {"id": tokens[bos], "ids": [bos], "tokens": [tokens[bos]]}},
        },
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": tokens[unk], "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [f"{left} {right}" for *_, left, right in merges]},
    }
    config = {
        "add_bos_token": bool(add_bos),
        "add_eos_token": False,
        "bos_token": tokens[bos],
        "eos_token": tokens[eos],
        "unk_token": tokens[unk],
        "clean_up_tokenization_spaces": False,
        "model_max_length": metadata.get("llama.context_length", 4096),
        "tokenizer_class": "LlamaTokenizer",
    }
    template = metadata.get("tokenizer.chat_template") or CHATML
    if add_bos and "bos_token" not in template:
        template = "{{ bos_token }}" + template
    return tokenizer, config, template


def shape_config(metadata):
    """The Hugging Face config fields kvgate reads for the KV shape, or None
    when the GGUF does not give them."""
    arch = metadata.get("general.architecture")
    layers = metadata.get(f"{arch}.block_count")
    heads = metadata.get(f"{arch}.attention.head_count")
    hidden = metadata.get(f"{arch}.embedding_length")
    if not arch or not layers or not heads or not hidden:
        return None
    # Per-layer head counts (a list) are not modelled: the largest prices it.
    if isinstance(heads, list):
        heads = max(heads)
    kv_heads = metadata.get(f"{arch}.attention.head_count_kv", heads)
    if isinstance(kv_heads, list):
        kv_heads = max(kv_heads)
    config = {
        "model_type": arch,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "hidden_size": hidden,
        "torch_dtype": "float16",
    }
    key_length = metadata.get(f"{arch}.attention.key_length")
    if key_length:
        config["head_dim"] = key_length
    return config


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    metadata = read_metadata(sys.argv[1])
    tokenizer, config, template = tokenizer_files(metadata)
    os.makedirs(sys.argv[2], exist_ok=True)
    with open(os.path.join(sys.argv[2], "tokenizer.json"), "w", encoding="utf-8") as out:
        json.dump(tokenizer, out, ensure_ascii=False)
    with open(os.path.join(sys.argv[2], "tokenizer_config.json"), "w", encoding="utf-8") as out:
        json.dump(config, out, ensure_ascii=False, indent=1)
    with open(os.path.join(sys.argv[2], "chat_template.jinja"), "w", encoding="utf-8") as out:
        out.write(template)
    shape = shape_config(metadata)
    if shape:
        with open(os.path.join(sys.argv[2], "config.json"), "w", encoding="utf-8") as out:
            json.dump(shape, out, indent=1)


if __name__ == "__main__":
    main()
