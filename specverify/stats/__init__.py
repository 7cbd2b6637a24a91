"""Statistics for conformance decisions: every test states its level and its power.

* :func:`gof_test`: goodness of fit against an exact law (G-test, Monte Carlo, exact).
* :func:`samples_needed`, :func:`min_detectable_tv`, :func:`noncentrality`, :func:`power_of`:
  the sample size for a stated power against a total-variation deviation, and its inverse.
* :class:`AlphaBudget`, :func:`confirmation_alpha`: one false-positive budget for a whole run.
* :class:`SequentialTest`: an anytime-valid test that stops failing runs early.
* :func:`independence_test`, :func:`homogeneity_test`: outcomes that should not depend on each other.
* :func:`tv_estimate`: how lossy a lossy sampler is, with an interval.
* :func:`mean_test`: accepted drafts per call against the exact expectation.
"""

from ._budget import AlphaBudget, confirmation_alpha
from ._gof import GoodnessOfFit, gof_test
from ._independence import IndependenceTest, homogeneity_test, independence_test
from ._mean import MeanTest, mean_test
from ._power import min_detectable_tv, noncentrality, power_of, samples_needed
from ._sequential import SequentialTest
from ._tv import TVEstimate, tv_distance, tv_estimate

__all__ = [
    "AlphaBudget",
    "GoodnessOfFit",
    "IndependenceTest",
    "MeanTest",
    "SequentialTest",
    "TVEstimate",
    "confirmation_alpha",
    "gof_test",
    "homogeneity_test",
    "independence_test",
    "mean_test",
    "min_detectable_tv",
    "noncentrality",
    "power_of",
    "samples_needed",
    "tv_distance",
    "tv_estimate",
]
