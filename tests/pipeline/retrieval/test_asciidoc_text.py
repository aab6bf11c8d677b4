"""An AsciiDoc file (.adoc) is read as what its rendered page shows, written the way the other readers write."""

import random
import time

from pipeline.retrieval.asciidoc_text import asciidoc_to_text
from pipeline.retrieval.documents import chunk_text, read_document
from pipeline.retrieval.strips import strips_with_sections

GUIDE = r"""// a comment before the header
= Shop Handbook: Returns
Jane Doe <jane@example.com>
v1.2, 2024-03-04
:toc: left
:product: Acme Cloud
:url-help: https://help.example.com

Welcome to *{product}*. This guide explains returns.footnote:[Gift cards excepted.]

[[returns]]
== Returning an item

Items can be returned within 30 days.
Use the xref:labels.adoc#print[label page] or <<shipping,the shipping section>>.

NOTE: Opened software is _not_ refunded.

[WARNING]
====
Do not send batteries by air.
====

.Steps
. Pack the item.
. Print the label.
.. Use the prepaid one.
. Drop it off.

* Damaged items are replaced.
** Send a photo first.

Refund time:: 5 to 10 business days
Store credit;; immediate

[source,bash]
----
curl -X POST {url-help}/returns
----

[cols="1,2",options="header"]
|===
|Country |Days

|Canada
|5 to 8
|===

[quote, Support lead]
____
We answer within one day.
____

////
hidden comment block
////

include::partials/footer.adoc[]

image::label.png[Where the label goes on the box]

Press kbd:[Ctrl+P], then btn:[Print], or use menu:File[Print > Label].
Read link:https://example.com/policy[the policy]. The API uses `+std::vector+` and snake_case_names.

[[shipping]]
=== Shipping

Orders ship in 2 days.
"""


def test_a_guide_reads_as_its_rendered_page(tmp_path):
    path = tmp_path / "returns.adoc"
    path.write_text(GUIDE, encoding="utf-8")
    title, text = read_document(path)
    assert title == "Shop Handbook: Returns"
    assert text == (
        "Welcome to Acme Cloud. This guide explains returns.\n\n## Returning an item\n\n"
        "Items can be returned within 30 days.\nUse the label page or the shipping section.\n\n"
        "Note: Opened software is not refunded.\n\nWarning: Do not send batteries by air.\n\nSteps\n\n"
        "1. Pack the item.\n\n2. Print the label.\n\n  1. Use the prepaid one.\n\n3. Drop it off.\n\n"
        "- Damaged items are replaced.\n\n  - Send a photo first.\n\n"
        "Refund time: 5 to 10 business days\n\nStore credit: immediate\n\n"
        "```bash\ncurl -X POST {url-help}/returns\n```\n\n"  # a listing block substitutes no attribute
        "Country | Days\n\nCountry: Canada | Days: 5 to 8\n\n> We answer within one day.\n\n"
        "Image: Where the label goes on the box\n\n"
        "Press Ctrl+P, then Print, or use File > Print > Label.\n"
        "Read the policy. The API uses `std::vector` and snake_case_names.\n\n### Shipping\n\nOrders ship in 2 days.")
    assert ("Orders ship in 2 days.", "Returning an item › Shipping") in strips_with_sections(text)
    for markup in ("::", ":toc:", "[source", "----", "|===", "include::", "hidden comment", "Jane Doe", "footnote"):
        assert markup not in text.replace("std::vector", "")


def test_tables_without_column_counts_csv_tables_and_a_file_without_a_title():
    text = ("== Prices\n\n|===\n|Plan |Price\n\n|Basic\n|5\n\n|Pro\n|9\n|===\n\n"
            ",===\nregion,days\nEU,3\n,===\n\n[cols=\"3*\"]\n|===\n|a |b |c |d |e |f\n|===\n\n"
            "|===\n|one cell | escaped \\| bar\n|===")
    assert asciidoc_to_text(text) == ("Prices", "## Prices\n\nPlan | Price\n\nPlan: Basic | Price: 5\n\n"
                                                "Plan: Pro | Price: 9\n\n"  # below an implicit header row
                                                "region | days\n\nEU | 3\n\na | b | c\n\nd | e | f\n\n"
                                                "one cell | escaped | bar")


def test_any_text_reads_without_error_and_chunks_within_bounds():
    rng = random.Random(3)
    atoms = ["= T\n", "== S\n", "----\n", "====\n", "|===\n", "|a ", "[source,py]\n", ":x: y\n", "{x}", "* i\n",
             ". o\n", "term:: d\n", "NOTE: n\n", "link:u[t]", "<<a,b>>", "footnote:[f]", "`c`", "*b*", "\n\n", "w ",
             "////\n", "image::i.png[alt]\n", "+\n", " lit\n", ",===\n", "[[a]]\n", ".Title\n", "kbd:[k]"]
    for _ in range(1500):
        source = "".join(rng.choice(atoms) for _ in range(rng.randint(1, 120)))
        title, text = asciidoc_to_text(source)
        assert isinstance(title, str)
        assert all(len(chunk) <= 300 for chunk in chunk_text(text, max_chars=300)), source


def test_unclosed_markup_costs_time_linear_in_its_length():
    # each of these took time quadratic in its length (a 20,000-character line of "<<" took 11 s); now ~0.1 s
    start = time.perf_counter()
    for atom in ("*a ", "_a ", "#a ", "**a ", "link:x[", "https://x[", "<<", "footnote:[[", "pass:[", "menu:x[",
                 "((", "(((a", "[.x]#", "`a", "``a`"):
        asciidoc_to_text(atom * 40_000)
    assert time.perf_counter() - start < 30


def test_blocks_nested_past_sixteen_deep_read_as_their_lines():
    nested = "".join("=" * (4 + k) + "\n" for k in range(3000)[::-1]) + "Inner words.\n"  # each block opens inside
    assert asciidoc_to_text(nested)[1].endswith("Inner words.")


def test_rows_below_a_header_row_read_with_their_column_names_unless_the_table_says_noheader():
    text = ("[%header,cols=\"1,1\"]\n|===\n|Plan\n|Price\n|Team\n|12\n|===\n\n"
            "[cols=\"1,1\"]\n|===\n|Owner |Ann\n|Review |Yearly\n|===\n\n"
            "[%noheader]\n|===\n|A |B\n\n|c |d\n|===\n")
    assert asciidoc_to_text(text)[1].split("\n\n") == ["Plan | Price", "Plan: Team | Price: 12", "Owner | Ann",
                                                       "Review | Yearly", "A | B", "c | d"]
