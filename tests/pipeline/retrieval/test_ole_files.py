"""OLE compound files (.doc, .ppt, .msg) are opened alike: a file that is not one, or one that holds another
program's streams, is an error naming the file and what it should have been."""

import re

import pytest

from models.errors import DataError
from pipeline.retrieval.documents import read_document
from tests.pipeline.conftest import ole_bytes


@pytest.mark.parametrize(("name", "not_ole", "other", "without"), [
    ("scan.doc", r"not a Word 97-2003 document .* named \.docx", "__substg1.0_0037001F", "a Word document in it"),
    ("review.ppt", r"not a PowerPoint 97-2003 presentation .* named \.pptx", "__substg1.0_0037001F",
     "a PowerPoint presentation in it"),
    ("notes.msg", r"not an Outlook message .* an \.eml file", "WordDocument", "an Outlook message in it"),
])
def test_files_that_are_not_ole_or_hold_another_programs_streams_are_errors_naming_them(tmp_path, name, not_ole,
                                                                                         other, without):
    path = tmp_path / name
    path.write_bytes(b"\x00\x01 neither an OLE file, nor a package, nor text")
    with pytest.raises(DataError, match=rf"{re.escape(name)}: {not_ole}"):
        read_document(path)
    path.write_bytes(ole_bytes({other: b"\x00" * 600}))  # an OLE compound file, but another program's
    with pytest.raises(DataError, match=rf"{re.escape(name)}: an OLE compound file without {without}"):
        read_document(path)


def test_another_office_programs_damaged_file_under_a_binary_office_name_is_its_readers_error(tmp_path):
    path = tmp_path / "scan.doc"
    path.write_bytes(ole_bytes({"Workbook": b"\x00" * 600}))  # an Excel stream, but no workbook in it
    with pytest.raises(DataError, match=r"scan\.doc: .*\(read as a \.xls file"):
        read_document(path)
