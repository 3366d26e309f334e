package dev.scorch.jobs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.SparkConf;
import org.junit.jupiter.api.Test;

/** The executor wait's message and the Master UI it reads (the wait itself: StandaloneClusterResourcesTest). */
class ExecutorWaitTest {
    @Test
    void localMastersAreNotWaitedFor() {
        assertTrue(ExecutorWait.isLocal("local"));
        assertTrue(ExecutorWait.isLocal("local[2]"));
        assertFalse(ExecutorWait.isLocal("local-cluster[2,1,1024]"));
        assertFalse(ExecutorWait.isLocal("spark://h:7077"));
    }

    @Test
    void theMasterUiDefaultsToPort8080OfTheFirstMaster() {
        SparkConf c = new SparkConf(false);
        assertEquals("http://h1:8080", ExecutorWait.masterUi(c, "spark://h1:7077,h2:7077"));
        c.set(ExecutorWait.MASTER_UI_CONF, "http://ui:9090/");
        assertEquals("http://ui:9090", ExecutorWait.masterUi(c, "spark://h1:7077"));
    }

    @Test
    void theMessageNamesWhatWasAskedForAndWhatTheWorkersOffer() throws Exception {
        String json = "{\"workers\":[{\"host\":\"w1\",\"cores\":1,\"coresfree\":1,\"memory\":1024,\"memoryfree\":512,"
                + "\"state\":\"ALIVE\"},{\"host\":\"w2\",\"cores\":8,\"coresfree\":8,\"memory\":4096,"
                + "\"memoryfree\":4096,\"state\":\"DEAD\"}]}";
        assertEquals(
                "1 alive Worker (w1: 1 cores (1 free), 1024 MiB (512 MiB free))",
                ExecutorWait.offer(new ObjectMapper().readTree(json)));
        SparkConf c = new SparkConf(false).set("spark.executor.cores", "4").set("spark.executor.memory", "8g");
        String m = ExecutorWait.message(c, "yarn", 30);
        assertTrue(
                m.startsWith("no executor registered within 30 s (spark.scorch.executorWait): the application asks"
                        + " for executors of 4 cores and 8g (8192 MiB) of memory"),
                m);
        assertTrue(m.contains("on master yarn"), m);
        // A standalone Master whose UI does not answer: what was asked for, and where the offer could not be read.
        c.set(ExecutorWait.MASTER_UI_CONF, "http://127.0.0.1:1");
        m = ExecutorWait.message(c, "spark://127.0.0.1:7077", 30);
        assertTrue(m.contains("could not be read from http://127.0.0.1:1/json/"), m);
    }
}
