"""
Clustering torch embeddings where they are
==========================================

Embeddings usually come out of a torch model as a float32 tensor, often on a GPU. The
clustering estimators take that tensor as it is: ``device="auto"`` computes on the tensor's
device, float32 stays float32, and nothing is copied to numpy on the way in. Under
scikit-learn's ``array_api_dispatch`` the fitted centers and every output are tensors on the
same device too, so the labels can index the embeddings directly.

Here the "model" is a small torch network trained for a few seconds to map scikit-learn's
8x8 digits to 16-dimensional embeddings (a linear classifier on top of them reaches the
labels); the embeddings are clustered into 10 groups and compared with the digits.
"""

# %%
# scikit-learn's array API mode needs scipy's, switched on before scipy is imported
import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")

import matplotlib.pyplot as plt  # noqa: E402
import sklearn  # noqa: E402
import torch  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.metrics import adjusted_rand_score  # noqa: E402

from sktransformer import SphericalTransformerKMeans, TransformerKMeans  # noqa: E402

device = "cuda" if torch.cuda.is_available() else "cpu"
digits = load_digits()
X = torch.tensor(digits.data / 16.0, dtype=torch.float32, device=device)
y = torch.tensor(digits.target, device=device)

with torch.random.fork_rng():  # seed the example's model without touching the global seed
    torch.manual_seed(0)
    encoder = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(),
                                  torch.nn.Linear(64, 16)).to(device)
    head = torch.nn.Linear(16, 10).to(device)
optimizer = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=1e-2)
for _ in range(200):
    loss = torch.nn.functional.cross_entropy(head(encoder(X)), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
with torch.no_grad():
    embeddings = encoder(X)  # float32, on `device`
print(embeddings.dtype, embeddings.device, tuple(embeddings.shape))

# %%
# Fit on the tensor. With ``array_api_dispatch`` the results stay tensors on its device.
with sklearn.config_context(array_api_dispatch=True):
    kmeans = TransformerKMeans(10, random_state=0).fit(embeddings)
    spherical = SphericalTransformerKMeans(10, random_state=0).fit(embeddings)
print(type(kmeans.cluster_centers_).__name__, kmeans.cluster_centers_.dtype,
      kmeans.labels_.device)
for name, model in (("k-means", kmeans), ("spherical k-means", spherical)):
    ari = adjusted_rand_score(digits.target, model.labels_.cpu().numpy())
    print(f"{name}: adjusted Rand index against the digits {ari:.3f}")

# %%
# The labels index the embeddings directly: the members of each cluster, averaged on the
# device, are the centers again (a fixed point of Lloyd's layer).
members = torch.stack([embeddings[kmeans.labels_ == j].mean(0) for j in range(10)])
print("largest gap between member means and centers:",
      float((members - kmeans.cluster_centers_).abs().max()))

# %%
# A picture: the embeddings' first two principal directions (torch's PCA), colored by
# cluster, with the digits' mean image per cluster underneath.
_, _, V = torch.pca_lowrank(embeddings, q=2)
plane = ((embeddings - embeddings.mean(0)) @ V).cpu().numpy()
labels = kmeans.labels_.cpu().numpy()
fig = plt.figure(figsize=(9, 5.5))
top = fig.add_axes([0.05, 0.33, 0.9, 0.62])
top.scatter(plane[:, 0], plane[:, 1], c=labels, cmap="tab10", s=6)
top.set_title("digits embedded by a torch model, clustered on the tensor (k = 10)")
top.set_xticks([])
top.set_yticks([])
for j in range(10):
    ax = fig.add_axes([0.05 + 0.09 * j, 0.04, 0.08, 0.24])
    ax.imshow(digits.images[labels == j].mean(0), cmap="gray_r")
    ax.set_axis_off()
    ax.set_title(f"cluster {j}", fontsize=8)
plt.show()
