"""Scorch from PySpark: the Java DataFrame API (dev.scorch.udfs.api.ScorchModel) through the py4j gateway of a
running SparkSession.

    from scorch import ScorchModel
    with ScorchModel.load(spark, "/models/Kimi-K2-Instruct") as model:
        scored = model.score(df, text_col="text", top_k=5)

Targets PySpark 4.0 and later 4.x in classic mode (a JVM driver reached through py4j, not Spark Connect), with the
Scorch jar (jobs/target/scorch-jobs.jar) on the driver's and executors' class path, e.g. ``--jars``. Parameters are
the Java API's (ScoreParams.fromMap, GenerateParams.fromMap): the command line's option names with '_' for '-'.
"""

__all__ = ["ScorchModel", "SCORE_PARAMS", "GENERATE_PARAMS", "MIN_SPARK_MAJOR"]

#: Spark major version the Scorch jar is built for (Spark 4, Scala 2.13).
MIN_SPARK_MAJOR = 4

#: Keyword arguments of ScorchModel.score, as ScoreParams.fromMap reads them.
SCORE_PARAMS = frozenset({
    "token_ids_col", "text_col", "continuation_col", "output_prefix", "top_k", "logits", "max_batch_tokens",
    "window_rows", "arrow_memory_mb", "threads", "backend", "gpu_precision", "cpu_precision", "share_prefixes", "score_from_col",
    "shared_prefix_col",
})

#: Keyword arguments of ScorchModel.generate, as GenerateParams.fromMap reads them.
GENERATE_PARAMS = frozenset({
    "token_ids_col", "text_col", "messages_col", "output_prefix", "row_overrides", "max_new_tokens", "temperature",
    "top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty", "seed", "stop",
    "stop_token_ids", "ignore_eos", "n", "logprobs", "top_logprobs", "max_cache_mb", "max_batch_tokens",
    "max_batch_seqs", "threads", "backend", "gpu_precision", "cpu_precision",
})

_WEIGHTS = ("broadcast", "files", "shared-path")


def _jvm(spark):
    """The session's py4j JVM view; a Spark Connect session has none."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None or getattr(spark, "_jsparkSession", None) is None:
        raise TypeError(
            "scorch needs a classic SparkSession with a py4j gateway (PySpark %d.x, not Spark Connect)"
            % MIN_SPARK_MAJOR)
    version = str(spark.version)
    try:
        major = int(version.split(".")[0])
    except ValueError:
        raise RuntimeError("cannot read Spark's version %r" % version) from None
    if major < MIN_SPARK_MAJOR:
        raise RuntimeError(
            "the Scorch jar is built for Spark %d.x (Scala 2.13); this session runs Spark %s"
            % (MIN_SPARK_MAJOR, version))
    return jvm


def _java(jvm, value):
    """A Python value as py4j passes it to Java: lists and tuples become java.util.ArrayList."""
    if isinstance(value, (list, tuple)):
        out = jvm.java.util.ArrayList()
        for v in value:
            out.add(_java(jvm, v))
        return out
    if isinstance(value, dict):
        out = jvm.java.util.HashMap()
        for k, v in value.items():
            out.put(k, _java(jvm, v))
        return out
    return value


def _params(kind, allowed, params):
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError("%s: unknown parameter(s) %s; expected some of %s"
                         % (kind, ", ".join(unknown), ", ".join(sorted(allowed))))
    return {k: v for k, v in params.items() if v is not None}


def _dataframe(jdf, spark):
    from pyspark.sql import DataFrame  # imported here: the module's logic is testable without PySpark
    return DataFrame(jdf, spark)


class ScorchModel:
    """A checkpoint loaded for a session's DataFrames (see the Java class ScorchModel): weights shipped once,
    score and generate as lazy transforms that keep every input column."""

    def __init__(self, spark, jmodel):
        self._spark = spark
        self._j = jmodel

    @classmethod
    def load(cls, spark, path, weights=None):
        """Validates the checkpoint folder on the driver and ships its weights: weights is "broadcast", "files" or
        "shared-path" (None: shared-path on a local master, else broadcast)."""
        jvm = _jvm(spark)
        if weights is not None and weights not in _WEIGHTS:
            raise ValueError("weights %r: expected one of %s" % (weights, ", ".join(_WEIGHTS)))
        options = _java(jvm, {} if weights is None else {"weights": weights})
        jmodel = jvm.dev.scorch.udfs.api.ScorchModel.load(spark._jsparkSession, str(path), options)
        return cls(spark, jmodel)

    def score(self, df, **params):
        """df with the score columns added (num_tokens, scored_token_ids, token_logprobs, sum_logprob,
        mean_logprob, perplexity, [top_logprobs], [logits], error, model); lazy."""
        jvm = self._spark._jvm
        p = _params("score", SCORE_PARAMS, params)
        jparams = jvm.dev.scorch.udfs.api.ScoreParams.fromMap(_java(jvm, p))
        return _dataframe(self._j.score(df._jdf, jparams), self._spark)

    def generate(self, df, **params):
        """df with n rows per input row and the generate columns (sample, completion, completion_token_ids,
        finish_reason, num_prompt_tokens, num_completion_tokens, [token_logprobs], [top_logprobs], error, model);
        lazy. Sampling values left out come from the checkpoint's generation_config.json."""
        jvm = self._spark._jvm
        p = _params("generate", GENERATE_PARAMS, params)
        jparams = jvm.dev.scorch.udfs.api.GenerateParams.fromMap(_java(jvm, p))
        return _dataframe(self._j.generate(df._jdf, jparams), self._spark)

    @property
    def label(self):
        """name@hash of the checkpoint, as in every result row's model column."""
        return self._j.label()

    @property
    def weights(self):
        """How the weights were shipped: broadcast, files or shared-path."""
        return self._j.weights()

    def close(self):
        """Frees broadcast weights; DataFrames made by this model fail once run after it."""
        self._j.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
