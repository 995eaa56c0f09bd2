"""Classification as ranking with the library directly: GoEmotions (embedded sample), ApproxNDCG.

    python examples/classify_goemotions.py [--epochs 2] [--steps 0]

Builds a Transformer text encoder over raw strings, puts a latent-cross Rank4Class head on it,
trains with TF-Ranking's ApproxNDCG loss from integer labels, and reports ranking metrics.
"""

import argparse

from tfrank4class import data, encoders, heads, losses, metrics
from tfrank4class.compat import keras


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--epochs", type=int, default=2)
  parser.add_argument("--steps", type=int, default=0, help="steps per epoch (0: a full pass)")
  args = parser.parse_args()
  keras.utils.set_random_seed(0)

  info = data.info("goemotions_sample")
  train = data.load("goemotions_sample", "train", batch_size=64, shuffle_seed=0)
  test = data.load("goemotions_sample", "test", batch_size=256)
  if args.steps:
    train = train.take(args.steps)

  vectorizer = data.adapt_text_vectorization("goemotions_sample", output_sequence_length=48)
  encoder = encoders.get(
    "transformer",
    text_vectorization=vectorizer,
    sequence_length=48,
    embedding_dim=64,
    num_heads=2,
    num_layers=1,
    ff_dim=128,
    dropout=0.0,
  )
  model = heads.build_model(
    encoder, info.num_classes, interaction="latent_cross", hidden_units=(128, 128)
  )
  model.compile(
    optimizer=keras.optimizers.Adam(1e-3),
    loss=losses.get("approx_ndcg_loss"),
    metrics=[metrics.TopKAccuracy(1), metrics.TopKAccuracy(5), metrics.NDCG(5), metrics.MRR()],
  )
  model.fit(train, epochs=args.epochs, verbose=2)
  for name, value in model.evaluate(test, verbose=0, return_dict=True).items():
    print(f"test {name}: {value:.4f}")


if __name__ == "__main__":
  main()
