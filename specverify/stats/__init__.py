"""Statistics for conformance decisions: every test states its level and its power.

* :func:`gof_test`, :func:`gof_pvalues`: goodness of fit against an exact law (G-test, Monte
  Carlo, exact), for one check or a batch of them.
* :func:`samples_needed`, :func:`min_detectable_tv`, :func:`noncentrality`, :func:`power_of`:
  the sample size for a stated power against a total-variation deviation, and its inverse.
* :class:`AlphaBudget`, :func:`confirmation_alpha`, :func:`plan_two_stage`: one false-positive
  budget for a whole run, and two-stage (screen, then confirm) decisions inside it (the battery
  splits its budget with Bonferroni and confirms with :func:`confirmation_alpha`; the others are
  tools for designing a check).
* :class:`SequentialTest`, :func:`mixture_log_e_value`: an anytime-valid test that stops failing
  runs early (the battery's confirmations of the law given the drafts run one beside their
  fixed-sample test).
* :class:`FutilityPlan`: a fixed-sample decision with looks that stop passing runs early, its
  level and power kept (the loop family's decisions at a ``--tv`` budget).
* :func:`independence_test`, :func:`homogeneity_test`: outcomes that should not depend on each other.
* :func:`tv_estimate`: how lossy a lossy sampler is, with an interval.
* :func:`least_favourable`, :func:`chi_square_distance`: the planted deviation power is stated
  against.
* :func:`mean_test`: accepted drafts per call against the exact expectation.
* :func:`two_sample_test`, :func:`two_sample_samples_needed`, :func:`two_sample_min_tv`: two
  samples of unknown laws, one law? (an engine with speculation on against itself with it off), with
  the power two arms cost: twice the one-sample samples in each arm.
* :func:`identity_test`, :func:`identity_plan`, :func:`identity_min_tv`: the whole law over a
  large domain with samples growing like ``sqrt(cells) / eps^2`` (Acharya, Daskalakis and Kamath
  2015), level exact at any alpha.
"""

from ._alpha import AlphaBudget, TwoStagePlan, confirmation_alpha, plan_two_stage
from ._futility import FutilityPlan
from ._gof import GoodnessOfFit, gof_pvalues, gof_test
from ._identity import IdentityTest, identity_min_tv, identity_plan, identity_test
from ._independence import IndependenceTest, homogeneity_test, independence_test
from ._mean import MeanTest, mean_test
from ._planted import chi_square_distance, least_favourable
from ._power import min_detectable_tv, noncentrality, power_of, samples_needed
from ._sequential import SequentialTest, mixture_log_e_value
from ._tv import TVEstimate, tv_distance, tv_estimate
from ._two_sample import TwoSampleTest, two_sample_min_tv, two_sample_samples_needed, two_sample_test

__all__ = [
    "AlphaBudget",
    "FutilityPlan",
    "GoodnessOfFit",
    "IdentityTest",
    "IndependenceTest",
    "MeanTest",
    "SequentialTest",
    "TVEstimate",
    "TwoSampleTest",
    "TwoStagePlan",
    "chi_square_distance",
    "confirmation_alpha",
    "gof_pvalues",
    "gof_test",
    "homogeneity_test",
    "identity_min_tv",
    "identity_plan",
    "identity_test",
    "independence_test",
    "least_favourable",
    "mean_test",
    "min_detectable_tv",
    "mixture_log_e_value",
    "noncentrality",
    "plan_two_stage",
    "power_of",
    "samples_needed",
    "tv_distance",
    "tv_estimate",
    "two_sample_min_tv",
    "two_sample_samples_needed",
    "two_sample_test",
]
