"""Scores: how well a query matches a key, and the token algebra that computes them.

A score is called as a function, ``score(queries (..., n, d), keys (..., m, d)) -> (..., n,
m)`` (higher is closer), and owns the algebra that evaluates a distance-based score as one
matmul of augmented tokens, which every fast path uses:

* point (query) tokens are ``[x, slots(x), 1]`` (:meth:`Score.slots` writes the extra
  columns; the last is the constant 1 whose sum is a cluster's weight);
* :meth:`Score.keys` makes the key tokens, so that ``s = query_token . key_token`` is the
  score up to a per-query constant;
* ``translation_invariant`` says whether the fast paths may shift the data by its mean
  (for precision) before scoring;
* :meth:`Score.sq_dist` turns ``s`` back into the squared distance, and
  :meth:`Score.logits` into the softmax logit of ``-d^2 / temperature`` (up to a
  per-query constant).

A new score is a subclass registered in :data:`SCORES`; the estimators accept every key of
the registry as their ``attention``.
"""

import torch


def _sq_norms(x):
    return x.square().sum(-1, keepdim=True)


class Score:
    """Base of the scores: subclasses set ``name``, ``n_slots``, ``logit_scale`` and
    implement ``__call__``, ``slots``, ``keys`` and ``sq_dist``."""

    name = None
    n_slots = 1  # extra point-token columns, the constant 1 last
    constant_slots = False  # whether slots() writes constants (once per token buffer)
    logit_scale = 1.0
    translation_invariant = True  # a common shift of queries and keys keeps the scores

    def __call__(self, queries, keys):
        raise NotImplementedError

    def prepare(self, x):
        """Per-point quantity :meth:`slots` and :meth:`sq_dist` need, (...,)."""
        return self.from_sq_norms(x.square().sum(-1))

    def from_sq_norms(self, sq):
        """:meth:`prepare` from the squared norms ``||x||^2`` (for sparse points):
        ``||x||^2`` itself unless a score says otherwise."""
        return sq

    def slots(self, prepared, out):
        """Write the extra columns of the point tokens into ``out`` (..., n_slots)."""
        raise NotImplementedError

    def keys(self, k):
        """Key tokens (..., m, d + n_slots) of the keys ``k`` (..., m, d)."""
        raise NotImplementedError

    def sq_dist(self, s, prepared, out=None):
        """Squared distance from the augmented score ``s`` and the query's :meth:`prepare`
        (into ``out`` when given, which may be ``s``)."""
        raise NotImplementedError

    def logits(self, s, prepared, temperature):
        """Softmax logits of ``-d^2 / temperature`` up to a per-query constant; may reuse
        (overwrite) ``s``. ``logit_scale * s / temperature`` unless a score says otherwise."""
        return s.mul_(self.logit_scale / temperature)

    def queries(self, x):
        """Point tokens (..., n, d + n_slots) of ``x`` (..., n, d), in one tensor."""
        out = x.new_empty(*x.shape[:-1], x.shape[-1] + self.n_slots)
        out[..., :x.shape[-1]] = x
        self.slots(self.prepare(x), out[..., x.shape[-1]:])
        return out

    def __repr__(self):
        return f"{type(self).__name__}()"


class Euclidean(Score):
    """Negative squared Euclidean distance, ``-||q - k||^2`` (Theorem 2.1's attention).

    Tokens ``[x, 1]`` and ``[k, -||k||^2/2]`` score ``s = x.k - ||k||^2/2``: so
    ``||x - k||^2 = ||x||^2 - 2 s`` and the logit is ``2 s / t``."""

    name = "euclidean"
    n_slots = 1
    constant_slots = True
    logit_scale = 2.0

    def __call__(self, queries, keys):
        """Computed as ``2 q.k - ||q||^2 - ||k||^2`` (one matmul), clipped at 0 from above
        so that rounding never makes a distance negative."""
        q_sq = _sq_norms(queries)
        k_sq = _sq_norms(keys).transpose(-1, -2)
        if queries.dim() == keys.dim() == 2:
            scores = torch.addmm(k_sq, queries, keys.T, beta=-1.0, alpha=2.0)
        else:
            scores = 2.0 * (queries @ keys.transpose(-1, -2)) - k_sq
        return scores.sub_(q_sq).clamp_(max=0.0)

    def slots(self, prepared, out):
        out[..., 0] = 1.0
        return out

    def keys(self, k):
        return torch.cat([k, -0.5 * _sq_norms(k)], -1)

    def sq_dist(self, s, prepared, out=None):
        return torch.add(prepared, s, alpha=-2.0, out=out)


class Dot(Score):
    """Dot-product attention, ``<q, k>``.

    On the tokens of Theorem 2.2 it is the Euclidean score exactly: ``[x, ||x||^2, 1]``
    and ``[2k, -1, -||k||^2]`` give ``s = -||x - k||^2``."""

    name = "dot"
    n_slots = 2
    logit_scale = 1.0

    def __call__(self, queries, keys):
        return queries @ keys.transpose(-1, -2)

    def slots(self, prepared, out):
        out[..., 0] = prepared
        out[..., 1] = 1.0
        return out

    def keys(self, k):
        sq = _sq_norms(k)
        return torch.cat([2.0 * k, -torch.ones_like(sq), -sq], -1)

    def sq_dist(self, s, prepared, out=None):
        return torch.neg(s, out=out)


class Cosine(Score):
    """Cosine similarity, ``<q, k> / (||q|| ||k||)``: the angle alone.

    Tokens ``[x, 1]`` and ``[k / ||k||, 0]`` score ``s = x . k / ||k||``; the squared
    distance is the chord's, ``2 - 2 s / ||x||`` (2 for a zero row)."""

    name = "cosine"
    n_slots = 1
    constant_slots = True
    logit_scale = 2.0
    translation_invariant = False

    def __call__(self, queries, keys):
        q = queries / queries.norm(dim=-1, keepdim=True).clamp(min=_TINY)
        k = keys / keys.norm(dim=-1, keepdim=True).clamp(min=_TINY)
        return q @ k.transpose(-1, -2)

    def from_sq_norms(self, sq):
        return sq.sqrt()

    def slots(self, prepared, out):
        out[..., 0] = 1.0
        return out

    def keys(self, k):
        unit = k / k.norm(dim=-1, keepdim=True).clamp(min=_TINY)
        return torch.cat([unit, torch.zeros_like(unit[..., :1])], -1)

    def sq_dist(self, s, prepared, out=None):
        return torch.div(s, prepared.clamp(min=_TINY), out=out).mul_(-2.0).add_(2.0)

    def logits(self, s, prepared, temperature):
        return s.mul_(self.logit_scale / temperature).div_(prepared.clamp(min=_TINY))


_TINY = 1e-30
SCORES = {score.name: score for score in (Euclidean(), Dot(), Cosine())}
neg_sq_euclidean = SCORES["euclidean"]
dot = SCORES["dot"]


def get_score(name):
    """The score registered under ``name`` (a :class:`Score`; callable as a function)."""
    if isinstance(name, Score):
        return name
    try:
        return SCORES[name]
    except KeyError:
        raise ValueError(f"Unknown score {name!r}; choose one of {sorted(SCORES)}.") from None
