#!/usr/bin/env bash
# Nightly evaluation of a checkpoint: run the suite, compare with the newest earlier run, and exit 3 when a
# metric dropped by more than the suite's tolerance (2 when the run failed), so cron, Airflow or any scheduler
# can gate on the exit code.
#
# cron, every night at 02:30, a log per day:
#   30 2 * * * cd /opt/scorch && conf/eval-nightly.sh /data/checkpoints/latest >> /var/log/scorch/eval-$(date +\%F).log 2>&1
#
# Usage: conf/eval-nightly.sh MODEL_DIR [RUN_ID]
# Environment (defaults in brackets):
#   SUITE [conf/evals/demo-suite.yaml]   EVAL_OUT [out/evals]   BASE_RUN [the newest run in EVAL_OUT/history]
#   MASTER [unset: bin/scorch on local[*]; else spark-submit --master MASTER with the jobs jar]
#   JOB_CONF [conf/local.conf]           SPARK_SUBMIT [spark-submit]
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: conf/eval-nightly.sh MODEL_DIR [RUN_ID]}
run_id=${2:-$(basename "$model")-$(date -u +%Y%m%dT%H%M%SZ)}
suite=${SUITE:-conf/evals/demo-suite.yaml}
out=${EVAL_OUT:-out/evals}
# The base run: given, else the most recently written run partition of a local history folder.
base=${BASE_RUN:-$(ls -1t "$out/history" 2>/dev/null | sed -n 's/^run_id=//p' | head -n 1 || true)}

args=(--model "$model" --suite "$suite" --output "$out" --run-id "$run_id" --conf "${JOB_CONF:-conf/local.conf}")
if [ -n "$base" ]; then
  args+=(--compare-to "$base")
fi
echo "eval-nightly: run $run_id of $model${base:+, compared with $base}" >&2
if [ -z "${MASTER:-}" ]; then
  exec bin/scorch eval "${args[@]}"
fi
jar=jobs/target/scorch-jobs.jar
[ -f "$jar" ] || mvn -B -q -Dmaven.test.skip=true package
exec "${SPARK_SUBMIT:-spark-submit}" --master "$MASTER" \
  --driver-java-options "$(cat jobs/target/classes/scorch-jvm.flags)" \
  --conf spark.executor.extraJavaOptions="$(cat jobs/target/classes/scorch-jvm.flags)" \
  --class dev.scorch.jobs.eval.EvalJob "$jar" "${args[@]}"
