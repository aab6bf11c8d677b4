"""Markdown is read as a reader sees it: no front matter, links as their words, code untouched."""

import time

import pytest

from pipeline.retrieval.documents import chunk_text, read_document
from pipeline.retrieval.ingest import collect_files
from pipeline.retrieval.markdown_text import markdown_to_text, mdx_to_text
from pipeline.retrieval.strips import sentence_strips

DOC = """---
title: "Reset your password"
sidebar_position: 3
---
<!-- TODO: add screenshots -->
# Password help

To reset it, open the [account page](https://example.com/account?tab=security "Account") and click **Reset password**.
See [the FAQ][faq] or <https://example.com/help>. ![Reset button](img/reset.png)

* Use `my_secret_var` and *at least* 12 characters; snake_case_names and 2 * 3 * 4 stay.
* __Never__ share it.

```python
x = "**not bold**"  # [not a link](url)
```

[faq]: https://example.com/faq
"""


def test_front_matter_names_the_document_and_is_not_text(tmp_path):
    page = tmp_path / "reset.md"
    page.write_text(DOC, encoding="utf-8")
    title, text = read_document(page)
    assert title == "Reset your password"
    assert "sidebar_position" not in text and "---" not in text and "TODO" not in text
    assert chunk_text(text)[0].startswith("# Password help")


def test_links_images_and_emphasis_keep_their_words_and_lose_their_markup():
    _, text = markdown_to_text(DOC)
    assert "To reset it, open the account page and click Reset password." in text
    assert "See the FAQ or https://example.com/help. Reset button" in text
    assert "* Use `my_secret_var` and at least 12 characters; snake_case_names and 2 * 3 * 4 stay." in text
    assert "* Never share it." in text
    assert "example.com/account" not in text and "[faq]:" not in text and "img/reset.png" not in text
    assert 'x = "**not bold**"  # [not a link](url)' in text  # code is content, verbatim
    strips = sentence_strips(chunk_text(text)[0])
    assert strips[0] == "To reset it, open the account page and click Reset password."


def test_without_front_matter_the_first_heading_is_the_title(tmp_path):
    text = "Intro line.\n\n# Main title\n\nText."
    assert markdown_to_text(text) == ("Main title", text)
    # a rule, then text: no front matter eats the text (the rule itself is not text)
    assert markdown_to_text("---\nnot front matter, never closed") == ("", "not front matter, never closed")
    page = tmp_path / "untitled.md"
    page.write_text("Just text.", encoding="utf-8")
    assert read_document(page) == ("untitled", "Just text.")


def test_commonmark_is_read_as_a_reader_sees_it():
    """What the old regular expressions got wrong: setext headings, escapes, entities, inline HTML, HTML blocks,
    tables, nesting and quotes."""
    page = """Install guide
=============

Use \\*args\\* and AT&amp;T's <kbd>Ctrl</kbd>+<kbd>C</kbd>; ~~old~~ text &lt;tag&gt;.

1. First step
2. Second step
   - nested *item*

> Quoted **advice**
> on two lines.

| Plan | Price |
|------|-------|
| Pro \\| Team | $10 |

<details><summary>Why?</summary>
Because <b>it works</b>.
</details>

    indented_code(x) * 2
"""
    title, text = markdown_to_text(page)
    assert title == "Install guide"
    assert text.split("\n\n") == [
        "# Install guide",
        "Use *args* and AT&T's Ctrl+C; old text <tag>.",
        "1. First step\n2. Second step\n   - nested item",
        "> Quoted advice\n> on two lines.",
        "| Plan | Price |\nPlan: Pro | Team | Price: $10",  # a row under its header led by the column names
        "Why?",  # an HTML block is read as HTML is
        "Because it works.",
        "```\nindented_code(x) * 2\n```",  # indented code is fenced like the rest
    ]


def test_a_folder_walk_leaves_out_hidden_and_tool_folders(tmp_path):
    docs = tmp_path / "docs"
    for name in ("guide.md", "sub/faq.md", ".github/CONTRIBUTING.md", ".venv/lib/README.md",
                 "node_modules/pkg/README.md", "site/.draft.md"):
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text("Some text.", encoding="utf-8")
    assert collect_files([docs]) == [docs / "guide.md", docs / "sub" / "faq.md"]
    assert collect_files([docs / ".github" / "CONTRIBUTING.md"]) == [docs / ".github" / "CONTRIBUTING.md"]  # named


def test_a_byte_order_mark_and_windows_line_ends_are_not_text(tmp_path):
    page = tmp_path / "saved-on-windows.md"
    page.write_bytes("\ufeff---\r\ntitle: Notes\r\n---\r\nFirst line\r\nsecond line.\r\n".encode("utf-8"))
    assert read_document(page) == ("Notes", "First line\nsecond line.")
    plain = tmp_path / "plain.txt"
    plain.write_bytes("\ufeffHello there.\r\n".encode("utf-8"))
    assert read_document(plain) == ("plain", "Hello there.\n")


def test_a_section_stays_with_its_heading_when_it_fits():
    intro = "Intro " + "words " * 40
    reset = "Reset text. " * 10
    bill = "Bill text. " * 50
    chunks = chunk_text(f"# Guide\n\n{intro}\n\n## Reset\n\n{reset}\n\n## Billing\n\n{bill}\n\n## Tail\n\nShort.",
                        max_chars=400)
    assert [c.split("\n\n")[0][:20] for c in chunks] == ["# Guide", "## Reset", "## Billing", "## Billing", "## Tail"]
    assert chunks[3].split("\n\n")[1].startswith("Bill text.")  # the section went on: its heading is repeated
    assert not any(c.rstrip().split("\n\n")[-1].startswith("#") for c in chunks)  # no chunk ends with a heading
    assert all(len(c) <= 400 for c in chunks)
    read_once = " ".join([*chunks[:3], chunks[3].removeprefix("## Billing\n\n"), chunks[4]])
    assert read_once.split() == f"# Guide {intro} ## Reset {reset} ## Billing {bill} ## Tail Short.".split()


def test_a_heading_is_not_left_alone_when_its_text_fits_a_chunk_only_without_it():
    code = "```\n" + "\n".join(f"step_{i:02d}()  # does part {i:02d} of the whole job" for i in range(19))
    code += "\n# " + "-" * (892 - len(code) - 3) + "\n```"
    prose = ("Sentence about the job here. " * 31)[:893] + "."
    for body in (code, prose):
        assert 890 < len(body) <= 900  # fits a chunk alone, not beside its heading
        chunks = chunk_text(f"Intro text that comes first. {'x ' * 200}\n\n## The job\n\n{body}", max_chars=900)
        assert not any(c.strip() == "## The job" for c in chunks)  # it was a chunk of its own
        assert all(len(c) <= 900 for c in chunks) and chunks[1].startswith("## The job\n\n")


def test_headings_that_end_a_document_join_the_chunk_before_them():
    body = ("Some text of the last section. " * 20).strip()
    chunks = chunk_text(f"# Data\n\n{body}\n\n# EOF", max_chars=900)
    assert chunks == [f"# Data\n\n{body}\n\n# EOF"]  # "# EOF" was a chunk of its own, with nothing to retrieve
    assert chunk_text("# Only a title") == ["# Only a title"]  # a document of headings alone keeps them
    full = ("word " * 170).strip()
    assert chunk_text(f"{full}\n\n## Tail", max_chars=900) == [f"{full}\n\n## Tail"]
    assert chunk_text(f"{full}\n\n## Tail", max_chars=855) == [full, "## Tail"]  # no room: kept apart


def test_a_chunk_inside_a_section_opens_with_the_headings_it_is_under():
    cards = "Card text. " * 60
    text = f"# Guide\n\nIntro.\n\n## Billing\n\nBill text.\n\n### Cards\n\n{cards}\n\n## Tail\n\n" + "Tail. " * 70
    chunks = chunk_text(text, max_chars=400)
    heads = [[p for p in c.split("\n\n") if p.startswith("#")] for c in chunks]
    assert heads == [["# Guide", "## Billing"], ["## Billing", "### Cards"], ["## Billing", "### Cards"], ["## Tail"],
                     ["## Tail"]]  # a subsection's first chunk opens with its parent section too
    assert all(len(c) <= 400 for c in chunks)
    # a deep path is cut to a quarter of a chunk, innermost kept; a level-1 heading closes every section
    deep = "\n\n".join(f"{'#' * level} Level {level} heading" for level in range(2, 7))
    chunks = chunk_text(f"{deep}\n\n{cards}\n\n# Part two\n\n{cards}", max_chars=400)
    assert chunks[1].startswith("### Level 3 heading\n\n#### Level 4 heading\n\n##### Level 5 heading\n\n"
                                "###### Level 6 heading\n\nCard text.")  # 88 characters; all five would be 108
    assert all(len(c) <= 400 for c in chunks)
    part_two = [c for c in chunks if "# Part two" in c]
    assert part_two and chunks[-1].startswith("Card text.") and chunks.index(part_two[0]) < len(chunks) - 1


def test_a_long_list_is_cut_between_items_and_each_item_stays_a_strip_of_its_own():
    items = [f"* `option_{i}` {{boolean}} when set, the copy of item {i}\n  also keeps its timestamps. Default: 0."
             for i in range(12)]
    chunks = chunk_text("## Options\n\n" + "\n".join(items), max_chars=400)
    assert len(chunks) > 2 and all(len(c) <= 400 for c in chunks)
    assert all(c.startswith("## Options\n\n* `option_") for c in chunks)  # cut where an item starts
    strips = [s for c in chunks for s in sentence_strips(c)]
    assert strips[0] == "`option_0` {boolean} when set, the copy of item 0 also keeps its timestamps."
    assert sum(s.startswith("`option_") for s in strips) == 12  # one item never runs into the next
    # wrapped prose is cut where a line ended a sentence, its line breaks kept
    prose = "\n".join(f"Sentence {i} wraps onto\nthe next line here." for i in range(30))
    pieces = chunk_text(prose, max_chars=200)
    assert all(p.startswith("Sentence ") and p.endswith("line here.") for p in pieces)
    clauses = "\n".join(f"Clause {i} wraps onto\nthe next line;" for i in range(30))  # a semicolon ends one too
    assert all(p.startswith("Clause ") and p.endswith("line;") for p in chunk_text(clauses, max_chars=200))


def test_a_strip_is_named_by_its_section_and_a_generic_heading_by_the_one_above_it():
    from pipeline.retrieval.strips import strips_with_sections

    chunk = ("# Vec\n\nA growable array type.\n\n## Methods\n\n#### pub fn push(&mut self, value: T)\n\nAppends an "
             "element to the back.\n\n##### §Panics\n\nPanics if the new capacity overflows.\n\n#### pub fn pop(&mut "
             "self)\n\nRemoves the last element.\n\n### `pop()`\n\nSee the method above.\n\n# Part two\n\nNo section "
             "holds this one.")
    assert strips_with_sections(chunk) == [
        ("A growable array type.", None),  # a level-1 heading titles the document, it is no section
        ("Appends an element to the back.", "pub fn push(&mut self, value: T)"),
        ("Panics if the new capacity overflows.", "pub fn push(&mut self, value: T) › §Panics"),
        ("Removes the last element.", "pub fn pop(&mut self)"),  # a heading of its level ends the one before
        ("See the method above.", "`pop()`"),  # one word, but code: it names its subject
        ("No section holds this one.", None)]


def test_code_that_shows_a_fence_keeps_its_block_whole():
    from pipeline.retrieval.html_text import html_to_text
    from pipeline.retrieval.strips import blocks

    shown = "Write:\n```python\nx = 1\n```\nin your README."
    html = f"<p>Example follows.</p><pre><code class='language-md'>{shown}</code></pre><p>Then commit it.</p>"
    markdown = f"Example follows.\n\n````md\n{shown}\n````\n\nThen commit it.\n\n    indented\n    ```\n"
    for text in (html_to_text(html)[1], markdown_to_text(markdown)[1]):
        parts = blocks(text)
        assert parts[:3] == [(False, "Example follows."), (True, f"````md\n{shown}\n````"), (False, "Then commit it.")]
    assert parts[3] == (True, "````\nindented\n```\n````")
    # CommonMark's closing rule: the same mark, at least as long, nothing after it
    assert blocks("```\ncode\n```python\n~~~\nmore\n```\nafter") == [
        (True, "```\ncode\n```python\n~~~\nmore\n```"), (False, "after")]
    odd = "```" + "x" * 400 + "\n" + "\n".join(f"line {i}" for i in range(80)) + "\n```"  # a 400-character info line
    assert all(len(c) <= 300 and c.startswith("```\nline") for c in chunk_text(odd, max_chars=300))
    long_code = "\n".join(["````md", *(f"line {i}" for i in range(80)), "```", "````"])
    pieces = chunk_text(long_code, max_chars=200)
    assert len(pieces) > 2 and all(p.startswith("````md\n") and p.endswith("\n````") for p in pieces)


@pytest.mark.parametrize("opener", ["[", "![", "<!-- ", "<http:", "__a ", "**a "])
def test_openers_without_closers_are_read_in_linear_time(opener):
    import time

    line = opener * (100_000 // len(opener))  # 100 KB of openers on one line: minutes when every one scanned on
    start = time.perf_counter()
    _, text = markdown_to_text(line)
    assert time.perf_counter() - start < 10 and len(text) >= len(line) // 2


def test_a_code_block_is_chunked_whole_or_cut_between_lines_into_fenced_pieces():
    short = "Intro.\n\n```js\nconst a = 1;\n\nconst b = 2;\n```\n\nAfter."  # a blank line inside the code
    assert chunk_text(short, max_chars=400) == [short]
    code = "\n".join(f"value_{i} = compute({i})  # step {i}" for i in range(60))
    chunks = chunk_text(f"Intro to the script.\n\n```python\n{code}\n```\n\nProse after it.", max_chars=400)
    pieces = [c for c in chunks if c.startswith("```python\n")]
    assert len(pieces) >= 5 and all(len(c) <= 400 for c in chunks)
    assert all(p.endswith("\n```") or p.endswith("\n```\n\nProse after it.") for p in pieces)  # each fenced again
    lines = [line for p in pieces for line in p.split("\n") if line.startswith("value_")]
    assert lines == code.split("\n")  # every line once, none cut at a full stop or joined to another


def test_a_long_text_without_full_stops_is_chunked_in_linear_time():
    import time

    text = "word " * 1_600_000  # 8 MB in one paragraph: cut at word boundaries; slicing off the rest took ~6 s
    start = time.perf_counter()
    chunks = chunk_text(text)
    assert time.perf_counter() - start < 3
    assert len(chunks) > 8_000 and all(len(c) <= 900 for c in chunks) and chunks[0].startswith("word word")


def test_random_markup_never_yields_a_chunk_over_the_limit():
    """Seeded random runs of Markdown and HTML pieces, read both ways and chunked: every chunk within max_chars
    (a 400-character fence info line made 3% of them longer)."""
    import random

    from pipeline.retrieval.html_text import html_to_text

    rng = random.Random(7)
    atoms = ["# ", "## ", "### ", "- ", "* ", "1. ", "> ", "```", "~~~", "````", "    ", "|", " | ", "---", "===",
             "[a](b)", "**b**", "_i_", "`c`", "<div>", "</div>", "<pre>", "</pre>", "<!-- ", " -->", "&amp;", "\\*",
             "word", "Sentence end.", "Question?", "\n", "\n\n", "\t", "<br>", "<table><tr><td>a</td></tr></table>"]
    for _ in range(2000):
        text = "".join(rng.choice(atoms) for _ in range(rng.randint(1, 200)))
        limit = rng.choice([100, 300, 900])
        for _, body in (markdown_to_text(text), html_to_text(text)):
            assert all(len(c) <= limit for c in chunk_text(body, max_chars=limit)), text



def test_myst_directives_and_roles_read_as_they_do_in_restructuredtext():
    doc = ("# Guide\n\n```{note}\nRemember to **save** often.\n```\n\n```{code-block} python\n:linenos:\n:caption: "
           "Example\nx = 1\n```\n\n```{versionchanged} 3.6\nAccepts paths.\n```\n\n```{toctree}\n:maxdepth: 2\n"
           "install\n```\n\n```{admonition} Custom title\n---\nclass: tip\n---\nBody *text*.\n```\n\n"
           "* see {ref}`the setup <install>`\n\nUse {func}`~os.path.join` or {py:class}`pathlib.Path`; `{x}` and "
           "{not a role} `y` stay.\n\n(a-label)=\n\n```{math}\n```\n")
    assert markdown_to_text(doc)[1] == (
        "# Guide\n\nNote: Remember to save often.\n\n```python\nx = 1\n```\n\n"
        "Changed in version 3.6: Accepts paths.\n\nCustom title\n\nBody text.\n\n* see `the setup`\n\n"
        "Use `join` or `pathlib.Path`; `{x}` and {not a role} `y` stay.")
    console = "```{pip-cli}\n$ pip install -e path/to/project\n```\n\n```{note}\n$5 is the price.\n```"
    assert markdown_to_text(console)[1] == "```\n$ pip install -e path/to/project\n```\n\nNote: $5 is the price."
    plain = "```python\n{'a': 1}\n```\n\n```{.python}\nx\n```"  # a plain fence, and Pandoc's attribute syntax
    assert markdown_to_text(plain)[1] == plain


def test_colon_fences_of_myst_docusaurus_and_vitepress_read_as_directives():
    doc = ("# Guide\n\n:::{warning}\nDo not run the installer as **root**.\n:::\n\n"
           "::::{note}\nOuter text.\n:::{tip}\nInner tip.\n:::\n::::\n\n"
           ":::tip[Pro tip]\nUse a virtual environment.\n:::\n\n::: warning Careful\nVitePress style.\n:::\n\n"
           ":::{code-block} bash\npip install crag\n:::\n\n"
           "```markdown\n:::note\nshown as written inside code\n:::\n```\n\n:::info\nNever closed.\n")
    assert markdown_to_text(doc)[1] == (
        "# Guide\n\nWarning: Do not run the installer as root.\n\nNote: Outer text.\nTip: Inner tip.\n\n"
        "Tip: Pro tip\n\nUse a virtual environment.\n\nWarning: Careful\n\nVitePress style.\n\n"
        "```bash\npip install crag\n```\n\n```markdown\n:::note\nshown as written inside code\n:::\n```\n\n"
        "Info: Never closed.")
    # the same container nested with as many colons as its parent, and backticks in a fence's content
    same = (":::note\nOuter.\n:::tip\nInner.\n:::\nAfter inner.\n:::\n\nTail.\n\n"
            ":::details Example\n```py\nx = 1\n```\n:::")
    assert markdown_to_text(same)[1] == ("Note: Outer.\nTip: Inner.\nAfter inner.\n\nTail.\n\n"
                                         "Example\n\n```py\nx = 1\n```")
    assert markdown_to_text("a line\n:::\nb :::\n")[1] == "a line\n:::\nb :::"  # colons without a name are text


def test_an_mdx_page_reads_without_its_module_code_and_comments(tmp_path):
    page = ("---\ntitle: Installation\n---\n\nimport Tabs from '@theme/Tabs';\n"
            "export const Highlight = ({children}) => (\n  <span style={{color: 'green'}}>{children}</span>\n);\n\n"
            "Install the package first. Then import your settings.\n\n<Tabs>\n  <TabItem value=\"npm\">\n\n"
            "```js\nimport lib from 'my-lib';\nexport default lib;\n```\n\n  </TabItem>\n</Tabs>\n\n"
            ":::caution\nNode 18 or newer is required.\n:::\n\n<Highlight>Fast</Highlight> builds are the default. "
            "{/* a comment\nover two lines */}\n")
    path = tmp_path / "install.mdx"
    path.write_text(page, encoding="utf-8")
    assert read_document(path) == ("Installation", (
        "Install the package first. Then import your settings.\n\n"
        "```js\nimport lib from 'my-lib';\nexport default lib;\n```\n\n"  # code in a fence is content, kept whole
        "Caution: Node 18 or newer is required.\n\nFast builds are the default."))


def test_an_mdx_module_block_with_blank_lines_inside_its_brackets_is_left_out_whole():
    page = ('import X from "x";\nexport const meta = {\n  title: "Setup",\n\n  tags: ["a",\n\n    "b"],\n};\n\n'
            "Text after the block. // a comment in prose stays\n\n"
            'export const s = "{ a bracket in a string";\n\nMore text.\n\n'
            "export const never = (\n\nText after a block whose bracket never closes.\n")
    assert mdx_to_text(page)[1] == ("Text after the block. // a comment in prose stays\n\nMore text.\n\n"
                                    "Text after a block whose bracket never closes.")


def test_unclosed_mdx_module_blocks_cost_bounded_time():
    start = time.perf_counter()
    text = mdx_to_text("export const x = (\n\n" * 20_000 + "The end.")[1]
    assert text == "The end." and time.perf_counter() - start < 5


def test_deeply_nested_fences_are_read_without_exhausting_the_stack():
    nested = "".join(":::note\n" for _ in range(5000)) + "Inner text.\n"  # each fence opens inside the last
    assert markdown_to_text(nested)[1].endswith("Inner text.")
    backticks = "".join("`" * (3 + k) + "{note}\n" for k in range(200)[::-1]) + "Deep.\n"
    assert markdown_to_text(backticks)[1].endswith("Deep.")


def test_a_long_table_with_column_names_is_cut_between_its_rows():
    rows = "".join(f"| Zone {i} | {i}-{i + 2} business days | {i}.90 EUR |\n" for i in range(40))
    text = markdown_to_text("| Zone | Delivery time | Cost |\n|---|---|---|\n" + rows)[1]
    chunks = chunk_text(text, max_chars=300)
    assert len(chunks) > 5 and chunks[0].startswith("| Zone | Delivery time | Cost |\nZone: Zone 0 | Delivery time:")
    lines = [line for chunk in chunks for line in chunk.split("\n")]
    assert lines[1:] == [f"Zone: Zone {i} | Delivery time: {i}-{i + 2} business days | Cost: {i}.90 EUR"
                         for i in range(40)]  # every row whole, in order, none cut inside
    assert sentence_strips(chunks[1])[0] == "Zone: Zone 4 | Delivery time: 4-6 business days | Cost: 4.90 EUR"


def test_quarto_and_r_markdown_files_read_as_markdown(tmp_path):
    for suffix in (".qmd", ".rmd"):
        path = tmp_path / f"report{suffix}"
        path.write_text("---\ntitle: Churn report\n---\n\n# Method\n\nWe fit a *logistic* model.\n", encoding="utf-8")
        assert read_document(path) == ("Churn report", "# Method\n\nWe fit a logistic model.")
