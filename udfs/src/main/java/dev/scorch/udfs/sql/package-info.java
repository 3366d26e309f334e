/**
 * Spark SQL functions over a model's tokenizer: {@code scorch_tokenize}, {@code scorch_tokenize_raw},
 * {@code scorch_detokenize}, {@code scorch_num_tokens} and {@code scorch_chat}, registered on a session by
 * {@link dev.scorch.udfs.sql.ScorchFunctions#register(org.apache.spark.sql.SparkSession, java.nio.file.Path)}.
 * The tokenizer files travel as a broadcast and are loaded once per executor JVM
 * ({@link dev.scorch.udfs.sql.ExecutorTokenizerCache}).
 */
package dev.scorch.udfs.sql;
