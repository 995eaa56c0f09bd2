"""Train face embeddings on ORL with cross-entropy and measure Recall@K on unseen people.

Subjects 1-30 train a small CNN with the cross-entropy recipe of Boudiaf et al. (ECCV 2020);
subjects 31-40 are never seen in training and are retrieved leave-one-out by cosine similarity.
Swap ``LOSS`` for "recall_loss" (RaMBO), "triplet_loss" or "contrastive_loss" to compare.

    .venv/bin/python examples/retrieval_orl.py [path/to/shared/datasets]
"""

import os
import pathlib
import sys

import numpy as np

from tfrank4class import encoders
from tfrank4class.compat import keras
from tfrank4class.data.orl import load_orl
from tfrank4class.data.sampling import ClassBalancedSampler
from tfrank4class.retrieval import (
  build_retrieval_model,
  export_embedding_model,
  retrieval_recall_at_k,
)
from tfrank4class.train.callbacks import RetrievalEvaluation

LOSS = "cross_entropy"
data_dir = pathlib.Path(
  sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TFRANK4CLASS_DATA", "../shared/datasets")
)

# Data: 28x23 greyscale faces, standardised, repeated to 3 channels for the image encoders.
x_train, y_train = load_orl(data_dir, subjects=range(1, 31), image_size=(28, 23))
x_unseen, y_unseen = load_orl(data_dir, subjects=range(31, 41), image_size=(28, 23))
mean, std = x_train.mean(), x_train.std()
x_train = np.repeat((x_train - mean) / std, 3, axis=-1)
x_unseen = np.repeat((x_unseen - mean) / std, 3, axis=-1)

# Model: encoder -> BatchNorm (no affine) -> 64-d embedding; a classifier over the 30 training
# people on top for cross-entropy (dropped at export).
keras.utils.set_random_seed(0)
encoder = encoders.get("small_cnn", input_shape=(28, 23, 3), filters=(32, 64), embedding_dim=128)
built = build_retrieval_model(
  encoder, LOSS, num_classes=30, embedding_dim=64, optimizer=keras.optimizers.Adam(1e-3)
)

# Batches of 6 people x 5 images (pairwise and recall losses need several images per class).
sampler = ClassBalancedSampler(y_train, classes_per_batch=6, samples_per_class=5, seed=0)
evaluation = RetrievalEvaluation(
  x_unseen, y_unseen, ks=(1, 2, 4, 8), embedding_model=built.embedding_model, every=10
)
built.model.fit(
  sampler.dataset(x_train),
  steps_per_epoch=len(sampler),
  epochs=30,
  verbose=0,
  callbacks=[evaluation],
)

print(retrieval_recall_at_k(built.embedding_model.predict(x_unseen, verbose=0), y_unseen))
export_embedding_model(built.embedding_model, "/tmp/orl_embeddings")
print("SavedModel serving {'embedding': [B, 64]} written to /tmp/orl_embeddings")
