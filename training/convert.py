"""Converters from public relevance data sets to the labelled-pair format.

- SQuAD v2 JSON: (question, own paragraph) is relevant when answerable and a hard negative when the
  question is adversarially unanswerable; other paragraphs of the same article are topical negatives
  and paragraphs of other articles easy negatives. ``source`` is the article title (split by it).
- WikiQA TSV: (question, sentence, 0/1). Questions are grouped by their text because some copies
  renumber the ids per row.
"""

from __future__ import annotations

import csv
import json
import logging
import random
from pathlib import Path
from typing import Any

from models.errors import DataError
from models.types import Verdict
from training.data import LabelledPair, query_key

__all__ = ["squad_pairs", "wikiqa_pairs"]

logger = logging.getLogger(__name__)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a readable SQuAD JSON file: {exc}") from exc


def squad_pairs(
    path: str | Path,
    *,
    same_article_negatives: int = 1,
    other_article_negatives: int = 1,
    seed: int = 13,
) -> list[LabelledPair]:
    """Pairs from a SQuAD v2 file (CC BY-SA 4.0, Rajpurkar, Jia & Liang 2018)."""
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise DataError(f"{path}: expected SQuAD JSON with a top-level 'data' list")
    rng = random.Random(seed)
    articles = [_squad_article(path, index, a) for index, a in enumerate(data["data"])]
    pairs: list[LabelledPair] = []
    for a_index, (title, contexts, paragraphs) in enumerate(articles):
        others = [i for i in range(len(articles)) if i != a_index]
        for p_index, paragraph in enumerate(paragraphs):
            for qa in paragraph["qas"]:
                question = qa["question"].strip()
                if not question:
                    continue
                impossible = bool(qa.get("is_impossible"))
                base = {"query": question, "query_id": str(qa["id"]), "source": title}
                pairs.append(
                    LabelledPair(
                        **base,
                        text=paragraph["context"],
                        label=Verdict.IRRELEVANT if impossible else Verdict.RELEVANT,
                        chunk_id=f"{title}#{p_index}",
                        metadata={"dataset": "squad2", "kind": "unanswerable" if impossible else "answerable"},
                    )
                )
                pool = [i for i in range(len(contexts)) if i != p_index]
                for n_index in rng.sample(pool, min(same_article_negatives, len(pool))):
                    pairs.append(
                        LabelledPair(
                            **base,
                            text=contexts[n_index],
                            label=Verdict.IRRELEVANT,
                            chunk_id=f"{title}#{n_index}",
                            metadata={"dataset": "squad2", "kind": "same_article"},
                        )
                    )
                for _ in range(other_article_negatives if others else 0):
                    o_title, o_contexts, _paragraphs = articles[rng.choice(others)]
                    o_index = rng.randrange(len(o_contexts))
                    pairs.append(
                        LabelledPair(
                            **base,
                            text=o_contexts[o_index],
                            label=Verdict.IRRELEVANT,
                            chunk_id=f"{o_title}#{o_index}",
                            metadata={"dataset": "squad2", "kind": "other_article"},
                        )
                    )
    if not pairs:
        raise DataError(f"{path}: no SQuAD questions could be read ({len(articles)} article(s), none with a "
                        "question): nothing converted")
    return pairs


def _squad_article(path: Path, index: int, article: Any) -> tuple[str, list[str], list[dict[str, Any]]]:
    """(title, paragraph texts, paragraphs) of one SQuAD article, after checking the fields the converter reads;
    a DataError names the first one missing or of the wrong type."""
    where = f"{path}: data[{index}]"
    if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
        raise DataError(f"{where} is not a SQuAD article: expected an object with a 'paragraphs' list")
    title = article.get("title", f"article {index}")
    if not isinstance(title, str):
        raise DataError(f"{where}.title must be text, got {title!r:.80}")
    for p_index, paragraph in enumerate(article["paragraphs"]):
        if not (isinstance(paragraph, dict) and isinstance(paragraph.get("context"), str)
                and isinstance(paragraph.get("qas"), list)):
            raise DataError(f"{where}.paragraphs[{p_index}] must be an object with a 'context' text and a "
                            "'qas' list")
        for q_index, qa in enumerate(paragraph["qas"]):
            if not (isinstance(qa, dict) and isinstance(qa.get("question"), str)
                    and isinstance(qa.get("id"), (str, int)) and not isinstance(qa.get("id"), bool)):
                raise DataError(f"{where}.paragraphs[{p_index}].qas[{q_index}] must be an object with a "
                                "'question' text and an 'id'")
    return title, [p["context"] for p in article["paragraphs"]], article["paragraphs"]


def wikiqa_pairs(path: str | Path) -> list[LabelledPair]:
    """Pairs from a WikiQA TSV (Microsoft Research Data License: research use, do not redistribute)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not a readable WikiQA TSV: {exc}") from exc
    if text.lstrip()[:1] in ("{", "["):
        raise DataError(f"{path}: looks like JSON, but `crag convert wikiqa` reads the WikiQA TSV "
                        "(WikiQA-train.tsv / -dev.tsv / -test.tsv); for SQuAD JSON use `crag convert squad`")
    reader = csv.DictReader(text.splitlines(), delimiter="\t", quoting=csv.QUOTE_NONE)
    needed = {"Question", "Sentence", "Label"}
    try:
        fieldnames = reader.fieldnames
        if not needed <= set(fieldnames or []):
            raise DataError(f"{path}: WikiQA header must include {sorted(needed)}, got {fieldnames}")
        rows = list(reader)
    except csv.Error as exc:
        raise DataError(f"{path}: not a WikiQA TSV (line {reader.line_num}: {exc}); expected tab-separated "
                        f"columns {sorted(needed)}") from exc
    pairs = []
    skipped = []
    for line, row in enumerate(rows, start=2):
        if row["Label"] not in ("0", "1") or not row["Question"] or not row["Sentence"]:
            skipped.append(line)
            continue
        question = _unquote(row["Question"])
        pairs.append(
            LabelledPair(
                query=question,
                text=_unquote(row["Sentence"]),
                label=Verdict.RELEVANT if row["Label"] == "1" else Verdict.IRRELEVANT,
                query_id=query_key(question),
                chunk_id=row.get("SentenceID"),
                source=row.get("DocumentTitle"),
                metadata={"dataset": "wikiqa"},
            )
        )
    if skipped:
        logger.warning("%s: skipped %d malformed row(s) (broken quoting), first at line %d",
                       path, len(skipped), skipped[0])
    if not pairs:
        raise DataError(f"{path}: no WikiQA rows could be read")
    return pairs


def _unquote(field: str) -> str:
    """Undo spreadsheet-style quoting ("a ""b"" c") that some WikiQA copies carry."""
    field = field.strip()
    if len(field) >= 2 and field[0] == field[-1] == '"':
        field = field[1:-1].replace('""', '"')
    return field.strip()
