"""Loss capabilities and the registry: get_loss checks a name or an object for a role; the
squared hinge shared by FSA and FGM; the multiclass form of any margin loss."""

import numpy as np
import pytest

from cvfs.core.losses import (
    LOSSES,
    HuberSVM,
    Logistic,
    Lorenz,
    PairwiseRank,
    Squared,
    SquaredHinge,
    get_loss,
    is_probabilistic,
    loss_names,
)
from cvfs.core.multiclass_losses import Multinomial, OneVsRest, get_multiclass_loss


def test_roles_come_from_the_capabilities():
    assert loss_names("classifier") == ["logistic", "lorenz", "squared_hinge", "svm"]
    assert loss_names("regressor") == ["squared"]
    assert loss_names("ranker") == ["rank"]
    assert sorted(LOSSES) == loss_names()
    for name in LOSSES:
        assert get_loss(name).role in ("classifier", "regressor", "ranker")
    assert [n for n in LOSSES if is_probabilistic(n)] == ["logistic"]
    assert not is_probabilistic("nonsense") and not is_probabilistic(Squared())


def test_get_loss_names_the_problem():
    with pytest.raises(ValueError, match=r"loss must be one of \['squared'\], got 'logistic'"):
        get_loss("logistic", "regressor")
    with pytest.raises(ValueError, match="a ranker needs a pairwise loss, got the classifier"):
        get_loss(Lorenz(), "ranker")
    with pytest.raises(ValueError, match="a classifier needs a margin loss"):
        get_loss(PairwiseRank(), "classifier")
    with pytest.raises(TypeError, match="loss must be a name or a cvfs.core.losses.Loss"):
        get_loss(3)
    with pytest.raises(ValueError, match="role must be one of"):
        get_loss("squared", "selector")
    loss = HuberSVM(0.25)
    assert get_loss(loss, "classifier") is loss


def test_squared_hinge_value_gradient_and_fgm_forms():
    z = np.linspace(-3, 3, 13)
    y = np.where(np.arange(13) % 2, 1.0, -1.0)
    xi = np.maximum(0.0, 1.0 - y * z)
    loss = SquaredHinge()
    np.testing.assert_allclose(loss.value(z, y), 0.5 * xi ** 2, rtol=1e-15)
    np.testing.assert_allclose(loss.gradient(z, y), -y * xi, rtol=1e-15)
    assert loss.margin_sum(y * z) == 0.5 * float(xi @ xi)
    np.testing.assert_array_equal(loss.margin_dual(y * z), xi)
    # the defaults of MarginLoss (from value_grad) agree with the closed forms
    np.testing.assert_allclose(Lorenz().margin_dual(y * z), -Lorenz().gradient(y * z, 1.0))
    lg = Logistic()
    np.testing.assert_allclose(lg.margin_sum(y * z), lg.value(z, y).sum(), rtol=1e-13)
    np.testing.assert_allclose(lg.proba(z), 1.0 / (1.0 + np.exp(-z)), rtol=1e-15)
    with pytest.raises(AttributeError, match="not probabilistic"):
        Lorenz().proba(z)


def test_multiclass_forms():
    assert isinstance(Logistic().multiclass(), Multinomial)
    for loss in (Lorenz(), HuberSVM(), SquaredHinge()):
        m = loss.multiclass()
        assert isinstance(m, OneVsRest) and m.binary is loss and not m.probabilistic
    assert isinstance(get_multiclass_loss("squared_hinge"), OneVsRest)
    with pytest.raises(ValueError, match="has no multiclass form"):
        Squared().multiclass()
