import json

import numpy as np
import pytest

from fae.memory.embeddings import HashedEmbedder
from fae.memory.errors import EmbedderMismatch, FormatTooNew, MemoryStoreError
from fae.memory.reflection_store import FORMAT_VERSION, MacroReflection, MemoryStore, MicroReflection
from tests.memory.conftest import NOW


def micro(resource, operation, tip, created_at=NOW, task="t"):
    return MicroReflection(
        resource=resource, operation=operation, tip=tip, success=True, task_id=task, created_at=created_at
    )


def macro(summary, heuristic="", text="", task="t", created_at=NOW):
    return MacroReflection(
        text=text, macro_summary=summary, heuristic=heuristic, success=True, task_id=task, created_at=created_at
    )


def test_manifest_records_format_and_backend(tmp_path, embedder):
    MemoryStore.create(tmp_path / "m", embedder, created_at=NOW)
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    assert manifest["format_version"] == FORMAT_VERSION
    assert manifest["embedding"] == {"name": "hashed-bow", "dimension": 384}
    assert manifest["created_at"] == NOW  # the caller's clock, not the wall clock


def test_a_newer_format_is_refused_with_a_clear_error(tmp_path, embedder):
    MemoryStore.create(tmp_path / "m", embedder, created_at=NOW)
    path = tmp_path / "m" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["format_version"] = FORMAT_VERSION + 1
    path.write_text(json.dumps(manifest))
    with pytest.raises(FormatTooNew, match=r"format version 2, newer than this fae understands \(1\)"):
        MemoryStore.open(tmp_path / "m")


def test_missing_store_and_foreign_directory(tmp_path, embedder):
    with pytest.raises(MemoryStoreError, match="no memory store"):
        MemoryStore.open(tmp_path / "absent")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x.txt").write_text("x")
    with pytest.raises(MemoryStoreError, match="not empty"):
        MemoryStore.create(tmp_path / "busy", embedder, created_at=NOW)


def test_another_backend_cannot_search_the_store(tmp_path, embedder):
    MemoryStore.create(tmp_path / "m", embedder, created_at=NOW)
    with pytest.raises(EmbedderMismatch, match="hashed-bow"):
        MemoryStore.open(tmp_path / "m", HashedEmbedder(dimension=64))


def test_micro_tips_exact_match_newest_first_without_repeats(tmp_path, embedder):
    store = MemoryStore.create(tmp_path / "m", embedder, created_at=NOW)
    store.add_micro(
        [
            micro("Slot", "update", "old tip", "2025-03-01T08:00:00+00:00"),
            micro("Slot", "update", "new tip", "2025-03-05T08:00:00+00:00"),
            micro("Slot", "update", "old tip", "2025-03-06T08:00:00+00:00"),
            micro("Slot", "search", "other operation"),
            micro("Appointment", "update", "other resource"),
        ]
    )
    tips = [t.tip for t in store.micro_tips("slot", "UPDATE", k=5)]
    assert tips == ["old tip", "new tip"]
    assert [t.tip for t in store.micro_tips("Slot", "update", k=1)] == ["old tip"]
    assert store.micro_tips("Slo", "update") == []


def test_macro_search_ranks_by_meaning_and_survives_reopening(tmp_path, embedder):
    store = MemoryStore.create(tmp_path / "m", embedder, created_at=NOW)
    store.add_macro(
        [
            macro("Book an appointment and mark the slot busy"),
            macro("Create a patient with name and birth date"),
            macro("Cancel coverage by updating its status"),
        ]
    )
    hits = store.search_macro("book the appointment slot", k=2)
    assert hits[0].reflection.macro_summary.startswith("Book")
    assert hits[0].score > hits[1].score
    reopened = MemoryStore.open(tmp_path / "m")  # builds the embedder from the manifest
    assert [h.reflection for h in reopened.search_macro("book the appointment slot", 2)] == [h.reflection for h in hits]


def test_numpy_and_faiss_give_the_same_ranking(tmp_path, embedder):
    pytest.importorskip("faiss")
    store = MemoryStore.create(tmp_path / "m", embedder, created_at=NOW, use_faiss=True)
    store.add_macro(
        [
            macro(f"strategy {i} for {word}")
            for i, word in enumerate(["slots", "patients", "coverage", "slots and patients", "orders"])
        ]
    )
    plain = MemoryStore.open(tmp_path / "m", embedder, use_faiss=False)
    assert (store.index_backend, plain.index_backend) == ("faiss", "numpy")
    query = "slots for patients"
    faiss_hits = [(h.reflection.macro_summary, round(h.score, 5)) for h in store.search_macro(query, 4)]
    numpy_hits = [(h.reflection.macro_summary, round(h.score, 5)) for h in plain.search_macro(query, 4)]
    # equal scores may come in either order (faiss does not promise one); the scores and the set agree
    assert [s for _, s in faiss_hits] == [s for _, s in numpy_hits]
    assert sorted(faiss_hits) == sorted(numpy_hits)
    assert faiss_hits[0][0] == "strategy 3 for slots and patients"


def test_a_reader_sees_rows_appended_by_a_writer(tmp_path, embedder):
    writer = MemoryStore.create(tmp_path / "m", embedder, created_at=NOW)
    reader = MemoryStore.open(tmp_path / "m")
    assert reader.stats()["macro"] == 0
    writer.add_macro([macro("Book an appointment")])
    writer.add_micro([micro("Slot", "update", "mark it busy")])
    assert reader.refresh() is True
    assert reader.stats()["macro"] == 1 and reader.stats()["micro"] == 1
    assert reader.refresh() is False


def test_vectors_are_stored_not_recomputed(tmp_path, embedder):
    store = MemoryStore.create(tmp_path / "m", embedder, created_at=NOW)
    store.add_macro([macro("Book an appointment"), macro("Find a patient")])
    raw = np.fromfile(tmp_path / "m" / "macro.f32", dtype="<f4").reshape(2, 384)
    assert np.allclose(raw, embedder.embed([r.embedding_text() for r in store.macro()]))
    (tmp_path / "m" / "macro.f32").write_bytes(raw[:1].tobytes())
    with pytest.raises(MemoryStoreError, match="2 macro rows but 1 vectors"):
        MemoryStore.open(tmp_path / "m")
