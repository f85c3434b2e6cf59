"""The polynomial NARX class: FROLS against a hand-computed case, the free run against a plain
loop written from the equation, the fit recovering a known polynomial plant, the guard."""

import math

import numpy as np
import pytest

from keras_mgu import sysid
from keras_mgu.datasets import Record, SysIdData
from keras_mgu.sysid.models.frols import candidate_terms, frols
from keras_mgu.sysid.models.polynomial import (
    PolynomialNarx,
    fit_polynomial,
    free_run_errors,
    lag_regressors,
    output_box,
    refit_polynomial,
)
from keras_mgu.sysid.models.polynomial_equation import (
    describe_polynomial,
    regressor_names,
    term_name,
)

numpy_only = pytest.mark.backend_independent


@numpy_only
def test_frols_chooses_by_error_reduction_ratio_as_computed_by_hand():
    # y = p1 + p2. By hand: y.y = 5; ERR(p1) = 2^2 / (1 * 5) = 0.8, ERR(p2) = 3^2 / (2 * 5) = 0.9,
    # ERR(p3) = 0, so p2 first (its coefficient alone: y.p2 / p2.p2 = 1.5). Then p1 orthogonal
    # to p2 is [0.5, -0.5, 0, 0]: ERR = 0.5^2 / (0.5 * 5) = 0.1; together y = 1 p2 + 1 p1 exactly,
    # and p3 explains nothing more, so it is not chosen.
    p = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    y = np.array([2.0, 1.0, 0.0, 0.0])
    chosen, err, coefficients = frols(p, y, max_terms=3)
    assert chosen.tolist() == [1, 0]
    np.testing.assert_allclose(err, [0.9, 0.1])
    np.testing.assert_allclose(coefficients, [[1.5, 0.0], [1.0, 1.0]])


@numpy_only
def test_frols_coefficients_are_least_squares_of_the_terms_chosen(rng):
    p = rng.standard_normal((200, 12))
    y = p[:, 3] * 2.0 - p[:, 7] + 0.1 * rng.standard_normal(200)
    chosen, err, coefficients = frols(p, y, max_terms=5)
    assert set(chosen[:2].tolist()) == {3, 7}
    for k in range(1, 6):
        expected = np.linalg.lstsq(p[:, chosen[:k]], y, rcond=None)[0]
        np.testing.assert_allclose(coefficients[k - 1, :k], expected, rtol=1e-8, atol=1e-10)
    # The ratios add up to the share of the energy explained by the five terms.
    residual = y - p[:, chosen] @ coefficients[-1]
    assert math.isclose(err.sum(), 1 - residual @ residual / (y @ y), rel_tol=1e-9)


@numpy_only
@pytest.mark.parametrize("width,degree", [(3, 1), (4, 2), (5, 3)])
def test_every_monomial_up_to_the_degree_is_a_candidate_once(width, degree):
    terms = candidate_terms(width, degree)
    assert len(terms) == math.comb(width + degree, degree)
    assert len({tuple(t) for t in terms}) == len(terms)
    assert tuple(terms[0]) == (width,) * 3  # the constant first


@numpy_only
def test_the_regressors_are_the_loop_cells_lags_in_its_order():
    u = np.arange(10.0)[:, None] * np.array([[1.0, 100.0]])
    y = np.arange(10.0)[:, None] * np.array([[-1.0]])
    r = lag_regressors(u, y, na=2, nb=3)
    # row t = 2: [y1, y0, u1 (both channels), u0 (both), u2 (both)]
    np.testing.assert_array_equal(r[0], [-1.0, 0.0, 1.0, 100.0, 0.0, 0.0, 2.0, 200.0])
    names = regressor_names(["a", "b"], ["y"], 2, 3)
    assert names == ["y(k-1)", "y(k-2)", "a(k-1)", "b(k-1)", "a(k-2)", "b(k-2)", "a(k)", "b(k)"]
    assert term_name((0, 0, 6), names) == "y(k-1)^2 a(k)"
    assert term_name((8, 8, 8), names) == "1"


def _mimo_model(limits=None) -> PolynomialNarx:
    # Two inputs, two outputs, na = 2, nb = 2: r = [y0(k-1), y1(k-1), y0(k-2), y1(k-2),
    # u0(k-1), u1(k-1), u0(k), u1(k)], width 8; index 8 is the constant.
    terms = np.array([[8, 8, 8], [0, 8, 8], [1, 8, 8], [2, 8, 8], [6, 8, 8], [7, 8, 8],
                      [0, 0, 0], [0, 1, 8], [4, 6, 8], [1, 1, 5]])  # fmt: skip
    coefficients = np.array([
        [0.01, -0.02], [1.2, 0.1], [0.05, 0.9], [-0.4, 0.0], [0.3, 0.0], [0.0, 0.2],
        [-0.08, 0.0], [0.0, 0.05], [0.1, 0.0], [0.0, -0.03],
    ])  # fmt: skip
    return PolynomialNarx(2, 2, 3, terms, coefficients, np.zeros_like(coefficients), 2, 2, limits)


def _reference_run(model: PolynomialNarx, u: np.ndarray, y0: np.ndarray) -> np.ndarray:
    """The free run written from the equation, one term at a time (no shared code)."""
    y = [list(row) for row in y0]
    for t in range(len(y0), len(u)):
        r = [y[t - 1][0], y[t - 1][1], y[t - 2][0], y[t - 2][1], *u[t - 1], *u[t], 1.0]
        out = []
        for i in range(model.n_outputs):
            total = 0.0
            for term, theta in zip(model.terms, model.coefficients[:, i]):
                total += theta * r[term[0]] * r[term[1]] * r[term[2]]
            if model.limits is not None:
                total = min(max(total, model.limits[0][i]), model.limits[1][i])
            out.append(total)
        y.append(out)
    return np.array(y)


@pytest.mark.parametrize("limits", [None, (np.array([-0.5, -2.0]), np.array([0.6, 2.0]))])
def test_the_free_run_matches_a_loop_written_from_the_equation(rng, limits):
    model = _mimo_model(limits)
    u = 0.5 * rng.standard_normal((120, 2))
    y0 = 0.1 * rng.standard_normal((2, 2))
    expected = _reference_run(model, u, y0)
    np.testing.assert_allclose(model.simulate_batch(u, y0)[0], expected, rtol=1e-10, atol=1e-12)
    keras_model = model.keras_model()
    got = keras_model.predict([u[None, :2], y0[None], u[None, 2:]], verbose=0)[0]
    np.testing.assert_allclose(got, expected[2:], atol=1e-4)
    if limits is not None:  # the guard binds somewhere in this run
        assert np.any(np.isclose(expected, limits[1])) or np.any(np.isclose(expected, limits[0]))


def _plant_record(rng, n: int, noise: float = 0.0) -> Record:
    """``y_k = 1.5 y_{k-1} - 0.7 y_{k-2} + 0.5 u_{k-1} - 0.2 y_{k-1}^3 + 0.1 u_{k-1} y_{k-2}``."""
    u = rng.uniform(-1.0, 1.0, n)
    y = np.zeros(n)
    for k in range(2, n):
        y[k] = (1.5 * y[k - 1] - 0.7 * y[k - 2] + 0.5 * u[k - 1] - 0.2 * y[k - 1] ** 3
                + 0.1 * u[k - 1] * y[k - 2])  # fmt: skip
    return Record(u[:, None], (y + noise * rng.standard_normal(n))[:, None])


@numpy_only
def test_the_fit_finds_a_known_polynomial_plant(rng):
    record = _plant_record(rng, 1500)
    est, val = Record(record.u[:1000], record.y[:1000]), Record(record.u[1000:], record.y[1000:])
    model, table = fit_polynomial(est, val, lags=(2, 3), degrees=(1, 3))
    assert len(table) == 4 and model.degree == 3
    names = regressor_names(["u"], ["y"], model.na, model.nb)
    found = {term_name(t, names): c for t, c in zip(model.terms, model.coefficients[:, 0])}
    expected = {"y(k-1)": 1.5, "y(k-2)": -0.7, "u(k-1)": 0.5, "y(k-1)^3": -0.2,
                "y(k-2) u(k-1)": 0.1}  # fmt: skip
    for name, value in expected.items():
        assert found[name] == pytest.approx(value, abs=1e-6)
    assert sum(abs(c) for name, c in found.items() if name not in expected) < 1e-6
    y_sim = model.simulate_batch(val.u, val.y[: model.lag])[0]
    np.testing.assert_allclose(y_sim, val.y, atol=1e-6)


@numpy_only
def test_a_refit_keeps_the_terms_and_is_least_squares_on_the_new_record(rng):
    record = _plant_record(rng, 1200, noise=0.02)
    est, val = Record(record.u[:500], record.y[:500]), Record(record.u[900:], record.y[900:])
    like, _ = fit_polynomial(est, val, lags=(2,), degrees=(3,))
    more = Record(record.u[:900], record.y[:900])
    refit = refit_polynomial(more, like)
    np.testing.assert_array_equal(refit.terms, like.terms)
    np.testing.assert_array_equal(refit.coefficients != 0, like.coefficients != 0)
    # The reference: each term's column built from its name, least squares on rows k >= 2.
    u, y = more.u[:, 0], more.y[:, 0]
    signals = {"y(k-1)": y[1:-1], "y(k-2)": y[:-2], "u(k-1)": u[1:-1], "u(k-2)": u[:-2],
               "u(k)": u[2:]}  # fmt: skip
    names = regressor_names(["u"], ["y"], like.na, like.nb)
    columns = []
    for term in like.terms:
        factors = [f for f in term_name(term, names).split(" ") if f != "1"]
        column = np.ones(len(y) - 2)
        for factor in factors:
            base, _, power = factor.partition("^")
            column = column * signals[base] ** int(power or 1)
        columns.append(column)
    expected = np.linalg.lstsq(np.stack(columns, axis=1), y[2:], rcond=None)[0]
    np.testing.assert_allclose(refit.coefficients[:, 0], expected, rtol=1e-6, atol=1e-9)
    assert not np.allclose(refit.coefficients, like.coefficients)


def test_a_model_that_runs_off_stays_finite_and_is_not_kept(rng):
    # y_k = 1.2 y_{k-1}^3 + u_k runs off from |y| > 1: the guard clamps it to the box, and the
    # choice scores it inf (its run leaves the estimation outputs' range by more than half).
    record = _plant_record(rng, 400)
    limits = output_box(record.y, 1.0)
    terms = np.array([[0, 0, 0], [1, 2, 2]])  # r = [y(k-1), u(k)]; index 2 is the constant
    runaway = PolynomialNarx(1, 1, 3, terms, np.array([[1.2], [1.0]]), np.zeros((2, 1)), 1, 1,
                             limits)  # fmt: skip
    start = record.y[:1] + 2.0
    y = runaway.simulate_batch(record.u, start)[0]
    assert np.all(np.isfinite(y)) and np.isclose(y.max(), limits[1][0])
    keras_y = runaway.keras_model().predict(
        [record.u[None, :1], start[None], record.u[None, 1:]], verbose=0
    )
    np.testing.assert_allclose(keras_y[0], y[1:], rtol=1e-5, atol=1e-5)
    sets = np.stack([runaway.coefficients, 0.5 * runaway.coefficients])
    total, count = free_run_errors(runaway, sets, record, output_box(record.y, 0.5), None)
    assert count == 399 and total[0] == np.inf and np.isfinite(total[1])


def _hardening_records() -> tuple[Record, Record, Record]:
    """The zoo's hardening oscillator (data seed 0), standardised as the recipe does: the
    estimation and validation records, and the stretched experiment (inputs 1.5 times)."""
    from keras_mgu import datasets

    data = datasets.zoo_plant("hardening_oscillator", seed=0).data
    e = data.estimation
    (mu, su), (my, sy) = (e.u.mean(0), e.u.std(0)), (e.y.mean(0), e.y.std(0))
    est, val = (Record((r.u - mu) / su, (r.y - my) / sy) for r in (e, data.validation))
    return est, val, Record(1.5 * est.u, est.y)


@numpy_only
def test_no_kept_model_leaves_the_box_on_the_stretched_experiment():
    """On the hardening oscillator the cubic model that simulates the records best blows up
    once its inputs are half as large again; with the stretched experiment the fit keeps a
    shorter model of the same family that stays in the box there."""
    est, val, stretched = _hardening_records()
    keep = output_box(est.y, 0.5)

    def leaves(model):
        y = model.simulate_batch(stretched.u, stretched.y[: model.lag])[0]
        return not np.all((y >= keep[0]) & (y <= keep[1]))

    plain, (row,) = fit_polynomial(est, val, lags=(6,), degrees=(3,), held_out=est)
    careful, (careful_row,) = fit_polynomial(
        est, val, lags=(6,), degrees=(3,), held_out=est, stretched=stretched
    )
    assert leaves(plain) and not leaves(careful)
    assert careful_row["terms"] < row["terms"] and careful_row["score"] > row["score"]
    plain_terms = {tuple(t) for t in plain.terms}
    assert {tuple(t) for t in careful.terms} <= plain_terms  # the same FROLS order, shorter
    # Without the experiment the fit is the one of before, to the bit.
    again, _ = fit_polynomial(est, val, lags=(6,), degrees=(3,), held_out=est, stretched=None)
    np.testing.assert_array_equal(again.coefficients, plain.coefficients)


def test_the_class_identifies_saves_and_describes_itself(rng, tmp_path):
    record = _plant_record(rng, 1600, noise=1e-3)
    data = SysIdData(
        Record(record.u[:1000], record.y[:1000]),
        Record(record.u[1000:1300], record.y[1000:1300]),
        Record(record.u[1300:], record.y[1300:]),
    )
    config = sysid.RecipeConfig(model_classes="polynomial", iterations=200)
    found = sysid.identify(data, config, restarts=2)
    assert [run.structure for run in found.runs] == ["polynomial"] * 2
    assert found.runs[0].polynomial.terms.tolist() == found.runs[1].polynomial.terms.tolist()
    test = data.test
    y_sim = found.simulate(test.u, test.y[:20])
    assert np.sqrt(np.mean((y_sim[20:] - test.y[20:]) ** 2)) < 0.02 * test.y.std()
    loaded = sysid.load(found.save(tmp_path / "poly.kmgu"))
    np.testing.assert_allclose(loaded.simulate(test.u, test.y[:20]), y_sim, atol=1e-5)
    assert loaded.polynomial_terms() == found.polynomial_terms()
    text = found.describe()
    assert "polynomial NARX" in text and "y0(k-1)^3" in text and "ERR" in text
    rows = found.polynomial_terms()
    assert rows[0]["term"] == "y0(k-1)" and rows[0]["err"] > 0.5
    assert rows[0]["run"] == min(found.members or (found.best,)) + 1
    assert describe_polynomial(found.runs[0].polynomial, ["u"], ["y"]).count("\n") >= 4


def test_the_defaults_leave_the_class_out_where_the_plant_integrates_unless_held_out(rng):
    from keras_mgu.sysid.choice.candidates import model_classes

    u = rng.uniform(-1.0, 1.0, 900)
    integrating = np.cumsum(0.1 * u + 0.01 * u**3)[:, None]
    steady = _plant_record(rng, 900)
    for y, expected in ((integrating, False), (steady.y, True)):
        record = Record(u[:, None] if y is integrating else steady.u, y)
        data = SysIdData(*(Record(record.u[a:b], record.y[a:b]) for a, b in
                           ((0, 600), (600, 750), (750, 900))))  # fmt: skip
        defaults = [o.name for o in model_classes(data, sysid.RecipeConfig())[0]]
        assert ("polynomial" in defaults) is expected
        named = model_classes(data, sysid.RecipeConfig(model_classes=("polynomial",)))[0]
        assert [o.name for o in named] == ["polynomial"]
        # With the estimation record's start held out, a drift shows on it: always tried.
        held = [o.name for o in model_classes(data, sysid.RecipeConfig(), held_out=True)[0]]
        assert "polynomial" in held
