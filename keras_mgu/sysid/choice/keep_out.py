"""What keeps a trained run out of the choice: the run-off box, the stress experiments, the edges.

:class:`KeepOutChecks` is a base of :class:`~keras_mgu.sysid.choice.restarts.Restarts`
(it reads the restarts' ``data``, ``first``, ``options``, ``held_out``,
``held_out_at``, ``scored_start`` and ``arx_run``). For each scored run it says

* where its free runs leave the output box (:meth:`~KeepOutChecks._ran_off`,
  :mod:`~keras_mgu.sysid.choice.runoff`): the estimation record (or its
  held-out part), the validation record, and the stress experiments, each
  where the least-squares ARX model stays in the box on it
  (:meth:`~KeepOutChecks.stress_applies`): such a run is not kept;
* its error on the validation record's samples at the estimation record's
  edges beside the ARX model's (:meth:`~KeepOutChecks._edge`,
  :mod:`~keras_mgu.sysid.judging.edges`): reported, and acted on with
  ``RecipeConfig(edge_guard=True)``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from keras_mgu.datasets import Record, SysIdData
from keras_mgu.sysid.choice.candidates import Structure
from keras_mgu.sysid.choice.runoff import (
    STRETCH,
    OutputBox,
    describe_exit,
    stress_input,
    stretched_input,
)
from keras_mgu.sysid.identification import Identification
from keras_mgu.sysid.judging.edges import EdgeCheck, edge_check, edge_mask

__all__ = ["REVERSED", "STRETCHED", "KeepOutChecks"]

#: The stress experiments' names (:mod:`~keras_mgu.sysid.choice.runoff`), as the report says them.
REVERSED, STRETCHED = (
    "the estimation inputs then reversed",
    f"the estimation inputs stretched {STRETCH:g} times",
)


class KeepOutChecks:
    """The checks that keep a run out of the choice (module docstring)."""

    def init_checks(self, data: SysIdData) -> None:
        """The box, the stress experiments and the edge samples of ``data``."""
        #: The range no free run may leave (:mod:`~keras_mgu.sysid.choice.runoff`).
        self.box = OutputBox.of(data.estimation.y)
        #: The stress experiments' inputs (:mod:`~keras_mgu.sysid.choice.runoff`), by name.
        u = data.estimation.u
        self.stresses = {REVERSED: stress_input(u), STRETCHED: stretched_input(u)}
        self._applies: dict[str, bool] = {}  # whether each stress experiment applies
        #: The validation record's samples at the estimation record's edges
        #: (:mod:`~keras_mgu.sysid.judging.edges`).
        self.edges = edge_mask(data.estimation, data.validation)
        self._edge_reference: tuple | None = None
        self._arx_reference: tuple | None = None  # (the ARX identification or None,), once made

    def _stretched(self, option: Structure) -> Record | None:
        """The stretched experiment as ``option`` sees it (its inputs, the estimation
        outputs), where it applies (:meth:`stress_applies`); None otherwise."""
        if not self.stress_applies(STRETCHED):
            return None
        stretched = dataclasses.replace(
            self.data.estimation, u=self.stresses[STRETCHED], name=STRETCHED
        )
        return option.path.trimmed(stretched)

    def _ran_off(self, single: Identification, horizons: list, test_like: np.ndarray) -> str | None:
        """Where the run's free runs leave :attr:`box` (:mod:`~keras_mgu.sysid.choice.runoff`).

        The estimation record's (its held-out start's, where one is held
        out) and the validation record's free runs are those scored
        (``horizons``, ``test_like``: standardised errors after the first
        ``n`` measured samples); the stress experiment is simulated
        where it applies (:meth:`stress_applies`).
        """
        est, val, head = self.data.estimation, self.data.validation, self.scored_start
        names = est.output_names
        std, n = np.asarray(single.path.outer.y_std), single.measured_n()
        pieces = [(first, stop) for first, stop in head.experiments if stop - first > n]
        where = "the estimation record"
        where += "" if self.held_out is None else f"'s held-out {self.held_out_at}"
        checks = [
            (where, head.y[first + n : stop] + e * std, first + n)
            for (first, stop), e in zip(pieces, horizons, strict=True)
        ]
        m = min(n, val.n_samples - 1)
        checks.append(("the validation record", val.y[m:] + test_like * std, m))
        for experiment, u in self.stresses.items():
            if not self.stress_applies(experiment):
                continue
            if single.config.initial_state == "learned":  # its state is the record's start
                checks.append((experiment, single.simulate(u), 0))
            else:
                checks.append((experiment, single.simulate(u, est.y[:n])[n:], n))
        for experiment, y, offset in checks:
            said = describe_exit(experiment, y, self.box, offset, names)
            if said is not None:
                return said
        return None

    def _edge(self, single: Identification, test_like: np.ndarray) -> EdgeCheck | None:
        """The run's :class:`~keras_mgu.sysid.judging.edges.EdgeCheck` against the
        least-squares ARX model (None without one)."""
        reference = self._reference()
        if reference is None:
            return None
        if self._edge_reference is None:  # the ARX model's validation error, and its first sample
            error = reference.test_like_error(self.data.validation)
            self._edge_reference = (error, self._scored_from(reference))
        return edge_check(self.edges, test_like, self._scored_from(single), *self._edge_reference)

    def _scored_from(self, single: Identification) -> int:
        """The first validation sample :meth:`~Identification.test_like_error` scores."""
        return min(single.measured_n(), self.data.validation.n_samples - 1)

    def stress_applies(self, experiment: str) -> bool:
        """Whether the least-squares ARX model stays in :attr:`box` on the stress
        experiment ``experiment`` (a key of :attr:`stresses`)."""
        if experiment not in self._applies:
            reference = self._reference()
            self._applies[experiment] = False
            if reference is not None:
                est, n = self.data.estimation, reference.measured_n()
                y = reference.simulate(self.stresses[experiment], est.y[:n])[n:]
                self._applies[experiment] = self.box.first_exit(y) is None
        return self._applies[experiment]

    def _reference(self) -> Identification | None:
        """The least-squares ARX model (``arx_run``) as an identification, made once; None
        where the record gives none."""
        if self._arx_reference is None:
            arx, made = self.arx_run(self.options[0].config), None
            if arx is not None:
                made = Identification([arx], 0, self.data.n_initial, self.first)
            self._arx_reference = (made,)
        return self._arx_reference[0]
