"""Compression through the real LLMLingua-2 code path (a MiniLM-based stand-in model)."""

import pytest

from memory.secom.compression import IdentityCompressor, LLMLingua2Compressor, load_compressor
from memory.tokens import count_tokens
from tests.secom_fixtures import tiny_llmlingua2_model

TEXT = (
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.\n"
    "Melanie: That sounds wonderful! What happened there, and who did you meet?\n"
    "Caroline: People shared their stories about coming out. I felt accepted and I want to "
    "study counseling so I can help others in the same situation."
)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return tiny_llmlingua2_model(tmp_path_factory.mktemp("llmlingua"))


def test_real_llmlingua2_code_path_compresses_each_text(tiny_model):
    comp, why = load_compressor(tiny_model)
    assert isinstance(comp, LLMLingua2Compressor) and why == ""
    assert "bert-base-multilingual-cased" in comp.model_name
    short = "Melanie: I painted a sunrise over the lake last weekend."
    keys = comp.compress([TEXT, short], 0.5)
    assert len(keys) == 2 and all(k.strip() for k in keys)
    n0, n1 = count_tokens(TEXT), count_tokens(keys[0])
    assert n1 < n0 * 0.85  # tokens were dropped
    assert "\n" in keys[0]  # forced token: lines survive
    assert comp.compress([TEXT], 1.0) == [TEXT]  # rate 1.0 keeps everything
    assert comp.compress([""], 0.5) == [""]


def test_lower_rate_keeps_fewer_tokens(tiny_model):
    comp, _ = load_compressor(tiny_model)
    assert comp is not None
    k75, k40 = comp.compress([TEXT], 0.75)[0], comp.compress([TEXT], 0.4)[0]
    assert count_tokens(k40) < count_tokens(k75) < count_tokens(TEXT)


def test_load_compressor_never_raises_offline():
    comp, why = load_compressor("microsoft/llmlingua-2-bert-base-multilingual-cased-meetingbank-not-here")
    assert comp is None and "compression unavailable" in why and "original text" in why
    comp, why = load_compressor("")
    assert comp is None and "off" in why


def test_missing_local_model_folder_is_a_reason_not_a_crash(tmp_path):
    comp, why = load_compressor(str(tmp_path / "missing-model"))
    assert comp is None and why


def test_identity_compressor():
    assert IdentityCompressor().compress(["a b", "c"], 0.5) == ["a b", "c"]


def test_compression_never_drops_who_said_what(tiny_model):
    """Issue 10: the forced tokens are this project's line markers ("Speaker:"), so every line of a
    compressed key still starts with its speaker, even at a harsh rate."""
    comp, _ = load_compressor(tiny_model)
    assert comp is not None
    key = comp.compress([TEXT], 0.2)[0]
    lines = [ln for ln in key.split("\n") if ln.strip()]
    assert [ln.split(":")[0] for ln in lines] == ["Caroline", "Melanie", "Caroline"], key
