"""A web archive (.mht, .mhtml) reads as the page it archives."""

import pytest

from models.errors import DataError
from pipeline.retrieval.documents import read_document

CHROME_SNAPSHOT = """\
From: <Saved by Blink>
Snapshot-Content-Location: https://support.example.com/refunds
Subject: =?utf-8?Q?Refunds_=E2=80=93_Support?=
Date: Tue, 5 Mar 2024 10:00:00 -0000
MIME-Version: 1.0
Content-Type: multipart/related;
\ttype="text/html";
\tboundary="----MultipartBoundary--abc----"

------MultipartBoundary--abc----
Content-Type: text/css
Content-Transfer-Encoding: quoted-printable
Content-Location: cid:css-1@mhtml.blink

body { color: black; }
------MultipartBoundary--abc----
Content-Type: text/html
Content-ID: <frame-1@mhtml.blink>
Content-Transfer-Encoding: quoted-printable
Content-Location: https://support.example.com/refunds

<!DOCTYPE html><html><head><meta charset=3D"utf-8"></head><body><h2>Damaged items</h2><p>Refunds take 30 d=
ays from delivery.</p><script>track()</script></body></html>
------MultipartBoundary--abc------
""".replace("\n", "\r\n")


def test_a_browser_snapshot_reads_as_its_page_named_by_its_subject_without_a_title(tmp_path):
    path = tmp_path / "refunds.mhtml"
    path.write_bytes(CHROME_SNAPSHOT.encode("ascii"))
    assert read_document(path) == ("Refunds \u2013 Support",  # the page has no <title>: the archive's Subject
                                   "## Damaged items\n\nRefunds take 30 days from delivery.")


def test_an_archive_without_a_page_is_an_error_naming_it(tmp_path):
    path = tmp_path / "pictures.mht"
    path.write_bytes(b"MIME-Version: 1.0\r\nContent-Type: multipart/related; boundary=b\r\n\r\n--b\r\n"
                     b"Content-Type: image/png\r\nContent-Transfer-Encoding: base64\r\n\r\niVBORw0KGgo=\r\n--b--\r\n")
    with pytest.raises(DataError, match=r"pictures\.mht: a web archive without an HTML page"):
        read_document(path)
