#!/bin/bash
export NO_GCE_CHECK=true TF_CPP_MIN_LOG_LEVEL=2 TFRANK4CLASS_DATA=/work/shared/datasets
TFPY=/work/main/.venv/bin/python; JPY=/work/venv-scale-bench/bin/python
COMMON="--names smooth_topk_svm_loss --forms ids --peers none --rounds 3 --memory_cap_mb 4096 --time_cap_s 6"
run() { # tree backend tag sizes big
  cd $1; echo "== $3 $(date -u +%H:%M) load $(cut -d' ' -f1 /proc/loadavg)"
  KERAS_BACKEND=$2 nice -n 10 $([ $2 = jax ] && echo $JPY || echo $TFPY) benchmarks/scale.py $COMMON --sizes $4 --big_batch "$5" --json /tmp/svm-tf/$3.json 2>&1 | grep "^ours\|softmax_loss (the"
  echo "   end load $(cut -d' ' -f1 /proc/loadavg)"
}
B=/tmp/svm-tf/before_tree; A=/work/wt-svm-tf
run $B tensorflow ab1-before-tf 10000,100000 ""
run $A tensorflow ab1-after-tf 10000,100000 ""
run $A jax final-after-jax 10000,100000 ""
run $A tensorflow final-after-tf-small 1000 256,1000
run $A jax final-after-jax-small 1000 256,1000
run $B tensorflow ab2-before-tf 10000,100000 ""
run $A tensorflow ab2-after-tf 10000,100000 ""
