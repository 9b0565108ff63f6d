"""Information-loss and class metrics (paper §6).

* DP = Σ |E|² over the equivalence classes (Eq. 2).
* NCP = Σ over rows and QIs of NCP_a (Eq. 3–4); see :mod:`sqlanon.generalization`
  for NCP_a of each generalization kind.
* GCP = NCP / (rows × |QI|), in [0, 1].
* C_AVG = (rows / classes) / k.

Every additive figure (rows, classes, DP, NCP and its per-attribute parts) of
disjoint fragments sums to the figure of their union, and ``min_class_size``
is the minimum of the parts', so :meth:`Metrics.combine` is exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, slots=True)
class Metrics:
    """Class statistics and information loss of one anonymized table or fragment."""

    rows: int
    classes: int
    min_class_size: int
    max_class_size: int
    dp: int
    ncp: float
    n_qi: int
    k: int
    l: int  # noqa: E741
    achieved_l: int | None = None
    ncp_by_attribute: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_classes(
        cls, sizes: np.ndarray, ncp_by_attribute: dict[str, float], *, k: int, l: int, achieved_l: int | None, n_qi: int
    ) -> Metrics:
        sizes = np.asarray(sizes, dtype=np.int64)
        return cls(
            rows=int(sizes.sum()),
            classes=len(sizes),
            min_class_size=int(sizes.min()) if len(sizes) else 0,
            max_class_size=int(sizes.max()) if len(sizes) else 0,
            dp=int((sizes * sizes).sum()),
            ncp=float(sum(ncp_by_attribute.values())),
            n_qi=n_qi,
            k=k,
            l=l,
            achieved_l=achieved_l,
            ncp_by_attribute=dict(ncp_by_attribute),
        )

    @classmethod
    def combine(cls, parts: list[Metrics]) -> Metrics:
        """Metrics of the union of disjoint fragments."""
        if not parts:
            raise ValueError("combine() needs at least one part")
        first = parts[0]
        attrs = {a: sum(p.ncp_by_attribute.get(a, 0.0) for p in parts) for a in first.ncp_by_attribute}
        ls = [p.achieved_l for p in parts if p.achieved_l is not None]
        return cls(
            rows=sum(p.rows for p in parts),
            classes=sum(p.classes for p in parts),
            min_class_size=min(p.min_class_size for p in parts),
            max_class_size=max(p.max_class_size for p in parts),
            dp=sum(p.dp for p in parts),
            ncp=sum(p.ncp for p in parts),
            n_qi=first.n_qi,
            k=first.k,
            l=first.l,
            achieved_l=min(ls) if ls else None,
            ncp_by_attribute=attrs,
        )

    @property
    def achieved_k(self) -> int:
        return self.min_class_size

    @property
    def mean_class_size(self) -> float:
        return self.rows / self.classes if self.classes else 0.0

    @property
    def c_avg(self) -> float:
        return self.mean_class_size / self.k

    @property
    def gcp(self) -> float:
        cells = self.rows * self.n_qi
        return self.ncp / cells if cells else 0.0

    def to_dict(self) -> dict:
        """A JSON-ready dict, derived figures included."""
        return {
            "rows": self.rows,
            "classes": self.classes,
            "min_class_size": self.min_class_size,
            "max_class_size": self.max_class_size,
            "mean_class_size": self.mean_class_size,
            "k": self.k,
            "l": self.l,
            "achieved_k": self.achieved_k,
            "achieved_l": self.achieved_l,
            "dp": self.dp,
            "ncp": self.ncp,
            "gcp": self.gcp,
            "c_avg": self.c_avg,
            "ncp_by_attribute": self.ncp_by_attribute,
        }
