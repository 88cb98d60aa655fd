"""Prediction-powered estimates of a mean: a few human labels correct the judge's number (docs/calibration.md).

PPI++ (Angelopoulos, Duchi and Zrnic, "PPI++: Efficient Prediction-Powered Inference", 2023): ``n`` labelled units
carry the people's value ``y`` and the judge's ``yhat``; ``N`` unlabelled units carry the judge's value only. The
estimate of the people's mean over the population is

    theta = lam * mean(yhat_unlabelled) + mean(y - lam * yhat)

unbiased for any fixed ``lam``; its 95% interval is ``theta +/- z * sqrt(lam^2 var(yhat_unlabelled) / N +
var(y - lam * yhat) / n)`` (variances with divisor n, as the method's package computes them). ``lam`` = 0 is the
people-only interval, ``lam`` = 1 plain PPI; by default ``lam`` is estimated from the data to minimise the variance,
``cov(y, yhat) / ((1 + n/N) var(yhat over all units))`` clipped to [0, 1], so the interval is asymptotically never
wider than the people-only one. Equal to ``ppi_py.ppi_mean_ci`` and ``ppi_mean_pointestimate`` (the authors'
package) on the same arrays; two cases the package leaves undefined are decided here: a judge that gives every unit
the same value carries no information (``lam`` = 0, not 0/0), and with no unlabelled unit the people-only estimate
is the answer (``lam`` = 0).

Pure: arrays in, numbers out.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["MIN_LABELLED", "Interval", "PPIEstimate", "Z95", "normal_mean", "power_tuning", "ppi_estimate",
           "ppi_mean"]

Z95 = NormalDist().inv_cdf(0.975)
MIN_LABELLED = 2  # fewer labelled units have no spread to build an interval from


@dataclass(frozen=True)
class Interval:
    value: float
    low: float
    high: float

    @property
    def width(self) -> float:
        return self.high - self.low


@dataclass(frozen=True)
class PPIEstimate:
    corrected: Interval  # PPI++ with the power-tuning lam below
    lam: float
    judge: Interval  # the judge's mean over every unit (labelled and unlabelled)
    people: Interval  # the people's mean over the labelled units
    bias: Interval  # judge - people on the labelled units
    n_labelled: int
    n_unlabelled: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _arrays(*values: ArrayLike) -> list[Any]:
    import numpy as np

    return [np.asarray(v, dtype=float).reshape(-1) for v in values]


def normal_mean(values: ArrayLike, z: float = Z95) -> Interval:
    """Mean and its normal (CLT) interval, standard deviation with divisor n: the interval PPI++ gives at lam = 0."""
    (data,) = _arrays(values)
    if len(data) == 0:
        raise ValueError("the mean of no values")
    mean = float(data.mean())
    half = z * float(data.std()) / math.sqrt(len(data))
    return Interval(mean, mean - half, mean + half)


def power_tuning(y: ArrayLike, yhat: ArrayLike, yhat_unlabelled: ArrayLike) -> float:
    """The variance-minimising lam, clipped to [0, 1]; 0 when the judge's values do not vary or nothing is
    unlabelled."""
    import numpy as np

    y_, yhat_, unlabelled = _arrays(y, yhat, yhat_unlabelled)
    n, big_n = len(y_), len(unlabelled)
    if big_n == 0:
        return 0.0
    spread = float(np.var(np.concatenate([yhat_, unlabelled]), ddof=1))
    if spread == 0.0:
        return 0.0
    covariance = float(((y_ - y_.mean()) * (yhat_ - yhat_.mean())).mean())
    return min(max(covariance / ((1 + n / big_n) * spread), 0.0), 1.0)


def ppi_mean(y: ArrayLike, yhat: ArrayLike, yhat_unlabelled: ArrayLike,
             lam: float | None = None, z: float = Z95) -> tuple[Interval, float]:
    """The PPI++ estimate of the people's mean and its interval, and the lam used (estimated when None)."""
    y_, yhat_, unlabelled = _arrays(y, yhat, yhat_unlabelled)
    n, big_n = len(y_), len(unlabelled)
    if n != len(yhat_):
        raise ValueError(f"{n} people's values but {len(yhat_)} judge's values on the labelled units")
    if n < MIN_LABELLED:
        raise ValueError(f"{n} labelled unit(s): at least {MIN_LABELLED} are needed for an interval")
    if lam is None:
        lam = power_tuning(y_, yhat_, unlabelled)
    if big_n == 0 and lam != 0.0:
        raise ValueError("no unlabelled unit: only lam = 0 (the people-only estimate) is defined")
    rectifier = y_ - lam * yhat_
    imputed = float((lam * unlabelled).mean()) if big_n else 0.0
    value = imputed + float(rectifier.mean())
    imputed_var = float((lam * unlabelled).std()) ** 2 / big_n if big_n else 0.0
    half = z * math.sqrt(imputed_var + float(rectifier.std()) ** 2 / n)
    return Interval(value, value - half, value + half), lam


def ppi_estimate(y: ArrayLike, yhat: ArrayLike, yhat_unlabelled: ArrayLike,
                 z: float = Z95) -> PPIEstimate:
    """The corrected mean (lam estimated) beside the judge-only, people-only and bias intervals."""
    y_, yhat_, unlabelled = _arrays(y, yhat, yhat_unlabelled)
    corrected, lam = ppi_mean(y_, yhat_, unlabelled, z=z)
    import numpy as np

    return PPIEstimate(corrected=corrected, lam=lam, judge=normal_mean(np.concatenate([yhat_, unlabelled]), z),
                       people=normal_mean(y_, z), bias=normal_mean(yhat_ - y_, z), n_labelled=len(y_),
                       n_unlabelled=len(unlabelled))
