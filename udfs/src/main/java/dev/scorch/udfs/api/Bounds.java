package dev.scorch.udfs.api;

import java.io.Serializable;
import java.util.Locale;

/**
 * The ranges every numeric setting is held to, on the driver, before any task starts: the CLI's options, the API's
 * parameters and the ML stages' Params share them, so a value one refuses the others refuse too. The upper bounds are
 * far above any real use and low enough that a typo cannot make a task start 100,000 threads or reserve a petabyte:
 * threads 1,024 is every hardware thread of a 512-core, two-way SMT node.
 */
public final class Bounds {
    private Bounds() {}

    /** A closed range of whole numbers. */
    public record Ints(long min, long max) implements Serializable {
        /** v, or an IllegalArgumentException "NAME V: expected MIN to MAX". */
        public int check(String name, long v) {
            if (v < min || v > max) {
                throw new IllegalArgumentException(name + " " + v + ": expected " + range());
            }
            return (int) v;
        }

        /** v as a long (for ranges past int), or the same exception as {@link #check}. */
        public long checkLong(String name, long v) {
            if (v < min || v > max) {
                throw new IllegalArgumentException(name + " " + v + ": expected " + range());
            }
            return v;
        }

        public boolean contains(long v) {
            return v >= min && v <= max;
        }

        /** "MIN to MAX". */
        public String range() {
            return min + " to " + max;
        }
    }

    /** A range of finite decimals, its lower end open or closed, its upper end closed. */
    public record Decimals(double min, boolean minOpen, double max) implements Serializable {
        /** v, or an IllegalArgumentException "NAME V: expected ..." (NaN and infinities too). */
        public double check(String name, double v) {
            if (!contains(v)) {
                throw new IllegalArgumentException(name + " " + v + ": expected " + range());
            }
            return v;
        }

        public boolean contains(double v) {
            return (minOpen ? v > min : v >= min) && v <= max;
        }

        /** "MIN to MAX", or "above MIN, at most MAX". */
        public String range() {
            return minOpen
                    ? String.format(Locale.ROOT, "above %s, at most %s", fmt(min), fmt(max))
                    : String.format(Locale.ROOT, "%s to %s", fmt(min), fmt(max));
        }

        private static String fmt(double d) {
            return d == Math.rint(d) ? Long.toString((long) d) : Double.toString(d);
        }
    }

    /** Engine threads per task: every hardware thread of a 512-core node with two-way SMT. */
    public static final Ints THREADS = new Ints(1, 1024);
    /** Engine threads per task where 0 means spark.task.cpus (the API's and the ML stages'). */
    public static final Ints THREADS_OR_DEFAULT = new Ints(0, THREADS.max());
    /** Spark partitions of a job. */
    public static final Ints PARTITIONS = new Ints(1, 1_000_000);
    /** Jobs a CLI run is cut into. */
    public static final Ints SLICES = new Ints(1, 10_000);
    /** Tokens of one engine batch (max batch tokens, GPU batch tokens): 1,048,576. */
    public static final Ints BATCH_TOKENS = new Ints(1, 1 << 20);
    /** Rows a score task sorts and batches together. */
    public static final Ints WINDOW_ROWS = new Ints(1, 1 << 20);
    /** A per-task memory cap in MiB (Arrow memory, KV cache): up to 4 TiB. */
    public static final Ints MEMORY_MB = new Ints(1, 1 << 22);
    /** Alternatives per token in a top_logprobs column (score's top-k, generate's top-logprobs). */
    public static final Ints TOP_LOGPROBS = new Ints(0, 1024);
    /** Nodes a pipelined model's layers are split over (0: none). */
    public static final Ints PIPELINE_NODES = new Ints(0, 1024);
    /** Tokens one completion may generate. */
    public static final Ints MAX_NEW_TOKENS = new Ints(1, 1 << 20);
    /** Sampling top-k (0: all): any vocabulary up to 16M tokens. */
    public static final Ints SAMPLING_TOP_K = new Ints(0, 1 << 24);
    /** Completions per prompt. */
    public static final Ints SAMPLES = new Ints(1, 1024);
    /** Sequences decoded together in one task. */
    public static final Ints BATCH_SEQUENCES = new Ints(1, 65_536);
    /** A stop token id. */
    public static final Ints TOKEN_ID = new Ints(0, Integer.MAX_VALUE);
    /** Seconds to wait for another job's output lease: up to a week. */
    public static final Ints LEASE_WAIT_SECONDS = new Ints(0, 7 * 24 * 3600);

    /** Sampling temperature (0: greedy). */
    public static final Decimals TEMPERATURE = new Decimals(0, false, 100);
    /** Nucleus sampling's probability mass (1: all). */
    public static final Decimals TOP_P = new Decimals(0, true, 1);
    /** min-p (0: none). */
    public static final Decimals MIN_P = new Decimals(0, false, 1);
    /** Hugging Face repetition penalty (1: none). */
    public static final Decimals REPETITION_PENALTY = new Decimals(0, true, 100);
    /** OpenAI presence and frequency penalties (0: none), OpenAI's range. */
    public static final Decimals OPENAI_PENALTY = new Decimals(-2, false, 2);
}
