"""
Learned kernels against fixed random features, as the budget grows
==================================================================

A kernel of ``N`` random features approximates an RBF kernel; the Coulomb particle model
moves the features' frequencies (the particles) so that the kernel aligns with the labels,
while a repulsion keeps them apart and a held-out part of the data picks the bandwidth and
the particles that are kept. Here on scikit-learn's handwritten digits (64 pixels, 10
classes): ``ParticleKernelClassifier`` against the same logistic regression on
``RBFSampler`` and ``Nystroem`` features, every model at its defaults, one stratified
train/test split. Left: test accuracy against the number of features. Right: the bandwidth
the particles settled on (a global scale of the frequencies; 1 is ``gamma="scale"``) and
the validation error that chose it, per validation of the dynamics.
"""

# %%
import matplotlib.pyplot as plt
from sklearn.datasets import load_digits
from sklearn.kernel_approximation import Nystroem, RBFSampler
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sktransformer import ParticleKernelClassifier

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y,
                                                    random_state=0)
budgets = [8, 16, 32, 64]
models = {
    "learned particles": lambda n: ParticleKernelClassifier(n, random_state=0, device="cpu"),
    "RBFSampler + LR": lambda n: make_pipeline(
        RBFSampler(gamma="scale", n_components=n, random_state=0),
        LogisticRegression(max_iter=1000)),
    "Nystroem + LR": lambda n: make_pipeline(Nystroem(n_components=n, random_state=0),
                                             LogisticRegression(max_iter=1000)),
}
scores = {name: [] for name in models}
for n in budgets:
    for name, make in models.items():
        model = make_pipeline(StandardScaler(), make(n)).fit(X_train, y_train)
        scores[name].append(model.score(X_test, y_test))
    print(f"{n:3d} features: " + ", ".join(f"{k} {v[-1]:.3f}" for k, v in scores.items()))

learned = make_pipeline(StandardScaler(), ParticleKernelClassifier(
    64, random_state=0, device="cpu")).fit(X_train, y_train)[-1]
history = learned.history_

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
for name, values in scores.items():
    left.plot(budgets, values, "o-", label=name)
left.set_xscale("log", base=2)
left.set_xticks(budgets, budgets)
left.set_xlabel("features")
left.set_ylabel("test accuracy")
left.legend()
left.set_title("digits, defaults")
right.plot(history["validation_step"], history["scale"], "o-", color="tab:purple",
           label="bandwidth scale")
right.set_xlabel("Langevin step")
right.set_ylabel("scale of the particles")
twin = right.twinx()
twin.plot(history["validation_step"], history["validation_error"], "s--", color="gray",
          label="validation error")
twin.set_ylabel("validation ridge error")
right.set_title(f"64 particles: kept step {learned.sampler_.best_iter_}, C = {learned.C_:g}")
fig.tight_layout()
plt.show()
