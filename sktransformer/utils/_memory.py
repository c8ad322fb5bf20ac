"""One estimate before a parameter sizes a tensor: a typo (``n_candidates=10**9``) is an
error that names the parameter, raised before anything is allocated."""

LIMIT_BYTES = 10**9  # what a parameter or input shape may make one fit allocate: 1 GB


def check_allocation(name, value, n_bytes, *, limit=LIMIT_BYTES, fix=None):
    """Raise a ValueError naming ``name`` when the ``n_bytes`` that ``name=value`` implies
    exceed ``limit`` (``name`` may be an input's dimension, ``fix`` then says what to
    do)."""
    if n_bytes > limit:
        raise ValueError(f"{name}={value} would allocate about {n_bytes / 2**30:.1f} GiB "
                         f"(more than {limit / 1e9:.0f} GB): {fix or f'lower {name}'}.")
