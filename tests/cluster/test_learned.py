"""The learned clustering layer: task generator, layer, trainer, files, estimator."""

import os
import pickle
import warnings

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning

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
    layer = LearnedKMeansLayer.from_circuit(5, 3, gamma=3e3, update_gamma=3e3,
                                            normalize=False).eval()
    with torch.no_grad():
        ours = layer.step(X, X[:, :3])
    lloyd = lloyd_step(X, X[:, :3])
    # soft only for points within ~1/gamma of a tie between two centers
    torch.testing.assert_close(ours, lloyd, atol=1e-2, rtol=0)
    assert (ours - lloyd).abs().mean() < 1e-3
    torch.testing.assert_close(kmeans_objective(X, ours), kmeans_objective(X, lloyd),
                               rtol=1e-3, atol=0)


def test_normalized_layer_is_equivariant_to_the_scale_of_a_task():
    X = torch.rand(3, 80, 4, dtype=torch.float64)
    layer = LearnedKMeansLayer(4, 3, generator=torch.Generator().manual_seed(0)).double().eval()
    raw = LearnedKMeansLayer(4, 3, normalize=False,
                             generator=torch.Generator().manual_seed(0)).double().eval()
    with torch.no_grad():
        torch.testing.assert_close(layer.step(7.5 * X, 7.5 * X[:, :3]),
                                   7.5 * layer.step(X, X[:, :3]))
        assert not torch.allclose(raw.step(7.5 * X, 7.5 * X[:, :3]),
                                  7.5 * raw.step(X, X[:, :3]))
    # the spread is the median distance to the median: far outliers do not move it
    from sktransformer.cluster._learned import spread
    Y = X.clone()
    Y[:, :5] += 1e6
    torch.testing.assert_close(spread(Y), spread(X), rtol=0.2, atol=0)


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


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_features=0), "n_features must be a positive integer"),
    (dict(n_features=3.7), "n_features must be a positive integer"),
    (dict(n_clusters="3"), "n_clusters must be a positive integer"),
    (dict(scratch="no"), "scratch must be True or False"),
    (dict(a=-1.0), "a must be a positive finite number"),
    (dict(dropout=1.0), r"dropout must be in \[0, 1\)"),
])
def test_bad_layer_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LearnedKMeansLayer(**{"n_features": 4, "n_clusters": 3, **kwargs})


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
            n_val_tasks=16, verbose=0)


def test_search_then_training_never_ends_worse_and_is_deterministic():
    a = LayerTrainer(n_steps=10, lr=1e-3, random_state=0, **TINY).fit()
    chosen = [r["score"] for r in a.search_ if (r["gamma"], r["update_gamma"]) ==
              (a.gamma_, a.update_gamma_)]
    assert len(a.search_) >= 15 and chosen == [a.history_["val_score"][0]]
    assert a.history_["val_step"] == [0, 5, 10]
    assert a.best_score_ == min(a.history_["val_score"])
    assert a.best_step_ == a.history_["val_step"][int(np.argmin(a.history_["val_score"]))]
    # the kept layer scores what was recorded for it
    X = a._tasks(a.n_val_tasks, 1_000_003)
    assert float(a._scores(a.layer_, X).mean()) == pytest.approx(a.best_score_, abs=1e-6)
    b = LayerTrainer(n_steps=10, lr=1e-3, random_state=0, **TINY).fit()
    np.testing.assert_array_equal(a.history_["loss"], b.history_["loss"])
    assert a.search_ == b.search_


def test_the_searched_circuit_beats_lloyd_on_its_tasks():
    trainer = LayerTrainer(n_steps=0, random_state=0, **{**TINY, "n_val_tasks": 32}).fit()
    assert trainer.best_step_ == 0
    assert trainer.best_score_ < trainer.lloyd_score_ - 0.05


def test_training_from_random_weights_lowers_the_loss():
    trainer = LayerTrainer(init="random", n_steps=40, lr=0.01, loss_gamma=10.0, unroll=1,
                           random_state=0, **TINY).fit()
    loss = np.array(trainer.history_["loss"])
    assert loss[-10:].mean() < loss[:5].mean() - 0.1
    assert trainer.gamma_ is None and trainer.search_ == []


@pytest.mark.parametrize("kwargs, match", [
    (dict(val_every=0), "val_every must be an integer >= 1"),
    (dict(dropout=1), r"dropout must be a number in \[0, 1\)"),
    (dict(init="bogus"), "init must be 'circuit' or 'random'"),
    (dict(scratch=False), "init='circuit' needs the one-hot scratch space"),
    (dict(random_state=1.5), "random_state must be an int or None"),
    (dict(n_features=3.7), "n_features must be an integer >= 1"),
    (dict(lr=0), r"lr must be a number in \(0, inf\)"),
    (dict(noise="normal"), "noise must be one of"),
    (dict(n_samples=2), "n_samples=2 should be >= n_clusters=3"),
])
def test_bad_trainer_settings_are_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LayerTrainer(**{**TINY, **kwargs}).fit()


def test_random_state_none_trains():
    trainer = LayerTrainer(n_steps=2, random_state=None, **{**TINY, "n_val_tasks": 4}).fit()
    assert np.isfinite(trainer.best_score_)


def test_checkpoint_resumes_an_interrupted_run(tmp_path):
    path = str(tmp_path / "run.ckpt")
    settings = dict(lr=1e-3, random_state=3, **TINY)
    LayerTrainer(n_steps=10, checkpoint=path, **settings).fit()  # "interrupted"
    assert os.path.exists(path)
    resumed = LayerTrainer(n_steps=20, checkpoint=path, **settings).fit()
    straight = LayerTrainer(n_steps=20, **settings).fit()
    assert len(resumed.history_["loss"]) == 20
    assert resumed.search_ == straight.search_
    np.testing.assert_allclose(resumed.history_["loss"], straight.history_["loss"], rtol=1e-5)
    for a, b in zip(resumed.layer_.parameters(), straight.layer_.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_checkpoints_refuse_other_settings_and_damage(tmp_path):
    path = str(tmp_path / "run.ckpt")
    settings = dict(n_steps=5, random_state=3, **TINY)
    LayerTrainer(checkpoint=path, **settings).fit()
    for change in (dict(n_features=5), dict(random_state=4), dict(lr=1e-3)):
        name = next(iter(change))
        with pytest.raises(ValueError, match=f"{name}=.* there, .* here"):
            LayerTrainer(checkpoint=path, **{**settings, **change}).fit()
    damaged = tmp_path / "damaged.ckpt"
    for content in (b"", open(path, "rb").read()[:300]):
        damaged.write_bytes(content)
        with pytest.raises(ValueError, match="damaged.ckpt is not a readable LayerTrainer"):
            LayerTrainer(checkpoint=str(damaged), **settings).fit()
    with open(damaged, "wb") as f:
        pickle.dump({"format": "sktransformer.LayerTrainer", "x": _Evil()}, f)
    with pytest.raises(ValueError, match="damaged.ckpt is not a readable"):
        LayerTrainer(checkpoint=str(damaged), **settings).fit()
    assert not os.path.exists("/tmp/sktransformer-pwned")
    torch.save({"hello": 1}, damaged)
    with pytest.raises(ValueError, match="damaged.ckpt is not a LayerTrainer checkpoint"):
        LayerTrainer(checkpoint=str(damaged), **settings).fit()
    state = torch.load(path, weights_only=True)
    state["best_state"]["weight.assign_Q"] = torch.zeros(2, 2)
    torch.save(state, damaged)
    with pytest.raises(ValueError, match="damaged.ckpt is a damaged LayerTrainer checkpoint"):
        LayerTrainer(checkpoint=str(damaged), **settings).fit()


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


def test_version_1_files_load_without_normalization(tmp_path):
    layer = LearnedKMeansLayer(4, 3, normalize=False)
    payload = {"format": "sktransformer.LearnedKMeansLayer", "version": 1,
               **{k: v for k, v in layer.config().items() if k != "normalize"},
               "state_dict": layer.state_dict()}
    torch.save(payload, tmp_path / "v1.pt")
    assert LearnedKMeansLayer.load(tmp_path / "v1.pt").normalize is False


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch /tmp/sktransformer-pwned",))


def test_tampered_and_truncated_files_are_clear_errors(tmp_path):
    good = tmp_path / "good.pt"
    LearnedKMeansLayer(4, 3).save(good)
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good.read_bytes()[:500])
    with pytest.raises(ValueError, match="damaged LearnedKMeansLayer weights file"):
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
    payload = _read(good)
    payload["state_dict"]["weight.assign_Q"] = torch.zeros(3, 3)
    _write(payload, other)
    with pytest.raises(ValueError, match="missing or mis-shaped weights"):
        LearnedKMeansLayer.load(other)
    payload["state_dict"]["weight.assign_Q"] = torch.full((7, 7), float("nan"))
    _write(payload, other)
    with pytest.raises(ValueError, match="non-finite"):
        LearnedKMeansLayer.load(other)


@pytest.mark.parametrize("value", [
    torch.zeros(7, 7, dtype=torch.float8_e4m3fn),
    torch.zeros(7, 7).to_sparse(),
    torch.zeros(7, 7, dtype=torch.int32),
    torch.zeros(7, 7, dtype=torch.complex64),
])
def test_weights_of_an_unreadable_kind_are_clear_errors(tmp_path, value):
    payload = _read(_saved(tmp_path))
    payload["state_dict"]["weight.assign_Q"] = value
    _write(payload, tmp_path / "odd.pt")
    with pytest.raises(ValueError, match="weight.assign_Q is not a dense tensor of float16"):
        LearnedKMeansLayer.load(tmp_path / "odd.pt")


def test_version_2_files_without_a_hash_still_load(tmp_path):
    layer = LearnedKMeansLayer(4, 3)
    payload = {"format": "sktransformer.LearnedKMeansLayer", "version": 2,
               **layer.config(), "state_dict": layer.state_dict()}
    torch.save(payload, tmp_path / "v2.pt")
    loaded = LearnedKMeansLayer.load(tmp_path / "v2.pt")
    for a, b in zip(layer.parameters(), loaded.parameters()):
        assert torch.equal(a, b)
    # a hashed version written as a bare archive is not taken for an old file
    payload["version"] = 3
    torch.save(payload, tmp_path / "v3.pt")
    with pytest.raises(ValueError, match="version 3"):
        LearnedKMeansLayer.load(tmp_path / "v3.pt")


def test_the_shipped_weights_are_hashed():
    from sktransformer.cluster import _learned

    with open(_learned.SHIPPED, "rb") as f:
        assert f.read(len(_learned.MAGIC)) == _learned.MAGIC


@pytest.mark.parametrize("field, value, match", [
    ("n_features", -3, "n_features must be a positive integer"),
    ("n_features", 3.7, "n_features must be a positive integer"),
    ("n_features", "4", "n_features must be a positive integer"),
    ("n_clusters", None, "n_clusters must be a positive integer"),
    ("scratch", "no", "scratch must be True or False"),
    ("a", float("inf"), "a must be a positive finite number"),
    ("dropout", 2.0, "dropout must be in"),
])
def test_weight_file_settings_are_validated(tmp_path, field, value, match):
    payload = _read(_saved(tmp_path))
    payload[field] = value
    _write(payload, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match=f"bad.pt has invalid settings: {match}"):
        LearnedKMeansLayer.load(tmp_path / "bad.pt")


def test_declared_shapes_are_checked_before_anything_is_allocated(tmp_path, monkeypatch):
    payload = _read(_saved(tmp_path))
    payload["n_features"] = 5000  # a small file declaring a 5010 x 5010 layer
    _write(payload, tmp_path / "bomb.pt")

    def no_layer(*args, **kwargs):
        raise AssertionError("a layer was made before the shapes were checked")
    monkeypatch.setattr(LearnedKMeansLayer, "__init__", no_layer)
    with pytest.raises(ValueError, match=r"mis-shaped weights: weight\.\w+ has shape"):
        LearnedKMeansLayer.load(tmp_path / "bomb.pt")


def test_every_bit_flip_of_a_weight_file_is_detected(tmp_path):
    """Single-bit flips anywhere in a weights file, and in each of its parts (the magic,
    the hash, the archive's tensors): each a ValueError at load."""
    data = bytearray(_saved(tmp_path, LearnedKMeansLayer.from_circuit(4, 3)).read_bytes())
    rng = np.random.default_rng(0)
    positions = (list(range(0, 36, 3)) + list(rng.integers(len(data) - 2500, len(data), 30))
                 + list(rng.integers(0, len(data), 30)))
    for i, position in enumerate(positions):
        flipped = bytearray(data)
        flipped[position] ^= 1 << int(rng.integers(8))
        path = tmp_path / f"flip{i}.pt"
        path.write_bytes(bytes(flipped))
        with pytest.raises(ValueError, match="damaged|not a"):
            LearnedKMeansLayer.load(path)


def _read(path):
    from sktransformer.cluster._learned import unpack

    return unpack(path.read_bytes(), path)[0]


def _write(payload, path):
    from sktransformer.cluster._learned import pack

    path.write_bytes(pack(payload))


def _saved(tmp_path, layer=None):
    path = tmp_path / "saved.pt"
    (layer or LearnedKMeansLayer(4, 3)).save(path)
    return path


# -- the estimator -------------------------------------------------------------------------


def test_estimator_runs_a_layer_of_your_own_and_checks_its_shape(tmp_path):
    trainer = LayerTrainer(n_steps=10, random_state=0, **TINY).fit()
    X, _ = make_gmm_tasks(1, n_samples=200, n_features=4, n_clusters=3, random_state=9)
    X = X[0].astype(np.float64) * 7 - 3  # any scale: the estimator min-max scales
    km = TransformerKMeans(3, weights=trainer.layer_, max_iter=5, random_state=0,
                           device="cpu").fit(X)
    assert km.cluster_centers_.shape == (3, 4) and km.cluster_centers_.dtype == np.float64
    np.testing.assert_array_equal(km.predict(X), km.labels_)
    assert km.inertia_ == pytest.approx(km.inertia(X))
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


def test_a_layer_whose_output_overflows_is_a_clear_error():
    layer = LearnedKMeansLayer.from_circuit(4, 3)
    with torch.no_grad():
        layer.weight["update_V"].mul_(1e36)  # finite weights, centers beyond float32
    X, _ = make_gmm_tasks(1, n_samples=100, n_features=4, n_clusters=3, random_state=0)
    with pytest.raises(ValueError, match="non-finite centers at layer"):
        TransformerKMeans(3, weights=layer, device="cpu", random_state=0).fit(X[0])


def test_shipped_weights_load_on_cpu_and_beat_lloyd_on_unseen_tasks():
    layer = LearnedKMeansLayer.load(SHIPPED)
    assert (layer.n_features, layer.n_clusters, layer.scratch, layer.normalize) == (
        32, 10, True, True)
    assert os.path.getsize(SHIPPED) < 200_000
    X, _ = make_gmm_tasks(24, random_state=777)
    Xt = torch.from_numpy(X)
    learned, lloyd = evaluate(layer, Xt, Xt[:, :10], n_steps=20)
    # the paper's Lloyd (empty clusters keep their center), after 20 steps: the bar
    assert learned[20] < 4.9 and learned[20] < lloyd[20] - 0.3
    # scikit-learn's Lloyd (relocation of empty clusters) from the same starts
    relocating = np.mean([np.log(KMeans(10, init=x[:10], n_init=1, max_iter=20, tol=0)
                                 .fit(x).inertia_) for x in X.astype(np.float64)])
    assert learned[20] < relocating - 0.3
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


def test_a_layer_that_makes_the_clustering_worse_is_reported():
    X, _ = make_gmm_tasks(1, n_samples=200, n_features=4, n_clusters=3, random_state=0)
    untrained = LearnedKMeansLayer(4, 3, generator=torch.Generator().manual_seed(0))
    with pytest.warns(ConvergenceWarning, match="learned layer made the clustering worse"), \
            pytest.warns(UserWarning, match="still its random initialization"):
        TransformerKMeans(3, weights=untrained, device="cpu", random_state=0,
                          max_iter=5).fit(X[0])
    # the exact circuit as a layer: Lloyd's, which never raises the inertia
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        TransformerKMeans(3, weights=LearnedKMeansLayer.from_circuit(4, 3), device="cpu",
                          random_state=0).fit(X[0])
