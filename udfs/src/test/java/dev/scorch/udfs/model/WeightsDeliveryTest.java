package dev.scorch.udfs.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.scorch.engine.checkpoint.CheckpointException;
import dev.scorch.engine.checkpoint.ModelManifest;
import dev.scorch.udfs.api.ApiTests;
import dev.scorch.udfs.api.ScorchModel;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.Test;

/** The default delivery mode by master and size, the broadcast limit, and broadcast's refusal past it. */
class WeightsDeliveryTest {
    static final long GIB = 1L << 30;

    static ModelManifest sized(long bytes) {
        return new ModelManifest(
                "Kimi-K2-Instruct",
                List.of(new ModelManifest.FileEntry("model-00001-of-00001.safetensors", bytes, 0)),
                "0123456789ab" + "0".repeat(52));
    }

    @Test
    void theDefaultFollowsTheMasterAndTheCheckpointsSize() {
        long max = 4 * GIB;
        assertEquals("shared-path", WeightsDelivery.defaultMode(true, 1000, max), "local master: read in place");
        assertEquals("shared-path", WeightsDelivery.defaultMode(true, 1000 * GIB, max));
        assertEquals("broadcast", WeightsDelivery.defaultMode(false, 500_000_000, max));
        assertEquals("broadcast", WeightsDelivery.defaultMode(false, max, max), "at the limit: still broadcast");
        assertEquals("shared-path", WeightsDelivery.defaultMode(false, max + 1, max));
        assertEquals("shared-path", WeightsDelivery.defaultMode(false, 1_000_000_000_000L, max), "1 TB");
        assertEquals(
                "model 931.32 GiB is over the broadcast limit 4.00 GiB (spark.scorch.weights.broadcastMaxSize)",
                WeightsDelivery.defaultReason(false, 1_000_000_000_000L, max));
    }

    @Test
    void theBroadcastLimitIsASparkByteSizeDefaultingTo4GiB() {
        assertEquals(4 * GIB, WeightsDelivery.broadcastMax(new SparkConf(false)));
        assertEquals(
                512L << 20,
                WeightsDelivery.broadcastMax(new SparkConf(false).set(WeightsDelivery.BROADCAST_MAX_CONF, "512m")));
        assertEquals(
                0, WeightsDelivery.broadcastMax(new SparkConf(false).set(WeightsDelivery.BROADCAST_MAX_CONF, "0")));
    }

    @Test
    void broadcastPastTheLimitIsRefusedSayingWhatToUseInstead() {
        WeightsDelivery.checkBroadcast(sized(4 * GIB), 4 * GIB); // at the limit: allowed
        CheckpointException e = assertThrows(
                CheckpointException.class, () -> WeightsDelivery.checkBroadcast(sized(4 * GIB + 1), 4 * GIB));
        assertEquals(
                "model Kimi-K2-Instruct@0123456789ab is 4294967297 bytes (4.00 GiB), over the broadcast limit of 4294967296"
                        + " bytes (4.00 GiB, spark.scorch.weights.broadcastMaxSize): --weights broadcast would hold a full"
                        + " copy in the driver's block store before any task runs. Use --weights shared-path with a folder"
                        + " every executor sees at the same path (NFS or a local copy: mapped in place), or with an hdfs://"
                        + " or s3a:// path (each host copies it once into its model cache); or raise"
                        + " spark.scorch.weights.broadcastMaxSize.",
                e.getMessage());
    }

    /** ScorchModel resolves auto (and no option) on the local[2] master to shared-path, the folder read in place. */
    @Test
    void autoOnALocalMasterIsSharedPath() {
        try (ScorchModel auto =
                        ScorchModel.load(ApiTests.spark(), ApiTests.demoModel().toString(), Map.of("weights", "auto"));
                ScorchModel none =
                        ScorchModel.load(ApiTests.spark(), ApiTests.demoModel().toString())) {
            assertEquals("shared-path", auto.weights());
            assertEquals("shared-path", none.weights());
        }
    }

    /** BroadcastSource refuses a 1 TB manifest before reading a byte (its files do not even exist here). */
    @Test
    void broadcastSourceRefusesBeforeReadingAnything() {
        JavaSparkContext jsc =
                JavaSparkContext.fromSparkContext(ApiTests.spark().sparkContext());
        CheckpointException e = assertThrows(
                CheckpointException.class,
                () -> BroadcastSource.ship(jsc, Path.of("/nonexistent/Kimi-K2-Instruct"), sized(1_000_000_000_000L)));
        assertEquals(
                "model Kimi-K2-Instruct@0123456789ab is 1000000000000 bytes (931.32 GiB), over the broadcast limit",
                e.getMessage().substring(0, e.getMessage().indexOf(" of ")));
    }
}
