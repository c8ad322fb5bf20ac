"""One estimate before a parameter sizes a tensor: a typo (``n_candidates=10**9``) is an
error that names the parameter, raised before anything is allocated."""

LIMIT_BYTES = 2 << 30  # what a parameter may make one fit allocate: 2 GiB


def check_allocation(name, value, n_bytes, *, limit=LIMIT_BYTES):
    """Raise a ValueError naming ``name`` when the ``n_bytes`` that ``name=value`` implies
    exceed ``limit``."""
    if n_bytes > limit:
        raise ValueError(f"{name}={value} would allocate about {n_bytes / 2**30:.1f} GiB "
                         f"(more than {limit / 2**30:.0f} GiB): lower {name}.")
