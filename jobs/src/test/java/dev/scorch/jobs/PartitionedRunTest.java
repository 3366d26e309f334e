package dev.scorch.jobs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.jobs.score.SparkTests;
import java.util.List;
import java.util.stream.Collectors;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;

class PartitionedRunTest {
  @Test
  void spreadShufflesUnlessTheRowsAreKnownToBeInThePartitionsAsked() {
    SparkSession spark = SparkTests.spark();
    Dataset<Row> one = spark.range(0, 10, 1, 1).toDF("id");

    Dataset<Row> kept = PartitionedRun.spread(one, 1, 1);
    assertEquals(1, kept.rdd().getNumPartitions());
    assertFalse(kept.queryExecution().executedPlan().toString().contains("Exchange"), "one partition asked of one: no shuffle");

    Dataset<Row> spread = PartitionedRun.spread(one, 1, 3);
    assertEquals(3, spread.rdd().getNumPartitions());
    assertTrue(spread.queryExecution().executedPlan().toString().contains("Exchange"), "three asked of one: a shuffle");
    assertEquals(ids(one), ids(spread), "every row once, either way");

    Dataset<Row> unknown = PartitionedRun.spread(one, 0, 1);
    assertTrue(unknown.queryExecution().executedPlan().toString().contains("Exchange"), "a count not known (after a resume's join): a shuffle");
  }

  private static List<Long> ids(Dataset<Row> d) {
    return d.collectAsList().stream().map(r -> r.getLong(0)).sorted().collect(Collectors.toList());
  }
}
