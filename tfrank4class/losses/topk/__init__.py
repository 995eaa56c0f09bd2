"""The Top-K family: losses that train a classifier for top-k accuracy.

Each module is one loss: ``cross_entropy`` is the top-k cross-entropy over differentiable sorting
and ranking operators of Petersen et al., "Differentiable Top-k Classification Learning"
(ICML 2022), built on :mod:`tfrank4class.ranking` (sorting networks of Petersen et al., ICML 2021
and ICLR 2022; NeuralSort; SoftSort); ``smooth_svm`` is the smooth top-k SVM of Berrada et al.
(ICLR 2018); ``soft_rank`` a hinge on the soft rank of Blondel et al. (ICML 2020,
:mod:`tfrank4class.ranking.permutahedron`). ``single_label`` finds the one true class they need.
"""
