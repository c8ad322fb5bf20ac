"""The token-level circuit: its weights are the paper's, and its layers are Lloyd's."""

import numpy as np
import pytest
import torch

from sktransformer.cluster import KMeansCircuit

from . import reference


def test_blocks_are_the_papers_projections():
    d, k = 3, 4
    circuit = KMeansCircuit(d, k)
    p_x = torch.diag(torch.tensor([1.0] * d + [0.0] * k, dtype=torch.float64))
    p_y = torch.diag(torch.tensor([0.0] * d + [1.0] * k, dtype=torch.float64))
    expected = {
        "assign": (p_x, p_x, p_y),
        "reset_points": (p_x, p_x, -p_y),
        "update": (p_y, p_y, p_x),
        "reset_centers": (p_y, p_y, -p_x),
    }
    assert set(circuit.blocks) == set(expected)
    for name, (q, k_, v) in expected.items():
        torch.testing.assert_close(circuit.blocks[name]["Q"], q)
        torch.testing.assert_close(circuit.blocks[name]["K"], k_)
        torch.testing.assert_close(circuit.blocks[name]["V"], v)
    # 12 matrices of size D x D, D = d + k, independent of n
    assert sum(m.numel() for b in circuit.blocks.values() for m in b.values()) == 12 * (d + k) ** 2


def test_dot_form_scores_negative_squared_distance():
    X = torch.randn(7, 3, dtype=torch.float64)
    C = torch.randn(4, 3, dtype=torch.float64)
    circuit = KMeansCircuit(3, 4, attention="dot")
    points, centers = circuit.embed(X, C)
    blk = circuit.blocks["assign"]
    scores = (points @ blk["Q"].T) @ (centers @ blk["K"].T).T
    torch.testing.assert_close(scores, -torch.cdist(X, C) ** 2)
    # the quadratic FFN rewrites ||c||^2 after the centers move
    moved = centers.clone()
    moved[:, :3] += 1.0
    ffn = circuit.ffn
    out = moved + (moved @ ffn["W_in"].T).square() @ ffn["W_out"].T + moved @ ffn["W_skip"].T
    torch.testing.assert_close(out[:, -1], (C + 1.0).square().sum(1))


@pytest.mark.parametrize("attention", ["euclidean", "dot"])
@pytest.mark.parametrize("n_layers", [1, 2, 5])
def test_hard_circuit_is_lloyd(attention, n_layers):
    X, init = reference.blobs(scale=2.0)
    labels_ref, centers_ref = reference.lloyd(X, init, n_layers)[-1]
    circuit = KMeansCircuit(3, 4, attention=attention)
    centers, labels = circuit(torch.from_numpy(X), torch.from_numpy(init), n_layers=n_layers)
    np.testing.assert_allclose(centers.numpy(), centers_ref, rtol=1e-10, atol=1e-10)
    # labels are those of the last assignment, made against the previous centers
    np.testing.assert_array_equal(labels.numpy(), labels_ref)


@pytest.mark.parametrize("attention", ["euclidean", "dot"])
def test_soft_circuit_with_linear_update_is_soft_kmeans(attention):
    X, init = reference.blobs(scale=2.0)
    r_ref, centers_ref = reference.soft_kmeans(X, init, 4, temperature=3.0)[-1]
    circuit = KMeansCircuit(3, 4, temperature=3.0, attention=attention, center_update="linear")
    centers, _ = circuit(torch.from_numpy(X), torch.from_numpy(init), n_layers=4)
    np.testing.assert_allclose(centers.numpy(), centers_ref, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_soft_circuit_at_gamma_1e4_follows_lloyd(dtype):
    # The paper's check (gamma = 1e4, d = 2, k = 5, points in [0, 1]), on fewer points: the
    # token-level circuit materializes the n x n reset attention.
    rng = np.random.default_rng(3)
    means = rng.random((5, 2))
    X = np.concatenate([m + 0.05 * rng.normal(size=(300, 2)) for m in means])
    init = X[rng.choice(len(X), 5, replace=False)]
    history = reference.lloyd(X, init, 6)
    circuit = KMeansCircuit(2, 5, temperature=1e-4, center_update="linear")
    Xt, Ct = torch.tensor(X, dtype=dtype), torch.tensor(init, dtype=dtype)
    for n_layers, (labels_ref, centers_ref) in enumerate(history, start=1):
        centers, labels = circuit(Xt, Ct, n_layers=n_layers)
        # points within ~1e-4 of a boundary keep soft weights, so the trajectories agree to
        # a small fraction of the cluster spread (0.05), not to rounding
        np.testing.assert_allclose(centers.numpy(), centers_ref, atol=2e-3)
        assert np.mean(labels.numpy() == labels_ref) > 0.99
        # the paper reports the log objective to two decimals
        obj = np.log(reference.objective(X, centers.double().numpy()))
        assert obj == pytest.approx(np.log(reference.objective(X, centers_ref)), abs=5e-3)


def test_invalid_options_name_the_choices():
    with pytest.raises(ValueError, match="choose 'euclidean' or 'dot'"):
        KMeansCircuit(2, 2, attention="cosine")
    with pytest.raises(ValueError, match="choose 'softmax' or 'linear'"):
        KMeansCircuit(2, 2, center_update="mean")
