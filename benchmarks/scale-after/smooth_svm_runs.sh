#!/bin/bash
# before and after, interleaved by backend: bench2.sh
export NO_GCE_CHECK=true TF_CPP_MIN_LOG_LEVEL=2 TFRANK4CLASS_DATA=/work/shared/datasets
for be in tensorflow jax; do
  if [ $be = jax ]; then PY=/work/venv-scale-bench/bin/python; else PY=/work/main/.venv/bin/python; fi
  for tag in before final; do
    cd /tmp/svm-const/$tag; export PYTHONPATH=$PWD
    echo "== $tag $be $(date -u +%T) load: $(uptime | sed 's/.*load average: //')"
    KERAS_BACKEND=$be nice -n 10 $PY benchmarks/scale.py --names smooth_topk_svm_loss --sizes 1000,10000,100000 --big_batch 256,1000 --forms ids --peers none --rounds 3 --memory_cap_mb 4096 --time_cap_s 10 --cell_timeout_s 240 --json /tmp/svm-const/${tag}_$be.json 2>&1 | grep -E "softmax_loss \(|^ours|skipped|killed"
    echo "== end $tag $be $(date -u +%T) load: $(uptime | sed 's/.*load average: //')"
  done
done
#!/bin/bash
export NO_GCE_CHECK=true TF_CPP_MIN_LOG_LEVEL=2 TFRANK4CLASS_DATA=/work/shared/datasets
run() { # tag backend
  if [ $2 = jax ]; then PY=/work/venv-scale-bench/bin/python; else PY=/work/main/.venv/bin/python; fi
  cd /tmp/svm-const/$1; export PYTHONPATH=$PWD
  echo "== $1 $2 $(date -u +%T) load: $(uptime | sed 's/.*load average: //')"
  KERAS_BACKEND=$2 nice -n 10 $PY benchmarks/scale.py --names smooth_topk_svm_loss --sizes 1000,10000,100000 --big_batch 256,1000 --forms ids --peers none --rounds 3 --memory_cap_mb 4096 --time_cap_s 10 --cell_timeout_s 240 --json /tmp/svm-const/${1}_$2.json 2>&1 | grep -E "softmax_loss \(|^ours|skipped|killed"
  echo "== end $1 $2 $(date -u +%T) load: $(uptime | sed 's/.*load average: //')"
}
run final tensorflow
run final jax
run before jax
#!/bin/bash
# TensorFlow A/B at C = 100,000 only, alternated: before, final, before, final
export NO_GCE_CHECK=true TF_CPP_MIN_LOG_LEVEL=2 TFRANK4CLASS_DATA=/work/shared/datasets
for i in 1 2; do for tag in before final; do
  cd /tmp/svm-const/$tag; export PYTHONPATH=$PWD
  echo "== $tag tensorflow #$i $(date -u +%T) load: $(uptime | sed 's/.*load average: //')"
  KERAS_BACKEND=tensorflow nice -n 10 /work/main/.venv/bin/python benchmarks/scale.py --names smooth_topk_svm_loss --sizes 100000 --big_batch "" --forms ids --peers none --rounds 3 --memory_cap_mb 4096 --time_cap_s 10 --json /tmp/svm-const/ab${i}_${tag}_tensorflow.json 2>&1 | grep -E "softmax_loss \(|^ours"
done; done
echo "== end $(date -u +%T) load: $(uptime | sed 's/.*load average: //')"
