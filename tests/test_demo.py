"""The demo's sections (``python -m sktransformer``), on their smallest settings."""

from sktransformer import __main__ as demo


def test_clustering_table_agrees_with_kmeans():
    rows = demo.run(["iris"], device="cpu")
    table = demo.format_table(rows)
    assert "TransformerKMeans" in table and "sklearn KMeans" in table
    hard = next(r for r in rows if r["method"] == "TransformerKMeans")
    assert hard["ari_vs_kmeans"] == 1.0


def test_the_learned_layer_section_beats_lloyd():
    scores = demo.learned_layer(n_tasks=8)
    assert scores["learned layer"] < scores["Lloyd"] - 0.2


def test_the_knn_attention_section_reports_both_models():
    rows = demo.knn_attention(device="cpu")
    assert [r[0] for r in rows] == ["KNNAttentionRegressor",
                                    "KNeighborsRegressor(16, distance)"]
    assert all(0.2 < r[1] < 0.7 for r in rows)  # R^2 on diabetes
