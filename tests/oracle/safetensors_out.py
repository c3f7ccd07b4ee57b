"""A minimal safetensors writer for the fixture scripts of tests/oracle (make_gpt_oss.py,
make_llama4.py, make_deepseek.py): the format's 8-byte little-endian header length, the JSON header (8-byte
aligned), then the tensors' bytes in order. Written for ptn's tests from the safetensors format
description; no code of the safetensors package is copied."""
import json
import os
import struct

import numpy as np


def write_safetensors(path, tensors):
    """tensors: {name: array}, float32 arrays stored as F32 and uint8 ones as U8, in this order."""
    header, chunks, offset = {}, [], 0
    for name, a in tensors.items():
        if a.dtype == np.float32:
            kind, raw = "F32", np.ascontiguousarray(a, dtype="<f4").tobytes()
        elif a.dtype == np.uint8:
            kind, raw = "U8", np.ascontiguousarray(a).tobytes()
        else:
            raise ValueError(f"{name}: {a.dtype}")
        header[name] = {"dtype": kind, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in chunks:
            f.write(raw)


def write_model_dir(out_dir, config, tensors):
    """An HF directory: out_dir (created if missing) with config.json and model.safetensors."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)
