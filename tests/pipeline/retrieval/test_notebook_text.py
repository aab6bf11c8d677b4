"""A Jupyter notebook is read as its cells: prose as Markdown, code fenced, text output kept, images left out."""

import json

import pytest

from models.errors import DataError
from pipeline.retrieval.documents import chunk_text, read_document
from pipeline.retrieval.notebook_text import OUTPUT_LINES, notebook_to_text

IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"


def notebook(cells, **metadata):
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "cells": cells,
                       "metadata": {"language_info": {"name": "python"}, **metadata}})


CELLS = [
    {"cell_type": "markdown", "id": "a1", "metadata": {},
     "source": ["# Loading the data\n", "\n", "Read the [CSV file](data.csv) with **pandas**:"]},
    {"cell_type": "code", "id": "b2", "execution_count": 1, "metadata": {},
     "source": "import pandas as pd\ndf = pd.read_csv('data.csv')\ndf.shape",
     "outputs": [{"output_type": "execute_result", "execution_count": 1, "metadata": {},
                  "data": {"text/plain": ["(1200, 8)"], "text/html": ["<b>(1200, 8)</b>"]}},
                 {"output_type": "display_data", "metadata": {}, "data": {"image/png": IMAGE}}]},
    {"cell_type": "code", "id": "c3", "execution_count": 2, "metadata": {}, "source": ["print('done')"],
     "outputs": [{"output_type": "stream", "name": "stdout", "text": ["done\n"]},
                 {"output_type": "error", "ename": "ValueError", "evalue": "x",
                  "traceback": ["\u001b[0;31mValueError\u001b[0m: x"]}]},
    {"cell_type": "raw", "id": "d4", "metadata": {}, "source": "Raw note for the exporter."},
]


def test_cells_are_read_in_order_as_a_reader_sees_them(tmp_path):
    path = tmp_path / "analysis.ipynb"
    path.write_text(notebook(CELLS), encoding="utf-8")
    title, text = read_document(path)
    assert title == "Loading the data"
    assert text == ("# Loading the data\n\nRead the CSV file with pandas:\n\n"
                    "```python\nimport pandas as pd\ndf = pd.read_csv('data.csv')\ndf.shape\n```\n\n"
                    "```text\n(1200, 8)\n```\n\n```python\nprint('done')\n```\n\n```text\ndone\n```\n\n"
                    "Raw note for the exporter.")
    for left_out in (IMAGE, "<b>", "ValueError", "execution_count", '"id"', "nbformat"):
        assert left_out not in text
    assert chunk_text(text)[0].startswith("# Loading the data")


def test_long_output_is_cut_and_says_how_much_was_left_out():
    cells = [{"cell_type": "code", "source": "for i in range(100): print(i)", "metadata": {},
              "outputs": [{"output_type": "stream", "name": "stdout", "text": "".join(f"{i}\n" for i in range(100))}]}]
    _, text = notebook_to_text(notebook(cells))
    output = text.split("```text\n", 1)[1]
    assert output.split("\n")[:OUTPUT_LINES] == [str(i) for i in range(OUTPUT_LINES)]
    assert text.endswith(f"```\n({100 - OUTPUT_LINES} more lines of output)")


def test_the_title_comes_from_metadata_and_the_language_from_the_kernel():
    cells = [{"cell_type": "code", "source": "x <- 1", "metadata": {}, "outputs": []}]
    raw = json.dumps({"nbformat": 4, "cells": cells,
                      "metadata": {"title": "R basics", "kernelspec": {"language": "R", "name": "ir"}}})
    assert notebook_to_text(raw) == ("R basics", "```R\nx <- 1\n```")


@pytest.mark.parametrize(("raw", "message"), [
    ("{not json", "invalid JSON"),
    (json.dumps({"nbformat": 2, "worksheets": []}), "nbformat 2: convert it with `jupyter nbconvert"),
    (json.dumps([1, 2]), "no list of cells"),
    (json.dumps({"nbformat": 4, "cells": ["text"]}), "cell 1 is str"),
    ("[" * 100_000, "JSON nested too deeply to read"),  # json recurses once a level
])
def test_a_file_that_is_not_a_notebook_is_an_error_naming_the_file(tmp_path, raw, message):
    path = tmp_path / "broken.ipynb"
    path.write_text(raw, encoding="utf-8")
    with pytest.raises(DataError, match=r"broken\.ipynb: not a Jupyter notebook") as caught:
        read_document(path)
    assert message in str(caught.value)


def test_a_notebook_of_format_3_is_read_like_one_of_format_4():
    v3 = {"nbformat": 3, "nbformat_minor": 0, "metadata": {"name": "old"}, "worksheets": [{"cells": [
        {"cell_type": "heading", "level": 1, "metadata": {}, "source": ["Old analysis"]},
        {"cell_type": "markdown", "metadata": {}, "source": ["Some *prose*."]},
        {"cell_type": "code", "language": "python", "collapsed": False, "input": ["print(1)\n", "1 + 1"],
         "outputs": [{"output_type": "stream", "stream": "stdout", "text": ["1\n"]},
                     {"output_type": "pyout", "prompt_number": 2, "text": ["2"]},
                     {"output_type": "display_data", "png": IMAGE},
                     {"output_type": "pyerr", "ename": "E", "evalue": "x", "traceback": ["boom"]}]}]}]}
    assert notebook_to_text(json.dumps(v3)) == (
        "Old analysis", "# Old analysis\n\nSome prose.\n\n```python\nprint(1)\n1 + 1\n```\n\n```text\n1\n```\n\n"
                        "```text\n2\n```")
