package dev.scorch.udfs.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.sampling.SamplingParams;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * ScorchModel.generate on the demo model: n result rows per input row, each with the input row's columns; seeded
 * samples that do not depend on the partitioning; bad rows as n error rows; per-row overrides only when asked for.
 */
class ScorchModelGenerateTest {
    static final StructType INPUT = new StructType()
            .add("key", DataTypes.IntegerType)
            .add("token_ids", new ArrayType(DataTypes.LongType, true))
            .add("tags", new ArrayType(DataTypes.StringType, true))
            .add("max_new_tokens", DataTypes.IntegerType);

    static SparkSession spark;
    static ScorchModel model;

    @BeforeAll
    static void load() {
        spark = ApiTests.spark();
        model = ScorchModel.load(spark, ApiTests.demoModel().toString());
    }

    @AfterAll
    static void close() {
        model.close();
    }

    static Dataset<Row> input(int partitions) {
        List<Row> rows = List.of(
                RowFactory.create(0, Arrays.asList(5L, 6L, 7L), Arrays.asList("a", null), 2),
                RowFactory.create(1, Arrays.asList(9L, 700L), null, null),
                RowFactory.create(2, Arrays.asList(40L, 41L), List.of(), null),
                RowFactory.create(3, null, null, 1));
        return spark.createDataFrame(rows, INPUT).repartition(partitions);
    }

    static GenerateParams params() {
        return new GenerateParams()
                .setSampling(SamplingParams.temperature(0.9, 5))
                .setMaxNewTokens(4)
                .setIgnoreEos(true)
                .setN(3);
    }

    @Test
    void givesNRowsPerInputRowBesideItsColumns() {
        Dataset<Row> out = model.generate(input(2), params());
        assertEquals(
                List.of(
                        "key",
                        "token_ids",
                        "tags",
                        "max_new_tokens",
                        "sample",
                        "completion",
                        "completion_token_ids",
                        "finish_reason",
                        "num_prompt_tokens",
                        "num_completion_tokens",
                        "error",
                        "model"),
                Arrays.asList(out.columns()));
        List<Row> rows = out.orderBy("key", "sample").collectAsList();
        assertEquals(12, rows.size());
        for (int i = 0; i < rows.size(); i++) {
            Row r = rows.get(i);
            assertEquals(i / 3, (int) r.getAs("key"));
            assertEquals(i % 3, (int) r.getAs("sample"));
        }
        Row first = rows.get(0);
        assertEquals(Arrays.asList("a", null), first.getList(first.fieldIndex("tags")));
        for (Row r : rows.subList(0, 3)) {
            assertNull(r.getAs("error"));
            assertEquals("length", r.getAs("finish_reason"));
            assertEquals(
                    4, (int) r.getAs("num_completion_tokens"), "max_new_tokens 4: the row's own column is not read");
            assertEquals(3, (int) r.getAs("num_prompt_tokens"));
        }
        for (Row r : rows.subList(3, 6)) {
            assertEquals("error", r.getAs("finish_reason"));
            assertEquals("token id 700 at position 1 is outside the vocabulary [0, 512)", r.getAs("error"));
            assertEquals(List.of(9L, 700L), r.getList(r.fieldIndex("token_ids")));
        }
        for (Row r : rows.subList(9, 12)) {
            assertEquals("no prompt: token_ids, prompt and messages are all null", r.getAs("error"));
        }
    }

    @Test
    void samplesDoNotDependOnPartitionsAndRowOverridesAreOptIn() {
        List<String> one = model.generate(input(1), params())
                .orderBy("key", "sample")
                .select("completion_token_ids")
                .toJSON()
                .collectAsList();
        List<String> three = model.generate(input(3), params())
                .orderBy("key", "sample")
                .select("completion_token_ids")
                .toJSON()
                .collectAsList();
        assertEquals(one, three);

        List<Row> rows = model.generate(input(2), params().setRowOverrides(true))
                .where("key = 0")
                .collectAsList();
        for (Row r : rows) {
            assertEquals(2, (int) r.getAs("num_completion_tokens"), "the row's max_new_tokens 2");
        }
        assertTrue(rows.size() == 3);
    }
}
