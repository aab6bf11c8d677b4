"""Documents sent as bytes: names checked, read like files, indexed and replaced under the sender's name."""

import io
import re
import tarfile

import pytest

from models.errors import ConfigError, DataError
from pipeline.retrieval.index import LocalHybridIndex
from pipeline.retrieval.ingest import ChunkFields
from pipeline.retrieval.uploads import (
    MAX_NAME_CHARS,
    NAME_PATTERN,
    check_document_name,
    ingest_upload,
    is_archive_name,
)
from tests.pipeline.conftest import HashEmbedder


@pytest.mark.parametrize("name", ["refunds.md", "policies/2024/refunds.md", "Handbook v2.PDF", "site.tar.gz",
                                  "notes/ünïcode naïve.txt"])
def test_names_of_readable_types_are_accepted(name):
    assert check_document_name(name) == name
    assert re.fullmatch(NAME_PATTERN, name)  # what the API's schema states


@pytest.mark.parametrize(("name", "reason"), [
    ("", "1-512 characters"), (" refunds.md", "leading or trailing"), ("x" * 510 + ".md", "1-512 characters"),
    ("/etc/refunds.md", "relative path"), ("a/../refunds.md", "'..'"), ("a//refunds.md", "empty"),
    ("./refunds.md", "'.'"), ("refunds\x00.md", "control"), ("refunds", "(none)"), ("setup.exe", ".exe"),
    ("archive.tar.zst", ".zst"), ("a/.md", "(none)"),
    (".tar.gz", ".gz"), ("refunds.md ", "trailing"), ("caf\x85.md", "control"),
    ("policies\\refunds.md", "separate folders with '/'"), ("C:\\docs\\refunds.md", "backslash")])
def test_other_names_are_refused_with_the_reason(name, reason):
    with pytest.raises(DataError, match="document name") as caught:
        check_document_name(name)
    assert reason in str(caught.value)
    assert len(name) > MAX_NAME_CHARS or not re.fullmatch(NAME_PATTERN, name)  # the schema states the same rule


def test_archive_names_by_their_last_part():
    assert is_archive_name("exports/site.tar.gz") and is_archive_name("a.ZIP")
    assert not is_archive_name("site.tar.gz/page.md") and not is_archive_name("zip")


def _tar(members):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_a_tar_upload_replaces_its_members_and_keeps_other_documents(tmp_path):
    index = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    fields = ChunkFields(tenant="acme", roles=frozenset({"ops"}))
    ingest_upload(index, "guide.md", b"# Guide\n\nRead the manual first.", fields)
    first = ingest_upload(index, "docs/site.tar.gz", _tar({"a.md": "Alpha page.", "b/c.rst": "Gamma page."}), fields)
    second = ingest_upload(index, "docs/site.tar.gz", _tar({"a.md": "Alpha page, edited."}), fields)
    assert (first.files, first.chunks_added) == (2, 2)
    assert (second.files, second.chunks_added, second.chunks_removed) == (1, 1, 2)  # edited: a new chunk id
    chunks = {c.metadata["path"]: c for c in index.iter_chunks()}
    assert sorted(chunks) == ["docs/site.tar.gz/a.md", "guide.md"]
    assert chunks["docs/site.tar.gz/a.md"].text == "Alpha page, edited."
    assert all(c.allowed_roles == {"ops"} and c.tenant == "acme" for c in chunks.values())


def test_an_unreadable_upload_writes_nothing_and_names_itself(tmp_path):
    index = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    fields = ChunkFields(tenant="acme")
    ingest_upload(index, "kept.md", b"Kept text.", fields)
    with pytest.raises(DataError, match=r"^site\.tar\.gz: not a readable tar archive"):
        ingest_upload(index, "site.tar.gz", b"\x1f\x8b not gzip", fields)
    with pytest.raises(DataError, match="more than 1 chunks"):
        ingest_upload(index, "long.md", b"\n\n".join([b"word " * 200] * 3), fields, max_chunks=1)
    with pytest.raises(DataError, match="the upload is empty"):
        ingest_upload(index, "kept.md", b"", fields)
    assert [c.text for c in index.iter_chunks()] == ["Kept text."]


@pytest.mark.parametrize(("fields", "named"), [
    ({"effective_date": "2024-13-45"}, "must be a calendar date YYYY-MM-DD (or empty), got '2024-13-45'"),
    ({"effective_date": "2023-02-29"}, "got '2023-02-29'"),  # not a leap year: conflicts are settled by this date
    ({"effective_date": "24-1-1"}, "got '24-1-1'"),
    ({"status": "draft"}, "status must be one of ['active', 'superseded'], got 'draft'"),
    ({"authority": 5000}, "authority must be an int in [-1000, 1000], got 5000"),
    ({"authority": True}, "got True"),
    ({"roles": "ops"}, "roles must be a collection of role names, not one string"),  # was the roles o, p, s
])
def test_chunk_fields_refuse_what_would_mis_rank_conflicts(fields, named):
    with pytest.raises(ConfigError) as caught:
        ChunkFields(tenant="acme", **fields)
    assert named in str(caught.value)
    assert ChunkFields(tenant="acme", effective_date="2024-02-29", authority=-3).effective_date == "2024-02-29"
