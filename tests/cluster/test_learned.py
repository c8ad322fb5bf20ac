"""The learned clustering layer: task generator, layer, trainer, files, estimator."""

import os
import pickle

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans

from sktransformer import TransformerKMeans
from sktransformer.cluster import LayerTrainer, LearnedKMeansLayer
from sktransformer.cluster._learned import SHIPPED, kmeans_objective, lloyd_step
from sktransformer.cluster._train import evaluate
from sktransformer.datasets import make_gmm_tasks

# -- the task distribution ---------------------------------------------------------------


def test_tasks_are_scaled_shuffled_mixtures_and_seeded():
    X, y = make_gmm_tasks(5, n_samples=300, n_features=3, n_clusters=4, random_state=0)
    assert X.shape == (5, 300, 3) and y.shape == (5, 300) and X.dtype == np.float32
    np.testing.assert_allclose(X.min(1), 0.0)
    np.testing.assert_allclose(X.max(1), 1.0)
    assert set(np.unique(y)) == {0, 1, 2, 3}
    assert not np.array_equal(y[0], np.sort(y[0]))  # random order
    again, _ = make_gmm_tasks(5, n_samples=300, n_features=3, n_clusters=4, random_state=0)
    np.testing.assert_array_equal(X, again)
    other, _ = make_gmm_tasks(5, n_samples=300, n_features=3, n_clusters=4, random_state=1)
    assert not np.array_equal(X, other)


@pytest.mark.parametrize("noise", ["gaussian", "cauchy", "gumbel", "laplace", "lognormal"])
def test_every_noise_family(noise):
    X, _ = make_gmm_tasks(3, n_samples=200, n_features=2, n_clusters=3, noise=noise,
                          random_state=0)
    assert np.isfinite(X).all() and X.min() == 0 and X.max() == 1


def test_bad_task_arguments():
    with pytest.raises(ValueError, match="Unknown noise 'normal'"):
        make_gmm_tasks(2, noise="normal")
    with pytest.raises(ValueError, match="n_samples=5 should be >= n_clusters=10"):
        make_gmm_tasks(2, n_samples=5)
    with pytest.raises(ValueError, match="n_tasks must be a positive integer"):
        make_gmm_tasks(0)


def test_lloyd_on_the_distribution_matches_the_paper():
    """Lloyd from the first k points: ~6.35 at init, ~5.58 after 1 step, ~5.26 after 10."""
    X, _ = make_gmm_tasks(64, random_state=123)
    X = torch.from_numpy(X).double()
    centers = X[:, :10]
    logs = [float(torch.log(kmeans_objective(X, centers)).mean())]
    for _ in range(10):
        centers = lloyd_step(X, centers)
        logs.append(float(torch.log(kmeans_objective(X, centers)).mean()))
    assert logs[0] == pytest.approx(6.35, abs=0.05)
    assert logs[1] == pytest.approx(5.58, abs=0.05)
    assert logs[10] == pytest.approx(5.26, abs=0.05)
    # the batched Lloyd step is scikit-learn's
    km = KMeans(10, init=X[0, :10].numpy(), n_init=1, max_iter=1, tol=0).fit(X[0].numpy())
    np.testing.assert_allclose(lloyd_step(X[:1], X[:1, :10])[0].numpy(), km.cluster_centers_,
                               rtol=1e-10)


# -- the layer -------------------------------------------------------------------------------


def test_layer_set_to_the_circuit_is_lloyd_at_large_gamma():
    X, _ = make_gmm_tasks(4, n_samples=200, n_features=5, n_clusters=3, random_state=0)
    X = torch.from_numpy(X)
    layer = LearnedKMeansLayer.from_circuit(5, 3, gamma=3e3).eval()
    with torch.no_grad():
        ours = layer.step(X, X[:, :3])
    lloyd = lloyd_step(X, X[:, :3])
    # soft only for points within ~1/gamma of a tie between two centers
    torch.testing.assert_close(ours, lloyd, atol=1e-2, rtol=0)
    assert (ours - lloyd).abs().mean() < 1e-3
    torch.testing.assert_close(kmeans_objective(X, ours), kmeans_objective(X, lloyd),
                               rtol=1e-3, atol=0)


def test_layer_shapes_and_ablation_width():
    X = torch.rand(2, 50, 4)
    full = LearnedKMeansLayer(4, 3, generator=torch.Generator().manual_seed(0))
    slim = LearnedKMeansLayer(4, 3, scratch=False)
    assert full.width == 7 and slim.width == 4
    assert full.step(X, X[:, :3]).shape == slim.step(X, X[:, :3]).shape == (2, 3, 4)
    assert sum(p.numel() for p in full.parameters()) == 12 * (7 * 7 + 7)
    seeded = LearnedKMeansLayer(4, 3, generator=torch.Generator().manual_seed(0))
    for a, b in zip(full.parameters(), seeded.parameters()):
        assert torch.equal(a, b)


def test_inference_chunks_the_point_to_point_block(monkeypatch):
    from sktransformer.cluster import _learned

    X = torch.rand(1, 300, 4)
    layer = LearnedKMeansLayer(4, 3, generator=torch.Generator().manual_seed(1)).eval()
    with torch.no_grad():
        whole = layer.step(X, X[:, :3])
        monkeypatch.setattr(_learned, "_TILE", 1000)  # 3 query rows per tile
        chunked = layer.step(X, X[:, :3])
    torch.testing.assert_close(chunked, whole)


# -- training --------------------------------------------------------------------------------

TINY = dict(n_features=4, n_clusters=3, n_samples=64, batch_size=8, val_every=5,
            n_val_tasks=16, lr=0.01, verbose=0)


def test_tiny_training_lowers_the_loss_and_is_deterministic():
    a = LayerTrainer(n_steps=40, random_state=0, **TINY).fit()
    loss = np.array(a.history_["loss"])
    assert loss[-10:].mean() < 0.8 * loss[:5].mean()
    assert a.history_["val_step"] == [5, 10, 15, 20, 25, 30, 35, 40]
    assert a.best_score_ == min(a.history_["val_score"])
    b = LayerTrainer(n_steps=40, random_state=0, **TINY).fit()
    np.testing.assert_array_equal(a.history_["loss"], b.history_["loss"])


def test_checkpoint_resumes_an_interrupted_run(tmp_path):
    path = str(tmp_path / "run.ckpt")
    LayerTrainer(n_steps=10, checkpoint=path, random_state=3, **TINY).fit()  # "interrupted"
    assert os.path.exists(path)
    resumed = LayerTrainer(n_steps=20, checkpoint=path, random_state=3, **TINY).fit()
    straight = LayerTrainer(n_steps=20, random_state=3, **TINY).fit()
    assert len(resumed.history_["loss"]) == 20
    np.testing.assert_allclose(resumed.history_["loss"], straight.history_["loss"], rtol=1e-5)
    for a, b in zip(resumed.layer_.parameters(), straight.layer_.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


# -- weight files ----------------------------------------------------------------------------


def test_save_load_round_trip(tmp_path):
    layer = LearnedKMeansLayer(4, 3, scratch=False, a=2.0,
                               generator=torch.Generator().manual_seed(0))
    path = tmp_path / "w.pt"
    layer.save(path)
    loaded = LearnedKMeansLayer.load(path)
    assert loaded.config() == layer.config() and not loaded.training
    for a, b in zip(layer.parameters(), loaded.parameters()):
        assert torch.equal(a, b)


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch /tmp/sktransformer-pwned",))


def test_tampered_and_truncated_files_are_clear_errors(tmp_path):
    good = tmp_path / "good.pt"
    LearnedKMeansLayer(4, 3).save(good)
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good.read_bytes()[:500])
    with pytest.raises(ValueError, match="not a readable LearnedKMeansLayer weights file"):
        LearnedKMeansLayer.load(truncated)
    evil = tmp_path / "evil.pt"
    with open(evil, "wb") as f:
        pickle.dump({"format": "sktransformer.LearnedKMeansLayer", "x": _Evil()}, f)
    with pytest.raises(ValueError, match="not a readable"):
        LearnedKMeansLayer.load(evil)
    assert not os.path.exists("/tmp/sktransformer-pwned")
    other = tmp_path / "other.pt"
    torch.save({"hello": torch.zeros(2)}, other)
    with pytest.raises(ValueError, match="not a LearnedKMeansLayer weights file"):
        LearnedKMeansLayer.load(other)
    payload = torch.load(good, weights_only=True)
    payload["state_dict"]["weight.assign_Q"] = torch.zeros(3, 3)
    torch.save(payload, other)
    with pytest.raises(ValueError, match="missing or mis-shaped weights"):
        LearnedKMeansLayer.load(other)
    payload["state_dict"]["weight.assign_Q"] = torch.full((7, 7), float("nan"))
    torch.save(payload, other)
    with pytest.raises(ValueError, match="non-finite"):
        LearnedKMeansLayer.load(other)


# -- the estimator -------------------------------------------------------------------------


def test_estimator_runs_a_layer_of_your_own_and_checks_its_shape(tmp_path):
    trainer = LayerTrainer(n_steps=10, random_state=0, **TINY).fit()
    X, _ = make_gmm_tasks(1, n_samples=200, n_features=4, n_clusters=3, random_state=9)
    X = X[0].astype(np.float64) * 7 - 3  # any scale: the estimator min-max scales
    km = TransformerKMeans(3, weights=trainer.layer_, max_iter=5, random_state=0,
                           device="cpu").fit(X)
    assert km.cluster_centers_.shape == (3, 4) and km.cluster_centers_.dtype == np.float64
    np.testing.assert_array_equal(km.predict(X), km.labels_)
    assert km.inertia_ == pytest.approx(-km.score(X))
    path = tmp_path / "mine.pt"
    trainer.layer_.save(path)
    from_file = TransformerKMeans(3, weights=str(path), max_iter=5, random_state=0,
                                  device="cpu").fit(X)
    np.testing.assert_allclose(from_file.cluster_centers_, km.cluster_centers_)
    with pytest.raises(ValueError, match=r"for n_features=4 and n_clusters=3, but X has "
                                         r"n_features=4 and n_clusters=5.*LayerTrainer"):
        TransformerKMeans(5, weights=trainer.layer_, device="cpu").fit(X)
    with pytest.raises(ValueError, match="temperature applies to the exact circuit"):
        TransformerKMeans(3, weights=trainer.layer_, temperature=1.0, device="cpu").fit(X)
    with pytest.raises(ValueError, match="sample_weight is not supported"):
        TransformerKMeans(3, weights=trainer.layer_, device="cpu").fit(
            X, sample_weight=np.ones(len(X)))
    assert pickle.loads(pickle.dumps(km)).predict(X).tolist() == km.labels_.tolist()


def test_shipped_weights_load_on_cpu_and_beat_the_papers_lloyd_on_unseen_tasks():
    layer = LearnedKMeansLayer.load(SHIPPED)
    assert (layer.n_features, layer.n_clusters, layer.scratch) == (32, 10, True)
    assert os.path.getsize(SHIPPED) < 200_000
    X, _ = make_gmm_tasks(24, random_state=777)
    Xt = torch.from_numpy(X)
    learned, lloyd = evaluate(layer, Xt, Xt[:, :10], n_steps=20)
    # the paper's Lloyd (empty clusters keep their center): beaten after 1 and after 20 steps
    assert learned[1] < lloyd[1] - 0.03
    assert learned[20] < lloyd[20]
    # the estimator runs the same layer
    task = X[0]
    km = TransformerKMeans(10, weights="learned", init=task[:10], max_iter=20, tol=0,
                           device="cpu").fit(task)
    with torch.no_grad():
        centers = Xt[:1, :10]
        for _ in range(20):
            centers = layer.step(Xt[:1], centers)
    np.testing.assert_allclose(km.cluster_centers_, centers[0].numpy(), atol=1e-5)
    assert km.n_iter_ == 20


def test_get_circuit_returns_the_learned_layer():
    X, _ = make_gmm_tasks(1, random_state=5)
    km = TransformerKMeans(10, weights="learned", max_iter=2, random_state=0,
                           device="cpu").fit(X[0])
    assert isinstance(km.get_circuit(), LearnedKMeansLayer)
