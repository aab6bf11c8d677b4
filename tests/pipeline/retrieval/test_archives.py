"""A zip archive (a Notion or Confluence export) is indexed member by member, each member a document of its own."""

import zipfile

import pytest

from models import DataError
from pipeline.retrieval.index import LocalHybridIndex
from pipeline.retrieval.ingest import ingest
from tests.pipeline.conftest import HashEmbedder


def notion_export(path) -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("Export/", "")
        archive.writestr("Export/Refunds 1a2b.md", "# Refunds\n\nItems can be returned within 30 days.\n")
        archive.writestr("Export/Plans 3c4d.csv", "plan,price\nTeam,12\nBusiness,30\n")
        archive.writestr("Export/diagram.png", b"\x89PNG")
        archive.writestr("Export/old.zip", b"PK")
        archive.writestr("__MACOSX/Export/._Refunds 1a2b.md", b"\x00")
        archive.writestr("Export/.DS_Store", b"\x00")
        archive.writestr("Export/broken.json", '{"a": ')


def test_each_member_is_a_document_named_inside_its_archive(tmp_path):
    export = tmp_path / "export.zip"
    notion_export(export)
    idx = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    with pytest.raises(DataError, match=r"export\.zip/Export/broken\.json: not valid JSON.*--skip-errors"):
        ingest(idx, [tmp_path], tenant="t")
    assert not idx.path.exists()  # nothing written
    report = ingest(idx, [tmp_path], tenant="t", skip_errors=True)
    assert report.files == 2 and report.chunks_added == 3  # one page, two records
    assert report.skipped == [{"path": f"{export}/Export/broken.json",
                               "reason": f"{export}/Export/broken.json: not valid JSON (Expecting value at line 1, "
                                         "column 7)"}]
    assert report.unsupported_files == {".png": 1, ".zip": 1}  # hidden members are not counted
    chunks = sorted(idx.iter_chunks(), key=lambda c: (c.source, c.position))
    assert [(c.source, c.title, c.metadata["path"]) for c in chunks] == [
        ("Plans 3c4d.csv", "Plans 3c4d", f"{export}/Export/Plans 3c4d.csv"),
        ("Plans 3c4d.csv", "Plans 3c4d", f"{export}/Export/Plans 3c4d.csv"),
        ("Refunds 1a2b.md", "Refunds", f"{export}/Export/Refunds 1a2b.md")]
    assert all(c.is_record for c in chunks[:2]) and not chunks[2].is_record
    again = ingest(idx, [export], tenant="t", skip_errors=True)
    assert (again.chunks_added, again.chunks_unchanged) == (0, 3)
    assert idx.remove(document=f"{export}/Export/Refunds 1a2b.md") == 1


def test_a_damaged_archive_is_an_error_naming_it_or_is_skipped(tmp_path):
    path = tmp_path / "export.zip"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    (tmp_path / "page.md").write_text("# Page\n\nReadable.\n", encoding="utf-8")
    idx = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    with pytest.raises(DataError, match=r"export\.zip: not a readable zip archive"):
        ingest(idx, [tmp_path], tenant="t")
    report = ingest(idx, [tmp_path], tenant="t", skip_errors=True)
    assert report.files == 1 and [s["path"] for s in report.skipped] == [str(path)]
