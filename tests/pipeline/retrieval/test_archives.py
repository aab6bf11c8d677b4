"""An archive (a Notion or Confluence export, a release tarball) is indexed member by member, each member a document
of its own."""

import gzip
import io
import tarfile
import zipfile

import pytest

from models import DataError
from pipeline.retrieval import archives, zipped_xml
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


def source_release(path, mode: str) -> None:
    """A project's release as a tar archive: documentation, code, a link, hidden and tool folders."""
    def add(archive, name, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))

    with tarfile.open(path, mode) as archive:
        add(archive, "proj-1.0/docs/guide.md", b"# Guide\n\nRun `proj sync` to copy the files.\n")
        add(archive, "proj-1.0/docs/faq.html", b"<title>FAQ</title><p>Sync runs every hour.</p>")
        add(archive, "proj-1.0/docs/.draft.md", b"# Draft\n\nNot published.\n")
        add(archive, "proj-1.0/node_modules/dep/README.md", b"# Dep\n\nA dependency's readme.\n")
        add(archive, "proj-1.0/setup.py", b"print('hi')\n")
        link = tarfile.TarInfo("proj-1.0/docs/latest.md")
        link.type, link.linkname = tarfile.SYMTYPE, "guide.md"
        archive.addfile(link)
        folder = tarfile.TarInfo("proj-1.0/empty.md")
        folder.type = tarfile.DIRTYPE
        archive.addfile(folder)


@pytest.mark.parametrize(("name", "mode"), [("proj.tar", "w"), ("proj.tgz", "w:gz"), ("proj.tar.gz", "w:gz"),
                                            ("proj.tar.bz2", "w:bz2"), ("proj.tar.xz", "w:xz")])
def test_a_tar_archive_is_indexed_member_by_member_whatever_its_compression(tmp_path, name, mode):
    release = tmp_path / name
    source_release(release, mode)
    idx = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    report = ingest(idx, [tmp_path], tenant="t")
    assert report.files == 2 and report.unsupported_files == {".py": 1}  # links, folders, hidden, tools: not files
    chunks = sorted(idx.iter_chunks(), key=lambda c: c.source)
    assert [(c.title, c.metadata["path"]) for c in chunks] == [("FAQ", f"{release}/proj-1.0/docs/faq.html"),
                                                                ("Guide", f"{release}/proj-1.0/docs/guide.md")]
    assert ingest(idx, [release], tenant="t").chunks_unchanged == 2


def test_a_damaged_or_oversized_tar_archive_is_an_error_naming_it(tmp_path, monkeypatch):
    fake = tmp_path / "notes.tar.gz"
    fake.write_bytes(b"\x1f\x8b not really gzip")
    idx = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    with pytest.raises(DataError, match=r"notes\.tar\.gz: not a readable tar archive"):
        ingest(idx, [fake], tenant="t")
    cut = tmp_path / "cut.tar"
    source_release(cut, "w")
    cut.write_bytes(cut.read_bytes()[:1024 + 512 + 20])  # the first member whole, the second cut off in its data
    report = ingest(idx, [cut], tenant="t", skip_errors=True)
    assert report.files == 1 and any(s["path"].startswith(str(cut)) and f"{cut}: the archive is damaged" in s["reason"]
                                     for s in report.skipped)
    for mode, name in (("w", "headless.tar"), ("w:gz", "headless.tar.gz")):  # cut inside the second header
        headless = tmp_path / name
        source_release(headless, mode)
        with tarfile.open(headless) as opened:
            whole = opened.getmembers()
        data = headless.read_bytes() if mode == "w" else gzip.decompress(headless.read_bytes())
        data = data[:whole[1].offset + 100]
        headless.write_bytes(data if mode == "w" else gzip.compress(data))
        report = ingest(idx, [headless], tenant="t", skip_errors=True)
        assert report.files == 1 and any(f"{headless}: the archive is cut short inside a member's header" in
                                         s["reason"] for s in report.skipped)
    monkeypatch.setattr(archives, "MAX_TAR_BYTES", 600)  # a tar bomb, in miniature
    big = tmp_path / "big.tar"
    source_release(big, "w")
    with pytest.raises(DataError, match=r"big\.tar: unpacks past 600 bytes in all; .*unpack it and add its folder"):
        ingest(LocalHybridIndex(tmp_path / "idx2", embedder=HashEmbedder()), [big], tenant="t")


def test_a_member_too_large_to_be_a_document_is_that_member_s_error(tmp_path, monkeypatch):
    monkeypatch.setattr(zipped_xml, "MAX_PART_BYTES", 30)  # the cap zip parts and tar members share
    release = tmp_path / "proj.tar"
    source_release(release, "w")
    report = ingest(LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder()), [release], tenant="t",
                    skip_errors=True)
    assert report.files == 0 and len(report.skipped) == 2
    reason = report.skipped[0]["reason"]
    assert reason.startswith(f"{release}: proj-1.0/docs/guide.md unpacks to 44 bytes, more than 30")
