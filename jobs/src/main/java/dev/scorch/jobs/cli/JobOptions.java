package dev.scorch.jobs.cli;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.kernels.CpuPrecision;
import dev.scorch.jobs.DemoModel;
import dev.scorch.jobs.output.WriteMode;
import dev.scorch.udfs.api.Bounds;
import dev.scorch.udfs.model.RemoteCheckpoint;
import dev.scorch.udfs.score.ScoreOptions;
import java.util.ArrayList;
import java.util.Locale;
import org.apache.spark.SparkConf;
import picocli.CommandLine.Option;

/**
 * The options the score and generate commands share (a picocli mixin): model, input and output, slices and
 * overwrite/resume, the engine backend, with {@link SparkOptions}' Spark settings, partitions, weight shipping and threads.
 */
public final class JobOptions extends SparkOptions {
    /** The accepted --backend values, for picocli's ${COMPLETION-CANDIDATES}. */
    static final class BackendNames extends ArrayList<String> {
        BackendNames() {
            for (BackendMode m : BackendMode.values()) {
                add(m.flag());
            }
        }
    }

    @Option(
            names = "--model",
            required = true,
            description = "Checkpoint folder (local, or an hdfs://, s3a:// URI), or 'demo' for the built-in demo model"
                    + " (random weights).")
    String model;

    @Option(names = "--input", required = true, description = "Input path (file or folder; any Hadoop FileSystem URI).")
    String input;

    @Option(names = "--input-format", description = "parquet, jsonl or csv. Default: from the extension.")
    String inputFormat;

    @Option(names = "--output", required = true, description = "Output folder.")
    String output;

    @Option(names = "--output-format", description = "parquet or jsonl. Default: parquet.")
    String outputFormat;

    @Option(
            names = "--id-column",
            defaultValue = "id",
            description = "Id column; absent: a stable id file:row. Default: ${DEFAULT-VALUE}.")
    String idColumn;

    @Option(
            names = "--token-ids-column",
            defaultValue = "token_ids",
            description = "Token ids column. Default: ${DEFAULT-VALUE}.")
    String tokenIdsColumn;

    @Option(names = "--text-column", defaultValue = "prompt", description = "Text column. Default: ${DEFAULT-VALUE}.")
    String textColumn;

    @Option(
            names = "--slices",
            description = "Jobs the run is cut into, each committed on its own (what --resume can skip). Default: 1.")
    Integer slices;

    /** The accepted --gpu-precision values (GemmPrecision's, lower case), for picocli's ${COMPLETION-CANDIDATES}. */
    static final class PrecisionNames extends ArrayList<String> {
        PrecisionNames() {
            for (GemmPrecision p : GemmPrecision.values()) {
                add(p.name().toLowerCase(Locale.ROOT));
            }
        }
    }

    @Option(
            names = "--backend",
            completionCandidates = BackendNames.class,
            description =
                    "Where each task runs the engine:"
                            + " ${COMPLETION-CANDIDATES}. auto: CUDA when Spark gave the task a GPU address and CUDA loads in the executor, else CPU;"
                            + " cuda: fails when CUDA cannot be used (GPU 0 when Spark assigns none, as in local mode). Default: auto.")
    String backend;

    @Option(
            names = "--gpu-precision",
            completionCandidates = PrecisionNames.class,
            description = "GEMM precision of tasks that run"
                    + " on CUDA: ${COMPLETION-CANDIDATES} (the weights' dtype and how GEMM inputs are rounded; fp32 is exact). Default: "
                    + ScoreOptions.DEFAULT_GPU_PRECISION + ".")
    String gpuPrecision;

    @Option(
            names = "--cpu-precision",
            description = "GEMMs of tasks that run on the CPU (prefill's, and decode's over BF16 weights): fp32, or"
                    + " bf16x3, bf16x2, bf16 (bf16 parts on AVX512-BF16; an executor whose CPU lacks it runs fp32 and"
                    + " logs why), or default: each executor's -Dscorch.cpu.precision, else fp32. Default: default.")
    String cpuPrecision;

    @Option(
            names = "--overwrite",
            description = "Replace an existing Scorch output folder (the new run is swapped in only when it"
                    + " succeeds). Refused for a folder that holds anything Scorch did not write.")
    boolean overwrite;

    @Option(
            names = "--force-overwrite",
            description = "With --overwrite: replace the output folder even when it holds files Scorch did"
                    + " not write. Never the input, the model, the root, the home or the working folder.")
    boolean forceOverwrite;

    @Option(names = "--resume", description = "Finish an interrupted run: only input rows not yet in the output.")
    boolean resume;

    @Option(
            names = "--lease-wait",
            paramLabel = "SECONDS",
            description = "When another job is writing the same --output, wait up to this long for it to finish"
                    + " instead of refusing at once (exit 2). Default: 0.")
    Long leaseWait;

    /** The checkpoint: the demo model's folder, a local folder, or a folder on another Hadoop file system as given. */
    String modelLocation() {
        return RemoteCheckpoint.isRemote(model)
                ? model
                : DemoModel.resolve(model).toString();
    }

    String outputFormat() {
        return choice("output-format", outputFormat, "parquet", "parquet", "jsonl");
    }

    /** --backend, else the config's scorch.backend, else auto. */
    BackendMode backend() {
        String v = backend != null ? backend : config().option("backend", BackendMode.AUTO.flag());
        try {
            return BackendMode.parse(v);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("--" + e.getMessage(), e);
        }
    }

    /** The session's settings, with --lease-wait's. */
    @Override
    SparkConf conf(String appName) {
        SparkConf sc = super.conf(appName);
        if (leaseWait != null) {
            Bounds.LEASE_WAIT_SECONDS.checkLong("--lease-wait", leaseWait);
            sc.set(dev.scorch.jobs.PartitionedRun.LEASE_WAIT, Long.toString(leaseWait));
        }
        return sc;
    }

    WriteMode write() {
        return WriteMode.of(overwrite, forceOverwrite, resume);
    }

    int slices() {
        return bounded("slices", slices, 1, Bounds.SLICES);
    }

    /** With {@link SparkOptions#check}'s options: --slices, --cpu-precision and --lease-wait, before Spark starts. */
    @Override
    void check() {
        super.check();
        slices();
        cpuPrecision(); // a name that is no mode fails here, before Spark starts
        if (leaseWait != null) {
            Bounds.LEASE_WAIT_SECONDS.checkLong("--lease-wait", leaseWait);
        }
    }

    /**
     * --cpu-precision, else the config's scorch.cpu-precision; null for neither or "default" (each executor's own
     * default). A job option like --gpu-precision: the tasks get it with their options, so two jobs in one JVM can differ.
     */
    CpuPrecision cpuPrecision() {
        String v = cpuPrecision != null ? cpuPrecision : config().option("cpu-precision", null);
        try {
            return v == null ? null : CpuPrecision.option(v);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("--cpu-precision: " + e.getMessage(), e);
        }
    }

    /** --gpu-precision, else the config's scorch.gpu-precision, else the default. */
    GemmPrecision gpuPrecision() {
        String v = gpuPrecision != null
                ? gpuPrecision
                : config().option("gpu-precision", ScoreOptions.DEFAULT_GPU_PRECISION);
        try {
            return GemmPrecision.parse(v);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("--gpu-precision: " + e.getMessage(), e);
        }
    }
}
