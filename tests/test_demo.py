"""The demo's sections (``python -m sktransformer``), on their smallest settings."""

from sktransformer import __main__ as demo


def test_clustering_table_agrees_with_kmeans():
    rows = demo.clustering(["iris"], device="cpu")
    table = demo.format_table(rows)
    assert "TransformerKMeans" in table and "scikit-learn KMeans" in table
    assert "lower" in table and "higher" in table  # every column says its direction
    hard = next(r for r in rows if r["method"] == "TransformerKMeans")
    assert hard["ari_vs_kmeans"] == 1.0
    assert hard["verdict"].startswith("KMeans' labels")
    assert all(r["ms"] > 0 and r["verdict"] for r in rows)


def test_the_selection_section_finds_k_where_minus_the_inertia_does_not():
    picked = demo.select_k()
    ours, theirs = picked.values()
    assert ours == 6
    assert theirs == 10  # the largest of the grid


def test_the_learned_layer_section_beats_lloyd():
    scores = demo.learned_layer(n_tasks=8)
    assert scores["learned layer"] < scores["Lloyd"] - 0.2


def test_the_knn_attention_section_reports_both_models():
    rows = demo.knn_attention(device="cpu")
    assert [r[0] for r in rows] == ["KNNAttentionRegressor",
                                    "KNeighborsRegressor(16, distance)"]
    assert all(0.2 < r[1] < 0.7 for r in rows)  # R^2 on diabetes


def test_the_sequence_section_reports_both_feature_kinds():
    rows = demo.sequences(device="cpu", n=120, length=8, max_epochs=1)
    assert [r[0] for r in rows] == ["learned particles", "fixed random features"]
    assert all(0 <= r[1] <= 1 and r[2] > 0 for r in rows)


def test_verdicts_follow_the_direction_of_each_column():
    assert demo._verdict(0.9, 0.8) == "ahead"
    assert demo._verdict(0.9, 0.8, higher_better=False) == "behind"
    assert demo._verdict(0.801, 0.8) == "level"
