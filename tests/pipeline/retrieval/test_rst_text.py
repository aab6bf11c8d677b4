"""reStructuredText (Sphinx sources too) is read as a reader sees it: headings, words of roles, code fenced."""

import threading

import pytest

from models.errors import DataError
from pipeline.retrieval.documents import chunk_text, read_document
from pipeline.retrieval.ingest import collect_files
from pipeline.retrieval.rst_text import rst_to_text
from pipeline.retrieval.strips import strips_with_sections

DOC = """\
===================
 The path functions
===================

.. module:: os.path
   :synopsis: Common pathname manipulations.

This module implements useful functions on pathnames. See :func:`~os.path.join`,
:ref:`the setup page <setup>` and ``os.sep`` [#note]_.

Joining paths
=============

.. function:: join(path, *paths)
   :no-index:

   Join one or more path segments intelligently.

   .. versionchanged:: 3.6
      Accepts a :term:`path-like object`.

.. code-block:: python
   :emphasize-lines: 1

   import os
   os.path.join("a", "b")

.. note:: On Windows, the drive is reset when an absolute path component is found.

Arguments
---------

* first item
  continues here
* second item

  1. nested one
  2. nested two

:param path: the first part
:returns: the joined path

+-------+--------+
| key   | value  |
+=======+========+
| a     | 1      |
+-------+--------+

.. toctree::
   :maxdepth: 2

   install

.. [#note] A footnote text.
"""


def test_sections_become_headings_and_markup_becomes_words(tmp_path):
    page = tmp_path / "path.rst"
    page.write_text(DOC, encoding="utf-8")
    title, text = read_document(page)
    assert title == "The path functions"
    assert text.startswith("# The path functions\n\nos.path\n\nThis module implements useful functions on pathnames. "
                           "See `join`,\n`the setup page` and `os.sep`.\n\n## Joining paths")  # no footnote mark
    assert "### Arguments" in text  # nested by the section it is in, whatever its underline
    assert "join(path, *paths)\n\nJoin one or more path segments intelligently." in text
    assert "Changed in version 3.6: Accepts a `path-like object`." in text  # an unknown role reads as its title
    assert '```python\nimport os\nos.path.join("a", "b")\n```' in text  # Sphinx's option did not reject it
    assert "Note: On Windows, the drive is reset" in text
    assert "* first item\n  continues here\n* second item\n  1. nested one\n  2. nested two" in text
    assert "param path: the first part\nreturns: the joined path" in text
    assert "key | value\nkey: a | value: 1" in text  # a row below the header led by the column names
    assert "A footnote text." in text
    for markup in (":func:", ":ref:", ".. ", "::", "===", "---", "toctree", "maxdepth", "install", "no-index",
                   "emphasize", "synopsis"):
        assert markup not in text, markup


def test_chunks_and_strips_of_an_rst_page_know_their_section(tmp_path):
    page = tmp_path / "path.rst"
    page.write_text(DOC, encoding="utf-8")
    chunks = chunk_text(read_document(page)[1], max_chars=300)
    arguments = next(c for c in chunks if "second item" in c)
    assert "### Arguments" in arguments
    assert ("first item continues here", "Joining paths › Arguments") in strips_with_sections(arguments)


def test_nothing_is_read_from_other_files_and_no_raw_markup_passes(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE", encoding="utf-8")
    raw = (f"Intro.\n\n.. include:: {secret}\n\n.. literalinclude:: {secret}\n\n"
           f".. raw:: html\n\n   <script>x()</script>\n\n.. csv-table:: Data\n   :file: {secret}\n\nOutro.\n")
    _, text = rst_to_text(raw)
    assert "TOP-SECRET-VALUE" not in text and "script" not in text
    assert text.startswith("Intro.") and text.endswith("Outro.")


def test_text_the_parser_rejects_is_kept_and_unknown_directives_keep_their_words():
    _, text = rst_to_text("A broken table follows:\n\n+-----+----\n| x | y\n+-----+\n\n"
                          ".. my-widget:: Widget title\n   :colour: blue\n\n   Widget body text.\n")
    assert "| x | y" in text  # a malformed table is an error in docutils: its text is kept as it was
    assert "Widget title\n\nWidget body text." in text and "colour" not in text
    _, text = rst_to_text(".. pip-cli::\n\n   $ pip install -e path/to/project\n")
    assert text == "```\n$ pip install -e path/to/project\n```"  # a console session is code whatever its directive


def test_docutils_is_left_as_it_was_for_other_users():
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Parser, directives, languages
    from docutils.utils import new_document

    class Theirs(directives.body.CodeBlock):
        pass

    directives.register_directive("sourcecode", Theirs)  # as Sphinx registers its own
    try:
        before = dict(directives._directives)
        rst_to_text(".. code-block:: python\n\n   x = 1\n\n.. sourcecode:: c\n\n   y\n\n.. made-up-directive:: y\n")
        assert directives._directives == before  # the generic directive was registered for that parse only
    finally:
        directives._directives.pop("sourcecode", None)
    document = new_document("other", get_default_settings(Parser))
    assert directives.directive("made-up-directive", languages.get_language("en"), document)[0] is None


def test_documents_parsed_at_once_read_as_they_do_one_at_a_time():
    alone = rst_to_text(DOC)
    results: list[tuple[str, str]] = []
    threads = [threading.Thread(target=lambda: results.append(rst_to_text(DOC))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [alone] * 4


def test_a_file_nested_too_deeply_is_an_error_naming_it(tmp_path):
    page = tmp_path / "deep.rst"
    page.write_text("".join(" " * i + f"level {i}\n\n" for i in range(400)), encoding="utf-8")
    with pytest.raises(DataError, match=r"deep\.rst: reStructuredText nested too deeply"):
        read_document(page)


def test_a_folder_of_rst_sources_is_collected(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.rst").write_text(DOC, encoding="utf-8")
    (tmp_path / "docs" / "conf.py").write_text("project = 'x'\n", encoding="utf-8")
    assert [p.name for p in collect_files([tmp_path / "docs"])] == ["index.rst"]


def test_a_definition_is_one_line_whatever_it_holds_and_is_read_once():
    _, text = rst_to_text("term one\n   Its definition with a list:\n\n   * alpha\n   * beta\n\n   nested term\n"
                          "      nested definition\n\n| line one\n| line two\n")
    assert text == ("term one: Its definition with a list: * alpha * beta nested term: nested definition\n\n"
                    "line one\nline two")
