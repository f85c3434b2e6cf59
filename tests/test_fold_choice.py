"""benchmarks/fold_choice.py: the two-fold class score, the runs for a class, the halves."""

import collections
import dataclasses
import math
import types

import pytest

from tests.helpers import BACKEND_INDEPENDENT, load_script

pytestmark = BACKEND_INDEPENDENT


@pytest.fixture(scope="module")
def fold_choice():
    return load_script("benchmarks", "fold_choice.py")


@dataclasses.dataclass
class Found:
    """What the script reads of an identification: its runs, the best one, the averaged ones."""

    runs: list
    best: int = 0
    members: tuple = ()

    @property
    def kept(self) -> tuple:
        return self.members or (self.best,)


def _run(structure, choice, ran_off=None):
    return types.SimpleNamespace(structure=structure, choice_rmse=choice, ran_off=ran_off)


def test_each_class_scores_its_best_run_that_did_not_run_off(fold_choice):
    found = Found([_run("narx", 0.3), _run("narx", 0.2), _run("polynomial", 0.01, "left"),
                   _run("polynomial", 0.5), _run("network", math.inf)])  # fmt: skip
    assert fold_choice.class_scores(found) == {"narx": 0.2, "polynomial": 0.5}


def test_the_class_kept_has_the_lowest_root_mean_square_over_the_folds(fold_choice):
    # narx: sqrt((0.1^2 + 0.5^2) / 2) = 0.361; polynomial: sqrt((0.3^2 + 0.3^2) / 2) = 0.3.
    folds = {
        "start": Found([_run("narx", 0.1), _run("polynomial", 0.3), _run("network", 0.05)]),
        "end": Found([_run("narx", 0.5), _run("polynomial", 0.3)]),
    }
    chosen, combined = fold_choice.two_fold_class(folds)
    assert chosen == "polynomial"  # the network, best in one fold, was not scored in the other
    assert set(combined) == {"narx", "polynomial"}
    assert combined["narx"] == pytest.approx(math.sqrt((0.01 + 0.25) / 2))
    assert combined["polynomial"] == pytest.approx(0.3)


def test_a_fold_stands_for_the_class_with_its_kept_model_or_its_best_run(fold_choice):
    runs = [_run("polynomial", 0.2), _run("narx", 0.4), _run("narx", 0.3), _run("narx", 0.1, "x")]
    chose_narx = Found(runs, best=2, members=(2, 2, 1))
    assert fold_choice.fold_members(chose_narx, "narx") == (2, 2, 1)
    chose_polynomial = Found(runs, best=0)
    assert fold_choice.fold_members(chose_polynomial, "narx") == (2,)  # run 3 ran off


def test_the_two_fold_model_weighs_each_fold_one_half(fold_choice):
    a = Found([_run("narx", 0.2), _run("narx", 0.3), _run("loop", 0.9)], best=0, members=(0, 1, 1))
    b = Found([_run("loop", 0.8), _run("narx", 0.25)], best=0)  # narx: its run 2 alone
    both = fold_choice.averaged({"start": a, "end": b}, "narx")
    assert both.runs == a.runs + b.runs
    weights = collections.Counter(both.members)
    total = sum(weights.values())
    # Fold A's members (1/3, 2/3 of its half), fold B's run 2 (index 3 + 1) the other half.
    shares = {k: c / total for k, c in weights.items()}
    assert shares == pytest.approx({0: 1 / 6, 1: 2 / 6, 4: 1 / 2})
