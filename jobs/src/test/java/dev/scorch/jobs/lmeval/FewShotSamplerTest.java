package dev.scorch.jobs.lmeval;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/**
 * Expected draws were computed by CPython 3.11 running lm-eval's own samplers.py (commit 4e7e0d47f) over docs
 * {@code [{"id": i} for i in range(N)]}, with {@code sampler.set_rnd(seed)} once and one {@code sample} call per
 * evaluation document in order.
 */
class FewShotSamplerTest {
    private static List<Map<String, Object>> docs(int n) {
        return IntStream.range(0, n)
                .mapToObj(i -> Map.<String, Object>of("id", i))
                .toList();
    }

    private static List<Integer> ids(List<Map<String, Object>> docs) {
        return docs.stream().map(d -> (Integer) d.get("id")).toList();
    }

    private static List<List<Integer>> run(
            FewShotSampler<Map<String, Object>> s,
            List<Map<String, Object>> docs,
            int n,
            int count,
            boolean sameSplit) {
        List<List<Integer>> out = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            out.add(ids(s.sample(n, sameSplit ? docs.get(i) : null)));
        }
        return out;
    }

    @Test
    void defaultSamplerDrawsNPlusOneAndDropsTheEvalDocWhenTheSplitsAreTheSame() {
        var d = docs(10);
        var s = FewShotSampler.named("default", d, FewShotSampler.DEFAULT_SEED);
        assertEquals(
                List.of(
                        List.of(7, 1, 9),
                        List.of(9, 0, 8),
                        List.of(5, 3, 0),
                        List.of(0, 5, 7),
                        List.of(7, 2, 1),
                        List.of(1, 0, 7)),
                run(s, d, 3, 6, true));
        for (List<Integer> shots : run(FewShotSampler.named("default", d, 1234), d, 9, 10, true)) {
            assertEquals(9, shots.size());
        }
        var nine = run(FewShotSampler.named("default", d, 1234), d, 9, 3, true);
        // the eval doc was drawn among the 10 and dropped: each list lacks its own index
        assertEquals(List.of(7, 1, 9, 4, 6, 5, 3, 8, 2), nine.get(0));
        assertEquals(List.of(0, 9, 8, 2, 5, 4, 3, 6, 7), nine.get(1));
        assertEquals(List.of(1, 9, 6, 0, 4, 3, 5, 8, 7), nine.get(2));
    }

    @Test
    void defaultSamplerDrawsExactlyNFromAnotherSplit() {
        var d = docs(10);
        assertEquals(
                List.of(List.of(7, 1, 0), List.of(1, 0, 9), List.of(1, 5, 3), List.of(0, 9, 8)),
                run(FewShotSampler.named(null, d, 1234), d, 3, 4, false));
    }

    @Test
    void defaultSamplerOnALargePoolUsesSetSelection() {
        var d = docs(200);
        assertEquals(
                List.of(
                        List.of(199, 112, 29, 1, 23),
                        List.of(8, 171, 177, 21, 25),
                        List.of(90, 60, 4, 7, 88),
                        List.of(159, 123, 157, 118, 38)),
                run(FewShotSampler.named("default", d, 1234), d, 5, 4, true));
        var s = FewShotSampler.named("default", d, 42);
        assertEquals(
                List.of(163, 28, 6, 189, 70, 62), ids(s.sample(25, d.get(0))).subList(0, 6));
        assertEquals(
                List.of(179, 139, 107, 56, 114, 150),
                ids(s.sample(25, d.get(1))).subList(0, 6));
    }

    @Test
    void zeroShotsDrawNothingFromTheStream() {
        var d = docs(10);
        var s = FewShotSampler.named("default", d, 1234);
        assertEquals(List.of(), s.sample(0, d.get(0)));
        assertEquals(List.of(7, 0), ids(s.sample(2, d.get(1))));
    }

    @Test
    void firstNDropsTheEvalDocAndKeepsOrder() {
        var d = docs(10);
        var s = FewShotSampler.named("first_n", d, 1234);
        assertEquals(List.of(0, 2, 3), ids(s.sample(3, d.get(1))));
        assertEquals(List.of(0, 1, 2), ids(s.sample(3, null)));
        assertThrows(IllegalArgumentException.class, () -> s.sample(10, d.get(1)));
    }

    @Test
    void refusals() {
        var d = docs(3);
        var e = assertThrows(IllegalArgumentException.class, () -> FewShotSampler.named("balanced", d, 1));
        assertTrue(e.getMessage().contains("balanced"));
        assertThrows(IllegalArgumentException.class, () -> FewShotSampler.named("manual", d, 1));
        // n + 1 > pool: Python's sample raises too
        assertThrows(
                IllegalArgumentException.class,
                () -> FewShotSampler.named("default", d, 1).sample(3, d.get(0)));
        // the eval doc twice in the pool: fewer than n remain, as lm-eval's assertion
        var dup = List.<Map<String, Object>>of(Map.of("id", 0), Map.of("id", 0), Map.of("id", 1));
        assertThrows(
                IllegalStateException.class,
                () -> FewShotSampler.named("default", dup, 1234).sample(2, dup.get(0)));
    }
}
