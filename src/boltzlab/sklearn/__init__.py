"""scikit-learn estimators built on boltzlab (docs/architecture.md, "scikit-learn").

:class:`BernoulliRBM` drops in for ``sklearn.neural_network.BernoulliRBM`` — same constructor,
``fit``/``partial_fit``/``transform``/``gibbs``/``score_samples`` and fitted attributes — and
adds boltzlab's training algorithms and operators, ``score_samples`` as ``log p(v)`` from an
exact or estimated ``log Z`` (it says which), and ``sample``. Importing ``boltzlab`` does not
import this package (nor scikit-learn's estimator machinery): ``from boltzlab.sklearn import
BernoulliRBM``.
"""

from boltzlab.sklearn.rbm import BernoulliRBM

__all__ = ["BernoulliRBM"]
