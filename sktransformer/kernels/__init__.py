"""Learned kernels: random features as particles, moved by Langevin dynamics on alignment.

Feature maps (``_features``), the energy (``_hamiltonian``), the dynamics (``_langevin``),
the estimators (``_particles``) and the importance-sampling baseline (``_importance``).
"""

from ._importance import ImportanceSampledRFF
from ._particles import ParticleKernelClassifier, ParticleKernelSampler

__all__ = ["ImportanceSampledRFF", "ParticleKernelClassifier", "ParticleKernelSampler"]
