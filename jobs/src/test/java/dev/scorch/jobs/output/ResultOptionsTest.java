package dev.scorch.jobs.output;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.jobs.JobSpec;
import dev.scorch.jobs.generate.GenerateSpec;
import dev.scorch.jobs.score.ScoreSpec;
import java.lang.reflect.Constructor;
import java.lang.reflect.RecordComponent;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * A run's identity records every option that changes a result row: each component of a job's spec is either declared
 * result-neutral or changes {@link JobSpec#resultOptions()} when it changes, so a new option cannot slip past --resume's
 * check by being forgotten.
 */
class ResultOptionsTest {

    @Test
    void everyScoreOptionIsRecordedOrDeclaredNeutral() throws Exception {
        check(ScoreSpec.class, ScoreSpec.RESULT_NEUTRAL);
    }

    @Test
    void everyGenerateOptionIsRecordedOrDeclaredNeutral() throws Exception {
        check(GenerateSpec.class, GenerateSpec.RESULT_NEUTRAL);
    }

    private static void check(Class<? extends Record> type, Set<String> neutral) throws Exception {
        RecordComponent[] cs = type.getRecordComponents();
        Constructor<?> ctor = type.getDeclaredConstructor(
                java.util.Arrays.stream(cs).map(RecordComponent::getType).toArray(Class[]::new));
        Object[] base = new Object[cs.length];
        for (int i = 0; i < cs.length; i++) {
            base[i] = value(cs[i], false);
        }
        Map<String, String> baseOptions = ((JobSpec) ctor.newInstance(base)).resultOptions();
        List<String> unrecorded = new ArrayList<>();
        for (int i = 0; i < cs.length; i++) {
            String name = cs[i].getName();
            Object[] changed = base.clone();
            changed[i] = value(cs[i], true);
            Map<String, String> options = ((JobSpec) ctor.newInstance(changed)).resultOptions();
            if (neutral.contains(name)) {
                assertEquals(
                        baseOptions, options, name + " is declared result-neutral but changes the recorded options");
            } else if (options.equals(baseOptions)) {
                unrecorded.add(name);
            }
        }
        assertTrue(
                unrecorded.isEmpty(),
                type.getSimpleName() + ": " + unrecorded
                        + " change results but are not in resultOptions() (add them, or to RESULT_NEUTRAL if they"
                        + " change no bits)");
        for (String n : neutral) {
            assertTrue(
                    java.util.Arrays.stream(cs).anyMatch(c -> c.getName().equals(n)),
                    "RESULT_NEUTRAL names " + n + ", which " + type.getSimpleName() + " does not have");
        }
    }

    /** A valid value for a component, and a different one. */
    private static Object value(RecordComponent c, boolean other) {
        Class<?> t = c.getType();
        String n = c.getName();
        if (t == String.class) {
            if (n.equals("input") || n.equals("output") || n.equals("model")) {
                return other ? "/b/" + n + ".jsonl" : "/a/" + n + ".jsonl";
            }
            if (n.endsWith("Format")) {
                return other ? "parquet" : "jsonl";
            }
            return other ? n + "_b" : n + "_a";
        }
        if (t == int.class || t == Integer.class) {
            return other ? 2 : 1;
        }
        if (t == long.class || t == Long.class) {
            return other ? 2L : 1L;
        }
        if (t == double.class || t == Double.class) {
            return other ? 0.25 : 0.5;
        }
        if (t == boolean.class || t == Boolean.class) {
            return other;
        }
        if (t.isEnum()) {
            Object[] constants = t.getEnumConstants();
            assertNotEquals(1, constants.length, n);
            return constants[other ? 1 : 0];
        }
        if (t == List.class) {
            return other ? List.of("x") : List.of();
        }
        throw new AssertionError("no test value for " + n + " of " + t);
    }
}
