import json

import numpy as np
import pytest

from models import ConfigError, Verdict
from pipeline.cli.main import main
from training.data import LabelledPair, load_pairs
from training.embedder_finetune import EmbedderTrainConfig, embedder_triplets, finetune_embedder


def _pair(query: str, text: str, label: Verdict, domain: str) -> LabelledPair:
    return LabelledPair(query=query, text=text, label=label, query_id=query, metadata={"domain": domain})


def test_triplets_need_both_sides_of_a_query_and_are_capped_per_group():
    pairs = []
    for i in range(5):
        pairs += [_pair(f"q{i}?", f"answer {i}", Verdict.RELEVANT, "web"),
                  _pair(f"q{i}?", f"other {i}", Verdict.IRRELEVANT, "web")]
    pairs += [_pair("med?", "med answer", Verdict.RELEVANT, "medical"),
              _pair("med?", "med other", Verdict.IRRELEVANT, "medical"),
              _pair("only positive?", "yes", Verdict.RELEVANT, "medical"),
              _pair("partial?", "half", Verdict.PARTIAL, "medical"),
              _pair("partial?", "no", Verdict.IRRELEVANT, "medical")]
    rows = embedder_triplets(pairs, per_group=3, seed=1)
    assert len(rows) == 4 and sum(q == "med?" for q, _, _ in rows) == 1  # 3 of web's 5, medical's one
    assert all(p.startswith(("answer", "med answer")) and len(ns) == 1 and ns[0].startswith(("other", "med other"))
               for _, p, ns in rows)
    assert embedder_triplets(pairs, per_group=3, seed=1) == rows  # reproducible
    assert {q for q, _, _ in embedder_triplets(pairs, leave_out=("web",))} == {"med?"}
    assert len(embedder_triplets(pairs, group_by=None, per_group=100)) == 6
    with pytest.raises(ConfigError, match="--group-by 'domian': no pair has that field"):
        embedder_triplets(pairs, group_by="domian")  # a typo would have made one group of everything


def test_several_negatives_per_query_are_distinct_and_at_most_what_the_query_has():
    pairs = [_pair("q?", "yes", Verdict.RELEVANT, "web")] + [_pair("q?", f"no {i}", Verdict.IRRELEVANT, "web")
                                                             for i in range(4)]
    pairs += [_pair("r?", "yes r", Verdict.RELEVANT, "web"), _pair("r?", "no r", Verdict.IRRELEVANT, "web")]
    rows = {q: ns for q, _, ns in embedder_triplets(pairs, negatives=3, seed=2)}
    assert len(rows["q?"]) == 3 and len(set(rows["q?"])) == 3 and set(rows["q?"]) <= {f"no {i}" for i in range(4)}
    assert rows["r?"] == ("no r",)
    assert all(len(ns) == 1 for _, _, ns in embedder_triplets(pairs, seed=2))


def test_per_positive_makes_a_triplet_for_every_relevant_text_of_a_query():
    pairs = [_pair("q?", f"yes {i}", Verdict.RELEVANT, "web") for i in range(3)]
    pairs += [_pair("q?", f"no {i}", Verdict.IRRELEVANT, "web") for i in range(2)]
    pairs += [_pair("r?", "yes r", Verdict.RELEVANT, "web"), _pair("r?", "no r", Verdict.IRRELEVANT, "web")]
    rows = embedder_triplets(pairs, per_positive=True, negatives=2, seed=3)
    assert sorted(p for q, p, _ in rows if q == "q?") == ["yes 0", "yes 1", "yes 2"]
    assert all(sorted(ns) == ["no 0", "no 1"] for q, _, ns in rows if q == "q?")
    assert [ns for q, _, ns in rows if q == "r?"] == [("no r",)]
    assert len(embedder_triplets(pairs, per_positive=True, per_group=2)) == 2  # the cap counts triplets
    assert len(embedder_triplets(pairs)) == 2  # one per query otherwise


def test_another_rows_relevant_text_of_the_same_query_is_not_a_negative():
    import torch

    from training.embedder_finetune import _without_own_query_texts

    logits = torch.arange(15, dtype=torch.float32).reshape(3, 5)  # 3 rows: 3 relevant texts, then 2 negatives
    masked = _without_own_query_texts(torch, logits, ["q", "r", "q"])
    assert masked[0, 2] < -1e3 and masked[2, 0] < -1e3  # rows 0 and 2 share a query
    keep = torch.ones(3, 5, dtype=torch.bool)
    keep[0, 2] = keep[2, 0] = False
    assert torch.equal(masked[keep], logits[keep])  # own texts, other queries' texts and negatives untouched
    assert _without_own_query_texts(torch, logits, ["q", "r", "s"]) is logits


@pytest.mark.parametrize(("knobs", "named"), [
    ({"batch_size": 1}, "batch_size must be >= 2"),
    ({"negatives": 0}, "negatives must be >= 1"),
    ({"alpha": 0.0}, "alpha must be in (0, 1]"),
    ({"learning_rate": 0.0}, "learning_rate must be in (0, 1)"),
    ({"per_group": "10"}, "per_group must be an int"),
    ({"distill_weight": 1.5}, "distill_weight must be in [0, 1]"),
    ({"guide": True}, "guide must be False without a teacher"),
])
def test_a_bad_knob_is_refused_by_name(knobs, named):
    with pytest.raises(ConfigError, match=named.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        EmbedderTrainConfig(**knobs)


def test_finetune_writes_a_model_that_moved_and_alpha_interpolates(squad_pairs_file, tmp_path):
    import torch
    import transformers

    from training.base_models import resolve_base

    pairs = load_pairs(squad_pairs_file).pairs
    config = EmbedderTrainConfig(batch_size=8, max_length=32, epochs=0.5, group_by="source", learning_rate=1e-4)
    report = finetune_embedder(pairs, tmp_path / "tuned", config)
    assert report["triplets"] > 8 and report["training"]["steps"] >= 1
    assert json.loads((tmp_path / "tuned" / "embedder_training.json").read_text())["config"]["max_length"] == 32
    base = transformers.AutoModel.from_pretrained(str(resolve_base("default-base")), local_files_only=True)
    tuned = transformers.AutoModel.from_pretrained(str(tmp_path / "tuned"), local_files_only=True)
    key = "encoder.layer.0.attention.self.query.weight"
    start, moved = base.state_dict()[key], tuned.state_dict()[key]
    assert not torch.equal(start, moved)
    half = finetune_embedder(pairs, tmp_path / "half", EmbedderTrainConfig(**{**config.__dict__, "alpha": 0.5}))
    assert half["training"]["steps"] == report["training"]["steps"]
    midway = transformers.AutoModel.from_pretrained(str(tmp_path / "half"), local_files_only=True).state_dict()[key]
    assert np.allclose(midway.numpy(), (0.5 * start + 0.5 * moved).numpy(), atol=1e-6)  # same seed, same steps
    with pytest.raises(ConfigError, match="exists and is not empty"):
        finetune_embedder(pairs, tmp_path / "tuned", config)
    with pytest.raises(ConfigError, match=r"embedder_training.json/out: cannot make this folder"):
        finetune_embedder(pairs, tmp_path / "tuned" / "embedder_training.json" / "out", config)  # before training
    only_positive = [p for p in pairs if p.label is Verdict.RELEVANT]
    with pytest.raises(ConfigError, match="needs queries with both a relevant and an irrelevant text"):
        finetune_embedder(only_positive, tmp_path / "none", config)
    assert not (tmp_path / "none").exists()


def test_the_symmetric_loss_also_asks_which_query_each_relevant_text_belongs_to(squad_pairs_file):
    import torch
    import transformers

    from training.base_models import resolve_base
    from training.embedder_finetune import train_contrastive

    rows = embedder_triplets(load_pairs(squad_pairs_file).pairs, group_by="source")[:8]
    base = str(resolve_base("default-base"))
    tokenizer = transformers.AutoTokenizer.from_pretrained(base, local_files_only=True)
    first_losses = []
    for symmetric in (False, True):
        torch.manual_seed(0)
        encoder = transformers.AutoModel.from_pretrained(base, local_files_only=True)
        config = EmbedderTrainConfig(batch_size=8, max_length=32, epochs=1.0, symmetric=symmetric)
        curve = train_contrastive(torch, tokenizer, encoder, rows, config)
        assert curve["steps"] == 1
        first_losses.append(curve["loss_by_tenth"][0])
    plain, symmetric_loss = first_losses
    assert np.isfinite([plain, symmetric_loss]).all() and plain != pytest.approx(symmetric_loss, abs=1e-4)


def test_a_step_reads_every_mined_negative_of_its_queries(squad_pairs_file):
    import torch
    import transformers

    from training.base_models import resolve_base
    from training.embedder_finetune import train_contrastive

    rows = embedder_triplets(load_pairs(squad_pairs_file).pairs, group_by="source", negatives=2)[:8]
    assert any(len(ns) == 2 for _, _, ns in rows)
    base = str(resolve_base("default-base"))
    tokenizer = transformers.AutoTokenizer.from_pretrained(base, local_files_only=True)
    encoder = transformers.AutoModel.from_pretrained(base, local_files_only=True)
    curve = train_contrastive(torch, tokenizer, encoder, rows, EmbedderTrainConfig(batch_size=8, max_length=32))
    assert curve["steps"] == 1 and np.isfinite(curve["loss_by_tenth"][0])
    assert curve["mined_negatives_seen"] == sum(len(ns) for _, _, ns in rows) > 8


def test_a_teacher_that_scores_as_the_student_does_leaves_only_the_contrastive_share(squad_pairs_file):
    """The base model as its own teacher, without dropout: at the first step the teacher's in-batch scores are the
    student's, the KL term is ~0 and the loss is (1 - w) x the plain contrastive loss; with w = 1 it is ~0."""
    import torch
    import transformers

    from training.base_models import resolve_base
    from training.embedder_finetune import teacher_vectors, train_contrastive, triplet_texts

    rows = embedder_triplets(load_pairs(squad_pairs_file).pairs, group_by="source")[:8]
    base = str(resolve_base("default-base"))
    teacher = teacher_vectors(rows, base, max_length=32)
    assert set(teacher) == triplet_texts(rows) == {t for q, p, ns in rows for t in (q, p, *ns)}
    assert all(abs(float(np.linalg.norm(v)) - 1) < 1e-5 for v in teacher.values())
    tokenizer = transformers.AutoTokenizer.from_pretrained(base, local_files_only=True)
    first = {}
    for name, weight, vectors in (("plain", 0.5, None), ("w0.5", 0.5, teacher), ("w1", 1.0, teacher)):
        encoder = transformers.AutoModel.from_pretrained(base, local_files_only=True, hidden_dropout_prob=0.0,
                                                         attention_probs_dropout_prob=0.0)
        config = EmbedderTrainConfig(batch_size=8, max_length=32, distill_weight=weight)
        first[name] = train_contrastive(torch, tokenizer, encoder, rows, config, vectors)["loss_by_tenth"][0]
    assert first["plain"] > 0.01
    assert first["w0.5"] == pytest.approx(0.5 * first["plain"], rel=1e-3)
    assert first["w1"] == pytest.approx(0.0, abs=1e-4)


def test_the_guide_marks_only_texts_the_teacher_prefers_to_the_querys_own():
    import torch

    from training.embedder_finetune import _teacher_preferred

    taught = torch.tensor([[0.5, 0.7, 0.1, 0.6],   # query 0: own text 0.5; text 1 and its 2nd negative score higher
                           [0.2, 0.4, 0.5, 0.3]])  # query 1: own text 0.4; query 0's negative scores higher
    expected = torch.tensor([[False, True, False, True], [False, False, True, False]])
    assert torch.equal(_teacher_preferred(torch, taught), expected)


def test_guided_training_counts_what_it_masked_and_learns_from_the_rest():
    import torch
    import transformers

    from training.base_models import resolve_base
    from training.embedder_finetune import train_contrastive

    rows = [(f"what is item {i} made of", f"item {i} is made of wood number {i}", (f"a passage on weather {i}",))
            for i in range(8)]
    base = str(resolve_base("default-base"))
    tokenizer = transformers.AutoTokenizer.from_pretrained(base, local_files_only=True)
    # a teacher that scores every mined negative above the query's own text, and the batch's relevant texts level
    ones = np.ones(4, dtype=np.float32) / 2
    teacher = {**{t: ones for q, _, ns in rows for t in (q, *ns)},
               **{p: np.array([1.0, -1.0, 1.0, -1.0], dtype=np.float32) / 2 for _, p, _ in rows}}
    first = {}
    for guide in (False, True):
        torch.manual_seed(0)
        encoder = transformers.AutoModel.from_pretrained(base, local_files_only=True)
        config = EmbedderTrainConfig(batch_size=8, max_length=32, distill_weight=0.0, guide=guide, teacher="given")
        curve = train_contrastive(torch, tokenizer, encoder, rows, config, teacher)
        first[guide] = (curve["guide_masked"], curve["loss_by_tenth"][0])
    assert first[False][0] == 0 and first[True][0] == 8 * 8  # each query loses the 8 mined negatives of the batch
    assert first[True][1] < first[False][1]  # the same step without the texts it was told were not wrong
    # guided and distilled at once: the teacher's target loses the same texts, so the loss stays finite and small
    encoder = transformers.AutoModel.from_pretrained(base, local_files_only=True)
    both = train_contrastive(torch, tokenizer, encoder, rows,
                             EmbedderTrainConfig(batch_size=8, max_length=32, distill_weight=0.5, guide=True,
                                                 teacher="given"), teacher)
    assert both["guide_masked"] == 64 and np.isfinite(both["loss_by_tenth"][0]) and both["loss_by_tenth"][0] < 10


def test_a_teacher_folder_without_a_model_is_refused_before_anything_is_written(squad_pairs_file, tmp_path):
    config = EmbedderTrainConfig(batch_size=8, max_length=32, group_by="source", teacher=str(tmp_path / "no-model"))
    with pytest.raises(ConfigError, match="no-model is not a sentence-transformers model folder"):
        finetune_embedder(load_pairs(squad_pairs_file).pairs, tmp_path / "out", config)
    assert not (tmp_path / "out").exists()


def test_crag_train_embedder_says_what_to_do_next(squad_pairs_file, tmp_path, capsys):
    from training.base_models import resolve_base

    out = tmp_path / "tuned"
    assert main(["train-embedder", "--data", str(squad_pairs_file), "--out", str(out), "--batch-size", "8",
                 "--max-length", "32", "--epochs", "0.3", "--group-by", "none", "--negatives", "2",
                 "--per-positive", "--teacher", str(resolve_base("default-base")), "--distill-weight", "0.3"]) == 0
    result = json.loads(capsys.readouterr().out)
    recorded = json.loads((out / "embedder_training.json").read_text())["config"]
    assert recorded["negatives"] == 2 and recorded["per_positive"] is True
    assert recorded["teacher"] == str(resolve_base("default-base")) and recorded["distill_weight"] == 0.3
    assert result["triplets"] > 0 and f"crag export-embedder --source {out}" in result["next"]
    assert (out / "config.json").is_file() and (out / "tokenizer.json").is_file()
