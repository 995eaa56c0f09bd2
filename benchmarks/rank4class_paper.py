"""The Rank4Class paper's full result grids, the numbers both editions of the evidence grid
compare against (``rank4class_grid.py``, ``grid_protocol.py``); tests check them against the
paper's text.
"""

#: The paper's full grids (Appendix C): {dataset: (table, encoder, {metric: {head: [5 losses]}})},
#: losses in the order PAPER_LOSSES. GoEmotions and MIND with BERT (Tables 7 and 9; ELECTRA in
#: Tables 8 and 10), CIFAR-10 with VGG16 (Table 12).
PAPER_LOSSES = (
  "softmax_loss",
  "pairwise_logistic_loss",
  "approx_ndcg_loss",
  "gumbel_approx_ndcg_loss",
  "mean_squared_loss",
)
PAPER = {
  "goemotions": (
    "Table 7",
    "BERT",
    {
      "top_1": {
        "dot": [0.5900, 0.5821, 0.5858, 0.5889, 0.5880],
        "latent_cross": [0.5865, 0.5802, 0.5935, 0.5930, 0.5869],
        "concat": [0.5898, 0.5845, 0.5908, 0.5841, 0.5837],
      },
      "top_5": {
        "dot": [0.8665, 0.8800, 0.8700, 0.8620, 0.8500],
        "latent_cross": [0.8715, 0.8775, 0.8760, 0.8715, 0.8570],
        "concat": [0.8760, 0.8815, 0.8780, 0.8710, 0.8615],
      },
      "ndcg_5": {
        "dot": [0.7390, 0.7427, 0.7402, 0.7371, 0.7300],
        "latent_cross": [0.7411, 0.7422, 0.7462, 0.7453, 0.7350],
        "concat": [0.7436, 0.7419, 0.7461, 0.7405, 0.7355],
      },
    },
  ),
  "mind": (
    "Table 9",
    "BERT",
    {
      "top_1": {
        "dot": [0.6910, 0.6879, 0.6903, 0.6912, 0.6929],
        "latent_cross": [0.6980, 0.6949, 0.6919, 0.6921, 0.6944],
        "concat": [0.6949, 0.6871, 0.6923, 0.6908, 0.6929],
      },
      "top_5": {
        "dot": [0.9385, 0.9475, 0.9475, 0.9425, 0.9305],
        "latent_cross": [0.9465, 0.9470, 0.9475, 0.9455, 0.9285],
        "concat": [0.9445, 0.9475, 0.9495, 0.9435, 0.9270],
      },
      "ndcg_5": {
        "dot": [0.8278, 0.8325, 0.8336, 0.8311, 0.8259],
        "latent_cross": [0.8356, 0.8354, 0.8343, 0.8328, 0.8248],
        "concat": [0.8331, 0.8327, 0.8335, 0.8316, 0.8237],
      },
    },
  ),
  "cifar10": (
    "Table 12",
    "VGG16",
    {
      "top_1": {
        "dot": [0.9344, 0.9357, 0.9359, 0.9355, 0.9352],
        "latent_cross": [0.9360, 0.9358, 0.9354, 0.9360, 0.9358],
        "concat": [0.9357, 0.9356, 0.9356, 0.9353, 0.9360],
      },
      "top_5": {
        "dot": [0.9980, 0.9985, 0.9985, 0.9980, 0.9985],
        "latent_cross": [0.9980, 0.9985, 0.9975, 0.9980, 0.9975],
        "concat": [0.9980, 0.9980, 0.9975, 0.9985, 0.9965],
      },
      "ndcg_5": {
        "dot": [0.9719, 0.9721, 0.9723, 0.9721, 0.9716],
        "latent_cross": [0.9722, 0.9721, 0.9717, 0.9717, 0.9714],
        "concat": [0.9723, 0.9721, 0.9719, 0.9722, 0.9716],
      },
    },
  ),
}
