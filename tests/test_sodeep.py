"""Tests of the SoDeep losses (tfrank4class.losses.sodeep): hand-computed values with exact
ranks (scipy / scikit-learn references), the mAP loss of Eq. 7 over class columns, padding,
gradients through the sorters and the blackbox ranker, 2-class training, mixed_float16, Keras
compile / fit / save / load in every mode, fine-tuning, bad input, and a real-data check
(Spearman correlation on the diabetes set rises when trained with SpearmanLoss)."""

import numpy as np
import pytest
import tensorflow as tf
from _sorter_checks import mixed_float16
from scipy.stats import spearmanr
from sklearn.metrics import average_precision_score, roc_auc_score

from tfrank4class import losses
from tfrank4class.losses.sodeep import RankTripletLoss, SorterAPLoss, SorterMAPLoss, SpearmanLoss
from tfrank4class.ranking import BlackboxRanker, PairwiseSigmoidSorter

NONE = tf.keras.losses.Reduction.NONE


def test_registered_names():
  assert isinstance(losses.get("spearman_loss", ranker="exact"), SpearmanLoss)
  assert isinstance(losses.get("sorter_map_loss", ranker="exact"), SorterMAPLoss)
  assert isinstance(losses.get("sorter_ap_loss", ranker="exact"), SorterAPLoss)
  assert isinstance(losses.get("rank_triplet_loss", ranker="exact"), RankTripletLoss)


def test_spearman_exact_equals_one_minus_scipy_rho():
  rng = np.random.default_rng(0)
  y = rng.exponential(size=(5, 12)).astype(np.float32)  # graded targets (>= 0; < 0 is padding)
  s = rng.normal(size=(5, 12)).astype(np.float32)
  got = SpearmanLoss(ranker="exact", reduction=NONE)(y, s).numpy()
  ref = [1.0 - spearmanr(a, b).statistic for a, b in zip(y, s)]
  np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_spearman_tied_targets_use_average_ranks_and_l1_term():
  y = np.array([[2.0, 2.0, 0.0, 1.0]], np.float32)
  s = np.array([[0.1, 0.7, 0.3, 0.2]], np.float32)
  # Target ranks (1 = highest, ties averaged): [1.5, 1.5, 4, 3]; score ranks: [4, 1, 2, 3].
  d2 = (4 - 1.5) ** 2 + (1 - 1.5) ** 2 + (2 - 4) ** 2 + 0.0
  ref = 6 * d2 / (4 * 15) + 0.5 * np.mean(np.abs(s - y))
  got = SpearmanLoss(ranker="exact", l1_weight=0.5, reduction=NONE)(y, s).numpy()
  np.testing.assert_allclose(got, [ref], rtol=1e-6)


def test_spearman_over_batch():
  y = np.array([1.0, 3.0, 2.0, 5.0], np.float32)
  s = np.array([[0.2], [0.1], [0.3], [0.9]], np.float32)
  got = SpearmanLoss(ranker="exact", over_batch=True, reduction=NONE)(y, s).numpy()
  np.testing.assert_allclose(got, [1.0 - spearmanr(y, s[:, 0]).statistic], rtol=1e-6)
  with pytest.raises(ValueError, match=r"over_batch=True `y_pred` must have shape \[B\] or"):
    SpearmanLoss(ranker="exact", over_batch=True)(np.zeros([2, 3]), np.zeros([2, 3]))


def test_spearman_padding_is_excluded():
  rng = np.random.default_rng(7)
  y = rng.normal(size=(4, 9)).astype(np.float32) ** 2  # graded targets >= 0
  s = rng.normal(size=(4, 9)).astype(np.float32)
  y[0, [1, 5]] = -1.0
  y[1, 0] = -1.0
  y[3, 1:] = -1.0  # one valid item: loss 0
  got = SpearmanLoss(ranker="exact", reduction=NONE)(y, s).numpy()
  ref = [1.0 - spearmanr(a[a >= 0], b[a >= 0]).statistic for a, b in zip(y[:3], s[:3])] + [0.0]
  np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
  # Through a sorter, a padded item (whatever its score) changes the loss little.
  padded = SpearmanLoss(ranker="attention", reduction=NONE)(y[:1], s[:1]).numpy()
  valid = y[0] >= 0
  dropped = SpearmanLoss(ranker="attention", reduction=NONE)(y[:1, valid], s[:1, valid]).numpy()
  np.testing.assert_allclose(padded, dropped, atol=0.02)


def test_ap_exact_matches_sklearn():
  rng = np.random.default_rng(1)
  rel = (rng.uniform(size=(6, 10)) < 0.3).astype(np.float32)
  rel[:, 0] = 1.0
  s = rng.normal(size=(6, 10)).astype(np.float32)
  got = SorterAPLoss(ranker="exact", reduction=NONE)(rel, s).numpy()
  ref = [1.0 - average_precision_score(r, x) for r, x in zip(rel, s)]
  np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
  # Padding excluded: sklearn on the valid items only.
  rel[:, 3] = -1.0
  got = SorterAPLoss(ranker="exact", reduction=NONE)(rel, s).numpy()
  ref = [1.0 - average_precision_score(r[r >= 0], x[r >= 0]) for r, x in zip(rel, s)]
  np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
  # Class ids: AP = 1 / rank of the true class; no positive -> 0.
  ids = SorterAPLoss(ranker="exact", reduction=NONE)([2], [[0.5, 0.9, 0.1]]).numpy()
  np.testing.assert_allclose(ids, [1.0 - 1.0 / 3.0], rtol=1e-6)
  none = SorterAPLoss(ranker="exact", reduction=NONE)([[0.0, 0.0]], [[0.5, 0.9]]).numpy()
  np.testing.assert_array_equal(none, [0.0])


def _map_reference(rel, s, soft_rank=None):
  """Eq. 7 per class column (ranked down the batch), scaled as documented, in numpy: the mean
  over classes with a positive and a negative of (sum of the positives' ranks - best) / (P N)."""
  terms = []
  for c in range(rel.shape[1]):
    r, x = rel[:, c], s[:, c]
    x, r = x[r >= 0], r[r >= 0]
    num_pos, num_neg = (r > 0).sum(), (r <= 0).sum()
    if num_pos == 0 or num_neg == 0:
      continue
    ranks = soft_rank(x) if soft_rank else 1.0 + (x[None, :] > x[:, None]).sum(1)
    terms.append((ranks[r > 0].sum() - num_pos * (num_pos + 1) / 2) / (num_pos * num_neg))
  return np.mean(terms)


def test_map_ranks_each_class_down_the_batch_exact_is_one_minus_auc():
  rng = np.random.default_rng(1)
  rel = (rng.uniform(size=(12, 6)) < 0.4).astype(np.float32)
  rel[:, 4] = 0.0  # no positive in the batch: left out (as in the paper)
  rel[:, 5] = 1.0  # no negative: left out (its rank sum is a constant)
  rel[0, :4] = 1.0
  rel[1, :4] = 0.0
  s = rng.normal(size=(12, 6)).astype(np.float32)
  got = SorterMAPLoss(ranker="exact")(rel, s).numpy()
  # With exact ranks: mean over the kept classes of 1 - ROC AUC (scikit-learn).
  ref = np.mean([1.0 - roc_auc_score(rel[:, c], s[:, c]) for c in range(4)])
  np.testing.assert_allclose(got, ref, rtol=1e-5)
  np.testing.assert_allclose(got, _map_reference(rel, s), rtol=1e-5)
  # Padding (relevance < 0) leaves the entry out of its class's list.
  rel[2, 0] = rel[7, 1] = -1.0
  got = SorterMAPLoss(ranker="exact")(rel, s).numpy()
  ref = np.mean(
    [1.0 - roc_auc_score(rel[rel[:, c] >= 0, c], s[rel[:, c] >= 0, c]) for c in range(4)]
  )
  np.testing.assert_allclose(got, ref, rtol=1e-5)
  # Class ids [B]; a batch without any kept class has loss 0.
  ids = SorterMAPLoss(ranker="exact")([0, 1, 0], [[0.9, 0.1], [0.5, 0.2], [0.1, 0.3]]).numpy()
  # class 0: column 0.9, 0.5, 0.1 with positives 0.9 and 0.1 -> 1 of 2 pairs wrong; class 1:
  # column 0.1, 0.2, 0.3 with positive 0.2 -> 1 of 2 pairs wrong.
  np.testing.assert_allclose(ids, (0.5 + 0.5) / 2, rtol=1e-6)
  np.testing.assert_array_equal(SorterMAPLoss(ranker="exact")([0, 0], [[1.0, 0.0]] * 2), 0.0)


def test_map_through_a_sorter_matches_numpy_eq7_on_columns():
  rng = np.random.default_rng(3)
  rel = (rng.uniform(size=(10, 5)) < 0.3).astype(np.float32)
  rel[0] = 1.0
  rel[1] = 0.0
  s = rng.uniform(-1, 1, size=(10, 5)).astype(np.float32)
  c = 3.0
  soft = lambda x: 1.0 + (1.0 / (1.0 + np.exp(-c * (x[None, :] - x[:, None])))).sum(1) - 0.5
  got = SorterMAPLoss(ranker=PairwiseSigmoidSorter(c))(rel, s).numpy()
  np.testing.assert_allclose(got, _map_reference(rel, s.astype(np.float64), soft), rtol=1e-5)


def test_rank_triplet_hand_computed():
  # n = 5, normalised ranks r = (rank - 1) / 4.
  s = np.array([[0.9, 0.1, 0.5, 0.7, 0.3]], np.float32)  # ranks 1 5 3 2 4 -> r 0 1 .5 .25 .75
  rel = np.array([[0.0, 1.0, 1.0, 0.0, 0.0]], np.float32)  # positives r = 1, .5; hardest neg 0
  ref = (max(0, 0.2 + 1 - 0) + max(0, 0.2 + 0.5 - 0)) / 2
  got = RankTripletLoss(ranker="exact", alpha=0.2, reduction=NONE)(rel, s).numpy()
  np.testing.assert_allclose(got, [ref], rtol=1e-6)
  good = RankTripletLoss(ranker="exact", alpha=0.2, reduction=NONE)(
    [[1.0, 0.0, 0.0, 0.0, 0.0]], s
  ).numpy()  # r_p = 0, hardest neg .25 -> 0
  np.testing.assert_allclose(good, [0.0], atol=1e-7)
  all_pos = RankTripletLoss(ranker="exact", reduction=NONE)(np.ones([1, 5]), s).numpy()
  np.testing.assert_array_equal(all_pos, [0.0])
  # A padded item (relevance -1, best score) is excluded: n = 5 valid items as above.
  s_pad = np.array([[0.9, 0.1, 5.0, 0.5, 0.7, 0.3]], np.float32)
  rel_pad = np.array([[0.0, 1.0, -1.0, 1.0, 0.0, 0.0]], np.float32)
  got = RankTripletLoss(ranker="exact", alpha=0.2, reduction=NONE)(rel_pad, s_pad).numpy()
  np.testing.assert_allclose(got, [ref], rtol=1e-6)


@pytest.mark.parametrize(
  "make_ranker",
  [lambda: "attention", lambda: "pairwise_sigmoid", lambda: BlackboxRanker(lambda_=20.0)],
  ids=["attention", "pairwise", "blackbox"],
)
@pytest.mark.parametrize("loss_cls", [SpearmanLoss, SorterMAPLoss, SorterAPLoss, RankTripletLoss])
def test_gradients_finite_nonzero(loss_cls, make_ranker):
  rng = np.random.default_rng(2)
  s = tf.constant(rng.uniform(-1, 1, size=(4, 8)).astype(np.float32))
  y = np.zeros([4, 8], np.float32)
  y[:, :3] = 1.0
  if loss_cls is SpearmanLoss:
    y = rng.exponential(size=(4, 8)).astype(np.float32)
  if loss_cls is SorterMAPLoss:  # every class column (down the batch) has both kinds
    y = np.zeros([4, 8], np.float32)
    y[1:3] = 1.0
  kwargs = {"alpha": 0.5} if loss_cls is RankTripletLoss else {}
  loss = loss_cls(ranker=make_ranker(), **kwargs)
  with tf.GradientTape() as tape:
    tape.watch(s)
    value = loss(y, s)
  grad = tape.gradient(value, s).numpy()
  assert np.isfinite(value.numpy()) and np.isfinite(grad).all() and np.abs(grad).max() > 0


def test_sorters_agree_with_exact_on_well_separated_scores():
  y = np.array([[3.0, 1.0, 2.0, 0.0]], np.float32)
  s = np.array([[0.2, 0.9, -0.5, 0.4]], np.float32)
  exact = SpearmanLoss(ranker="exact", reduction=NONE)(y, s).numpy()
  approx = SpearmanLoss(ranker="attention", reduction=NONE)(y, s).numpy()
  np.testing.assert_allclose(approx, exact, atol=0.02)


def _model(n=6):
  inputs = tf.keras.Input([4])
  return tf.keras.Model(inputs, tf.keras.layers.Dense(n)(inputs))


@pytest.mark.parametrize(
  "loss_cls,ranker",
  [(SpearmanLoss, "attention"), (SorterMAPLoss, PairwiseSigmoidSorter(5.0))],
  ids=["by-name", "layer"],
)
def test_compile_fit_save_load(loss_cls, ranker, tmp_path):
  x = np.random.default_rng(3).normal(size=(16, 4)).astype(np.float32)
  y = np.random.default_rng(4).integers(0, 6, size=(16,))
  model = _model()
  model.compile("adam", loss=loss_cls(ranker=ranker))
  model.fit(x, y, batch_size=8, epochs=1, verbose=0)
  path = str(tmp_path / "m.keras")
  model.save(path)
  loaded = tf.keras.models.load_model(path)
  assert isinstance(loaded.loss, loss_cls)
  if ranker == "attention":
    assert loaded.loss.ranker.pretrained_kind == "attention"
  np.testing.assert_allclose(
    loaded.evaluate(x, y, verbose=0), model.evaluate(x, y, verbose=0), rtol=1e-5
  )
  clone = SpearmanLoss.from_config(SpearmanLoss(ranker=ranker, l1_weight=0.1).get_config())
  assert clone.l1_weight == 0.1


def _check_modes(classes, jit):
  s = tf.constant([[0.2, 0.9, -0.5, 0.4], [0.1, -0.3, 0.6, 0.0]])
  y = tf.constant([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0]])
  for cls in classes:
    loss = cls(ranker="attention")
    eager = loss(y, s).numpy()
    np.testing.assert_allclose(tf.function(loss)(y, s).numpy(), eager, rtol=1e-5)
    if jit:
      np.testing.assert_allclose(
        tf.function(loss, jit_compile=True)(y, s).numpy(), eager, rtol=1e-4, atol=1e-6
      )


def test_modes_tf_function_and_jit():
  _check_modes([SpearmanLoss, SorterMAPLoss, SorterAPLoss, RankTripletLoss], jit=False)
  _check_modes([SpearmanLoss], jit=True)


@pytest.mark.slow
def test_modes_jit_every_loss():
  _check_modes([SorterMAPLoss, SorterAPLoss, RankTripletLoss], jit=True)


def _separable(num_classes, n=512, seed=0):
  rng = np.random.default_rng(seed)
  centres = rng.normal(size=(num_classes, 4)) * 2.0
  y = rng.integers(0, num_classes, size=n)
  return (centres[y] + 0.5 * rng.normal(size=(n, 4))).astype(np.float32), y


@pytest.mark.parametrize(
  "name,kwargs,num_classes",
  [
    ("spearman_loss", {}, 2),
    ("spearman_loss", {}, 3),
    ("sorter_ap_loss", {}, 2),
    ("rank_triplet_loss", {"alpha": 0.5}, 2),
    pytest.param("spearman_loss", {"ranker": "lstm"}, 2, marks=pytest.mark.slow),
    ("spearman_loss", {"ranker": "pairwise_sigmoid"}, 2),
  ],
  ids=[
    "spearman-2",
    "spearman-3",
    "ap-2",
    "triplet-2",
    "spearman-lstm-2",
    "spearman-handcrafted-2",
  ],
)
def test_learns_a_separable_small_class_problem(name, kwargs, num_classes):
  # With the default sorter a 2-item list used to pass no rank gradient (its standardisation is
  # always +-1) and top-1 stayed near chance. Reference: the labels of separable blobs.
  x, y = _separable(num_classes)
  tf.keras.utils.set_random_seed(0)
  model = tf.keras.Sequential([tf.keras.Input([4]), tf.keras.layers.Dense(num_classes)])
  model.compile(tf.keras.optimizers.Adam(0.05), loss=losses.get(name, **kwargs))
  model.fit(x, y, batch_size=64, epochs=5, verbose=0)
  top1 = (model.predict(x, verbose=0).argmax(-1) == y).mean()
  assert top1 > 0.9, top1


def test_map_loss_learns_the_class_rankings_of_a_2_class_problem():
  # Eq. 7 ranks each class down the batch: it is blind to a per-class offset of the scores, so
  # it learns per-class rankings (mAP), not top-1 (the paper adds it to a per-example loss).
  # Reference: scikit-learn's AP of each class column; chance is about 0.5.
  x, y = _separable(2)
  onehot = np.eye(2)[y]
  tf.keras.utils.set_random_seed(0)
  model = tf.keras.Sequential([tf.keras.Input([4]), tf.keras.layers.Dense(2)])
  mean_ap = lambda: np.mean(
    [average_precision_score(onehot[:, c], model.predict(x, verbose=0)[:, c]) for c in range(2)]
  )
  before = mean_ap()
  model.compile(tf.keras.optimizers.Adam(0.05), loss=losses.get("sorter_map_loss"))
  model.fit(x, y, batch_size=64, epochs=5, verbose=0)
  assert mean_ap() > 0.95 and before < 0.7, (before, mean_ap())


@pytest.mark.parametrize(
  "name,kwargs",
  [
    ("spearman_loss", {}),
    ("sorter_map_loss", {}),
    ("sorter_ap_loss", {}),
    ("rank_triplet_loss", {}),
    pytest.param("spearman_loss", {"ranker": "lstm"}, marks=pytest.mark.slow),
    ("spearman_loss", {"ranker": "pairwise_sigmoid"}),
  ],
  ids=["spearman", "map", "ap", "triplet", "spearman-lstm", "spearman-handcrafted"],
)
def test_trains_under_mixed_float16_and_takes_float16_scores(name, kwargs):
  x, y = _separable(6, n=32)
  with mixed_float16():
    loss = losses.get(name, **kwargs)
    scores = tf.random.stateless_normal([32, 6], [5, 6])
    np.testing.assert_allclose(
      loss(y, tf.cast(scores, tf.float16)).numpy(),
      loss(y, tf.cast(tf.cast(scores, tf.float16), tf.float32)).numpy(),
      rtol=1e-5,
    )
    model = tf.keras.Sequential([tf.keras.Input([4]), tf.keras.layers.Dense(6)])
    assert model.layers[-1].compute_dtype == "float16"  # the loss gets float16 scores
    model.compile("adam", loss=loss)
    history = model.fit(x, y, batch_size=16, epochs=2, verbose=0)
  assert np.isfinite(history.history["loss"]).all()


def test_fit_under_mirrored_strategy(mirrored_strategy):
  x = np.random.default_rng(5).normal(size=(16, 4)).astype(np.float32)
  labels = np.random.default_rng(6).integers(0, 6, size=(16,))
  with mirrored_strategy.scope():
    model = _model()
    model.compile("adam", loss=RankTripletLoss(ranker="attention"))
  history = model.fit(x, labels, batch_size=8, epochs=1, verbose=0)
  assert np.isfinite(history.history["loss"]).all()


def test_finetuning_moves_the_sorter_and_frozen_does_not(mirrored_strategy):
  s = tf.random.stateless_normal([16, 10], [1, 2]) * 5.0
  y = tf.abs(tf.random.stateless_normal([16, 10], [3, 4]))
  tuned = SpearmanLoss(ranker="attention", ranker_trainable=True, ranker_learning_rate=0.05)
  before = [w.numpy().copy() for w in tuned.ranker.weights]
  model = _model(10)
  model.compile("adam", loss=tuned)
  model.fit(np.ones([16, 4], np.float32), y.numpy(), batch_size=8, epochs=1, verbose=0)
  assert int(tuned._ranker_optimizer.iterations) == 2  # one sorter step per batch
  assert any(not np.allclose(a, w.numpy()) for a, w in zip(before, tuned.ranker.weights))
  frozen = SpearmanLoss(ranker="attention")
  before = [w.numpy().copy() for w in frozen.ranker.weights]
  frozen(y, s)
  assert all(np.array_equal(a, w.numpy()) for a, w in zip(before, frozen.ranker.weights))
  with pytest.raises(ValueError, match="not supported under a tf.distribute strategy"):
    with mirrored_strategy.scope():
      mirrored_strategy.run(lambda: tuned(y, s))
  with pytest.raises(ValueError, match="needs a learned sorter layer"):
    SpearmanLoss(ranker="exact", ranker_trainable=True)


@pytest.mark.parametrize("ranker_trainable", [False, True], ids=["frozen", "fine-tuned"])
def test_fit_with_jit_compile(ranker_trainable):
  """``compile(jit_compile=True)``: the loss, its sorter and (fine-tuned) the sorter's own Adam
  step all compile with XLA; the first epoch's loss is the eager one's (same data, same start)."""
  y = np.abs(np.random.default_rng(8).normal(size=(16, 10))).astype(np.float32)
  x = np.random.default_rng(9).normal(size=(16, 4)).astype(np.float32)
  results = []
  for jit in (False, True):
    tf.keras.utils.set_random_seed(0)
    loss = SpearmanLoss(
      ranker="attention", ranker_trainable=ranker_trainable, ranker_learning_rate=0.05
    )
    before = [w.numpy().copy() for w in loss.ranker.weights]
    model = _model(10)
    model.compile(tf.keras.optimizers.SGD(0.01), loss=loss, jit_compile=jit)
    history = model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    moved = any(not np.allclose(a, w.numpy()) for a, w in zip(before, loss.ranker.weights))
    assert moved == ranker_trainable
    if ranker_trainable:
      assert int(loss._ranker_optimizer.iterations) == 2
    results.append(history.history["loss"][0])
  np.testing.assert_allclose(results[1], results[0], rtol=1e-4)


def test_bad_input():
  with pytest.raises(ValueError, match=r"`ranker` must be one of \['exact'"):
    SpearmanLoss(ranker="quicksort")
  with pytest.raises(ValueError, match=r"`l1_weight` must be a finite number >= 0.0, got -1"):
    SpearmanLoss(ranker="exact", l1_weight=-1)
  with pytest.raises(ValueError, match=r"`alpha` must be a finite number >= 0.0"):
    RankTripletLoss(ranker="exact", alpha=-0.1)
  with pytest.raises(ValueError, match="at least 2 items"):
    SpearmanLoss(ranker="exact")(np.zeros([3, 1]), np.zeros([3, 1]))
  with pytest.raises(ValueError, match=r"shape \[batch_size, list_size\]"):
    SorterMAPLoss(ranker="exact")(np.zeros([3]), np.zeros([3, 2, 2]))
  with pytest.raises(ValueError, match=r"ranks each class down the batch .* batch of at least 2"):
    SorterMAPLoss(ranker="exact")([[1.0, 0.0, 0.0]], [[0.1, 0.2, 0.3]])
  with pytest.raises(ValueError, match="cannot be serialized"):
    SpearmanLoss(ranker=lambda s: s).get_config()


def test_diabetes_spearman_rises_with_spearman_loss():
  from sklearn.datasets import load_diabetes

  x, y = load_diabetes(return_X_y=True)
  x = ((x - x.mean(0)) / x.std(0)).astype(np.float32)
  y = ((y - y.mean()) / y.std()).astype(np.float32)
  x_train, y_train, x_test, y_test = x[:342], y[:342], x[342:], y[342:]
  tf.keras.utils.set_random_seed(0)
  model = tf.keras.Sequential([tf.keras.Input([10]), tf.keras.layers.Dense(1)])
  # Start from a deliberately poor linear model.
  model.layers[0].set_weights(
    [
      -model.layers[0].get_weights()[0]
      - 0.3 * np.sign(np.corrcoef(x_train.T, y_train)[-1, :-1])[:, None],
      np.zeros(1),
    ]
  )
  rho_before = spearmanr(model.predict(x_test, verbose=0)[:, 0], y_test).statistic
  model.compile(
    tf.keras.optimizers.Adam(0.05), loss=SpearmanLoss(ranker="attention", over_batch=True)
  )
  model.fit(x_train, y_train, batch_size=64, epochs=15, verbose=0, shuffle=True)
  rho_after = spearmanr(model.predict(x_test, verbose=0)[:, 0], y_test).statistic
  assert rho_after > 0.5 and rho_after > rho_before + 0.3, (rho_before, rho_after)
