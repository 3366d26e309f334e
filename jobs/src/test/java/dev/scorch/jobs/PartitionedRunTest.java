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
  void spreadShufflesOnlyWhenThePartitionCountDiffers() {
    SparkSession spark = SparkTests.spark();
    Dataset<Row> one = spark.range(0, 10, 1, 1).toDF("id");

    Dataset<Row> kept = PartitionedRun.spread(one, 1);
    assertEquals(1, kept.rdd().getNumPartitions());
    assertFalse(kept.queryExecution().executedPlan().toString().contains("Exchange"), "one partition asked of one: no shuffle");

    Dataset<Row> spread = PartitionedRun.spread(one, 3);
    assertEquals(3, spread.rdd().getNumPartitions());
    assertTrue(spread.queryExecution().executedPlan().toString().contains("Exchange"), "three asked of one: a shuffle");
    assertEquals(ids(one), ids(spread), "every row once, either way");
  }

  private static List<Long> ids(Dataset<Row> d) {
    return d.collectAsList().stream().map(r -> r.getLong(0)).sorted().collect(Collectors.toList());
  }
}
