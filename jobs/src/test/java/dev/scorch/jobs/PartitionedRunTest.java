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
    void spreadShufflesUnlessTheRowsAreKnownToFillThePartitionsAskedEvenly() {
        SparkSession spark = SparkTests.spark();
        Dataset<Row> one = spark.range(0, 10, 1, 1).toDF("id");

        Dataset<Row> kept = PartitionedRun.spread(one, true, 1);
        assertEquals(1, kept.rdd().getNumPartitions());
        assertFalse(
                kept.queryExecution().executedPlan().toString().contains("Exchange"),
                "one even partition asked of one: no shuffle");

        Dataset<Row> spread = PartitionedRun.spread(one, true, 3);
        assertEquals(3, spread.rdd().getNumPartitions());
        assertTrue(
                spread.queryExecution().executedPlan().toString().contains("Exchange"),
                "three asked of one: a shuffle");
        assertEquals(ids(one), ids(spread), "every row once, either way");

        Dataset<Row> unknown = PartitionedRun.spread(one, false, 1);
        assertTrue(
                unknown.queryExecution().executedPlan().toString().contains("Exchange"),
                "not known to be even (after a resume's join): a shuffle");
    }

    @Test
    void balanceIsJudgedByRowsNotByThePartitionCount() {
        // The review's case: one JSONL file of 20,000 rows that Spark split by bytes into 18,556 + 1,444 rows.
        assertFalse(PartitionedRun.balanced(new long[] {18_556, 1_444}, 2));
        assertTrue(PartitionedRun.balanced(new long[] {10_000, 10_000}, 2));
        assertTrue(PartitionedRun.balanced(new long[] {10_500, 9_500}, 2), "within 10 % of an even share");
        assertFalse(PartitionedRun.balanced(new long[] {11_500, 8_500}, 2));
        assertFalse(PartitionedRun.balanced(new long[] {10_000, 10_000}, 4), "two partitions are not the four asked");
        assertTrue(PartitionedRun.balanced(new long[] {1, 0}, 2), "a row more than even is even");
        assertTrue(PartitionedRun.balanced(new long[] {7}, 1));
    }

    private static List<Long> ids(Dataset<Row> d) {
        return d.collectAsList().stream().map(r -> r.getLong(0)).sorted().collect(Collectors.toList());
    }
}
