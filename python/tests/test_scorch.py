"""The scorch module's logic against a stub py4j gateway (PySpark is not needed): what reaches the Java API, and
what comes back."""

import sys
import types
import unittest

import scorch


class JvmPath:
    """A stub py4j JVM view: attribute access names a deeper package, class or method; a call is logged and
    answered from the session's table."""

    def __init__(self, name, session):
        self._name, self._session = name, session

    def __getattr__(self, attr):
        return JvmPath(self._name + "." + attr, self._session)

    def __call__(self, *args):
        self._session.log.append((self._name, args))
        return self._session.answers[self._name](*args)


class JavaMap(dict):
    def put(self, k, v):
        self[k] = v


class JavaList(list):
    def add(self, v):
        self.append(v)


class Session:
    def __init__(self, version="4.2.0"):
        self.log = []
        self.version = version
        self._jsparkSession = "jspark"
        answers = {
            "jvm.java.util.HashMap": lambda: JavaMap(),
            "jvm.java.util.ArrayList": lambda: JavaList(),
            "jvm.dev.scorch.udfs.api.ScorchModel.load": lambda s, p, o: JavaModel(self.log),
            "jvm.dev.scorch.udfs.api.ScoreParams.fromMap": lambda m: ("ScoreParams", dict(m)),
            "jvm.dev.scorch.udfs.api.GenerateParams.fromMap": lambda m: ("GenerateParams", dict(m)),
        }
        self.answers = answers
        self._jvm = JvmPath("jvm", self)


class JavaModel:
    def __init__(self, log):
        self.log = log

    def score(self, jdf, jparams):
        self.log.append(("score", (jdf, jparams)))
        return "scored-" + jdf

    def generate(self, jdf, jparams):
        self.log.append(("generate", (jdf, jparams)))
        return "generated-" + jdf

    def label(self):
        return "demo-tiny@49ea278120f8"

    def weights(self):
        return "broadcast"

    def close(self):
        self.log.append(("close", ()))


class DataFrame:
    def __init__(self, jdf, session):
        self._jdf, self.session = jdf, session


class ScorchModuleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # A stand-in pyspark.sql with the DataFrame(jdf, session) constructor PySpark 4 has.
        pyspark = types.ModuleType("pyspark")
        sql = types.ModuleType("pyspark.sql")
        sql.DataFrame = DataFrame
        pyspark.sql = sql
        sys.modules.setdefault("pyspark", pyspark)
        sys.modules.setdefault("pyspark.sql", sql)

    def test_load_passes_the_session_path_and_weights(self):
        spark = Session()
        model = scorch.ScorchModel.load(spark, "/models/demo", weights="broadcast")
        name, args = spark.log[-1]
        self.assertEqual("jvm.dev.scorch.udfs.api.ScorchModel.load", name)
        self.assertEqual(("jspark", "/models/demo", {"weights": "broadcast"}), args)
        self.assertIsInstance(args[2], JavaMap)
        self.assertEqual("demo-tiny@49ea278120f8", model.label)
        self.assertEqual("broadcast", model.weights)

    def test_load_without_weights_passes_an_empty_map(self):
        spark = Session()
        scorch.ScorchModel.load(spark, "/m")
        self.assertEqual({}, spark.log[-1][1][2])
        with self.assertRaisesRegex(ValueError, "weights 'hdfs'"):
            scorch.ScorchModel.load(spark, "/m", weights="hdfs")

    def test_score_converts_params_and_wraps_the_result(self):
        spark = Session()
        model = scorch.ScorchModel.load(spark, "/m")
        out = model.score(DataFrame("jdf", spark), text_col="text", top_k=5, logits="last", threads=None)
        self.assertIsInstance(out, DataFrame)
        self.assertEqual("scored-jdf", out._jdf)
        self.assertIs(spark, out.session)
        self.assertEqual(("score", ("jdf", ("ScoreParams", {"text_col": "text", "top_k": 5, "logits": "last"}))),
                         spark.log[-1])

    def test_generate_passes_lists_as_java_lists(self):
        spark = Session()
        model = scorch.ScorchModel.load(spark, "/m")
        model.generate(DataFrame("jdf", spark), n=2, temperature=0.7, stop=["\n", "Q:"], stop_token_ids=(1, 2))
        name, (jdf, (kind, params)) = spark.log[-1]
        self.assertEqual(("generate", "jdf", "GenerateParams"), (name, jdf, kind))
        self.assertEqual({"n": 2, "temperature": 0.7, "stop": ["\n", "Q:"], "stop_token_ids": [1, 2]}, params)
        self.assertIsInstance(params["stop"], JavaList)
        self.assertIsInstance(params["stop_token_ids"], JavaList)

    def test_unknown_params_fail_before_the_jvm_is_asked(self):
        spark = Session()
        model = scorch.ScorchModel.load(spark, "/m")
        calls = len(spark.log)
        with self.assertRaisesRegex(ValueError, "score: unknown parameter\\(s\\) topk"):
            model.score(DataFrame("jdf", spark), topk=3)
        with self.assertRaisesRegex(ValueError, "generate: unknown parameter\\(s\\) window_rows"):
            model.generate(DataFrame("jdf", spark), window_rows=3)
        self.assertEqual(calls, len(spark.log))

    def test_close_and_context_manager(self):
        spark = Session()
        with scorch.ScorchModel.load(spark, "/m") as model:
            self.assertIsInstance(model, scorch.ScorchModel)
        self.assertEqual(("close", ()), spark.log[-1])

    def test_needs_a_classic_spark_4_session(self):
        connect = Session()
        connect._jvm = None
        with self.assertRaisesRegex(TypeError, "not Spark Connect"):
            scorch.ScorchModel.load(connect, "/m")
        with self.assertRaisesRegex(RuntimeError, "built for Spark 4.x .* runs Spark 3.5.1"):
            scorch.ScorchModel.load(Session("3.5.1"), "/m")

    def test_param_names_match_the_java_api(self):
        # The Java side's fromMap lists the same names; a key missing here could never be passed.
        self.assertIn("continuation_col", scorch.SCORE_PARAMS)
        self.assertIn("row_overrides", scorch.GENERATE_PARAMS)
        self.assertNotIn("window_rows", scorch.GENERATE_PARAMS)


if __name__ == "__main__":
    unittest.main()
