"""Learned kernels: random features as particles, moved by Langevin dynamics on alignment.

The energy (``_hamiltonian``), the dynamics and the one particle-training function
(``_langevin``), the default dynamics' steps compiled (``_compiled``, its numba loop in
``_loops``), the choices made on held-out rows (``_selection``), the estimators
(``_particles``) and the importance-sampling baseline (``_importance``). The feature maps
themselves are attention's (``sktransformer.attention.features``).
"""

from ._hamiltonian import alignment, hamiltonian, potential, riesz_energy, target_codes
from ._importance import ImportanceSampledRFF
from ._langevin import langevin, train_particles
from ._particles import ParticleKernelClassifier, ParticleKernelSampler

__all__ = ["ImportanceSampledRFF", "ParticleKernelClassifier", "ParticleKernelSampler",
           "alignment", "hamiltonian", "langevin", "potential", "riesz_energy",
           "target_codes", "train_particles"]
