package dev.scorch.jobs.output;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.List;
import java.util.regex.Pattern;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * A job's output folder, written so that nothing Scorch did not write is deleted and a failed run leaves the previous
 * output as it was. A run writes into a partial folder beside the output, {@code _NAME.scorch-partial} (hidden from
 * Spark's and Hadoop's readers of the parent, as every name starting with '_' is), and {@link #commit} swaps it in: the
 * old output is renamed aside, the partial folder renamed into its place, then the old one deleted. A run stopped before
 * the swap leaves the partial folder, which --resume finishes; one stopped inside the swap is put right by the next run.
 * Only a resume of a finished output writes into the output itself, adding part files beside the old ones.
 *
 * <p>Every folder Scorch writes carries a marker, {@value #MARKER}, saying which job wrote it. A folder without it is
 * taken for Scorch's only when it holds nothing but Spark's own output files (part files, _SUCCESS, checksums), as
 * outputs written before the marker do.
 *
 * <p>A run opens its output holding the output's {@link OutputLease} (one writer at a time) and with its
 * {@link RunIdentity}, which the new partial folder's marker records: a --resume continues only a run whose model,
 * input and result options are the ones given again. Nothing that is not a regular file or a folder is replaced or
 * deleted ({@link FileKinds}).
 */
public final class OutputFolder {
    public static final String MARKER = "_scorch.json";
    /** What Spark's writers leave in an output folder, and our marker. */
    private static final Pattern SPARK_FILE = Pattern.compile(
            "part-.*|_SUCCESS|\\..*\\.crc|_temporary|_committed_.*|_started_.*|" + Pattern.quote(MARKER));

    private static final ObjectMapper JSON = new ObjectMapper();

    private final FileSystem fs;
    private final String job;
    private final Path out;
    private final Path partial;
    private final Path replaced;
    private final Path target;
    private final boolean resumesRows;
    /** What {@link #start} makes: a new partial folder with this marker (null: the target is there already). */
    private final ObjectNode freshMarker;

    private final OutputLease lease;

    private OutputFolder(
            FileSystem fs,
            String job,
            Path out,
            Path target,
            boolean resumesRows,
            ObjectNode freshMarker,
            OutputLease lease) {
        this.fs = fs;
        this.lease = lease;
        this.job = job;
        this.out = out;
        this.partial = partialOf(out);
        this.replaced = beside(out, ".scorch-replaced");
        this.target = target;
        this.resumesRows = resumesRows;
        this.freshMarker = freshMarker;
    }

    /** The partial folder of a run into output: {@code _NAME.scorch-partial} beside it. */
    public static Path partialOf(Path output) {
        return beside(output, ".scorch-partial");
    }

    private static Path beside(Path output, String suffix) {
        return new Path(output.getParent(), "_" + output.getName() + suffix);
    }

    /** As {@link #open(FileSystem, String, String, WriteMode, ObjectNode, RunIdentity, OutputLease)} for a run
     * with no identity to resume by and no lease of its own (an eval run inside the eval output, which is leased). */
    public static OutputFolder open(FileSystem fs, String output, String job, WriteMode mode, ObjectNode describe)
            throws IOException {
        return open(fs, output, job, mode, describe, null, null);
    }

    /**
     * Decides where a run of {@code job} writes {@code output}, as {@code mode} allows, refusing what it does not. It
     * writes nothing (see {@link #start}) but to put right a swap a killed driver cut short. An old output is replaced
     * only by {@link #commit}.
     *
     * @param describe what the marker records of the run (model, input), beside the job and the time
     * @param identity what the run's rows depend on: recorded when it starts, compared by --resume (null: none)
     * @param lease    the output's lease, held by this run (null: the caller holds one on a folder above)
     */
    public static OutputFolder open(
            FileSystem fs,
            String output,
            String job,
            WriteMode mode,
            ObjectNode describe,
            RunIdentity identity,
            OutputLease lease)
            throws IOException {
        Path out = fs.makeQualified(new Path(output));
        if (out.getParent() == null) {
            throw new IllegalArgumentException("--output " + output + " is a root folder");
        }
        FileKinds.requireOnlyFilesAndFolders(fs, out, "--output", output);
        FileKinds.requireOnlyFilesAndFolders(
                fs, partialOf(out), "--output", partialOf(out).toString());
        finishInterruptedSwap(fs, out);
        Path partial = partialOf(out);
        boolean outExists = fs.exists(out);
        boolean partialExists = fs.exists(partial);
        if (partialExists) {
            String whose = notScorchs(fs, partial, null);
            if (whose != null) {
                throw new IllegalArgumentException(
                        partial + " " + whose + "; Scorch keeps a run's partial output under that name: move it away");
            }
        }
        ObjectNode fresh = JSON.createObjectNode().put("scorch_output", 1).put("job", job);
        if (describe != null) {
            fresh.setAll(describe);
        }
        if (lease != null) {
            fresh.put("run_id", lease.runId());
        }
        if (identity != null) {
            fresh.set("run", identity.toJson(JSON));
        }
        switch (mode) {
            case RESUME -> {
                if (partialExists) {
                    requireJob(fs, partial, job, "--resume");
                    requireSameRun(fs, partial, identity, "the partial run is left as it was in " + partial);
                    System.err.println("scorch: resuming the interrupted run in " + partial
                            + (outExists ? "; it replaces " + out + " when done" : ""));
                    return new OutputFolder(fs, job, out, partial, true, null, lease);
                }
                if (outExists) {
                    String whose = notScorchs(fs, out, job);
                    if (whose != null) {
                        throw new IllegalArgumentException(
                                "--output " + output + " " + whose + "; --resume only finishes a " + job + " output");
                    }
                    requireSameRun(fs, out, identity, out + " is left as it was");
                    return new OutputFolder(fs, job, out, out, true, null, lease);
                }
                return new OutputFolder(fs, job, out, partial, false, fresh, lease);
            }
            case OVERWRITE, OVERWRITE_ANY -> {
                if (outExists && mode == WriteMode.OVERWRITE) {
                    String whose = notScorchs(fs, out, null);
                    if (whose != null) {
                        throw new IllegalArgumentException(
                                "--output " + output + " " + whose + "; --overwrite replaces only a Scorch output."
                                        + " Choose another output, or add --force-overwrite to replace it all the same");
                    }
                }
                return new OutputFolder(fs, job, out, partial, false, fresh, lease);
            }
            default -> {
                if (outExists) {
                    throw new IllegalArgumentException(
                            "--output " + output + " exists; add --overwrite to replace it or --resume to finish it");
                }
                if (partialExists && holdsRows(fs, partial)) {
                    throw new IllegalArgumentException("an interrupted run left " + partial
                            + "; add --resume to finish it or --overwrite to start over");
                }
                return new OutputFolder(fs, job, out, partial, false, fresh, lease);
            }
        }
    }

    /**
     * A resume continues only the run that was started: the one the folder's marker records, with the same model,
     * input and result options. Refuses naming what changed (the folder is not touched).
     */
    private static void requireSameRun(FileSystem fs, Path dir, RunIdentity now, String kept) throws IOException {
        if (now == null) {
            return;
        }
        ObjectNode m = readMarker(fs, dir);
        RunIdentity started = m == null ? null : RunIdentity.fromJson(m.get("run"));
        if (started == null) {
            throw new IllegalArgumentException("--resume: " + dir + " does not record which model, input and options"
                    + " its run started with (written by an earlier Scorch), so it cannot be continued safely; " + kept
                    + ". Rerun with --overwrite");
        }
        List<String> changes = now.changesFrom(started);
        if (!changes.isEmpty()) {
            int shown = Math.min(5, changes.size());
            throw new IllegalArgumentException("--resume continues only the run that was started, and "
                    + String.join("; ", changes.subList(0, shown))
                    + (changes.size() > shown ? "; and " + (changes.size() - shown) + " more changes" : "")
                    + ". " + kept + ": resume with the model, input and options it started with, or start over with"
                    + " --overwrite");
        }
    }

    /**
     * Makes the target ready once the run's input has been checked: a new partial folder, marked (an earlier interrupted
     * run's partial folder, ours, goes), or for a resume the removal of a killed run's uncommitted task files.
     */
    public OutputFolder start() throws IOException {
        if (freshMarker != null) {
            if (fs.exists(partial)) {
                FileKinds.requireOnlyFilesAndFolders(fs, partial, "--output", partial.toString());
                fs.delete(partial, true);
            }
            if (!fs.mkdirs(partial)) {
                throw new IOException("cannot create " + partial);
            }
            writeMarker(
                    fs,
                    partial,
                    freshMarker
                            .deepCopy()
                            .put("started", Instant.now().toString())
                            .put("complete", false));
        } else {
            // A resume, in place or into the partial folder: a killed run's task files, Spark's own, which the next
            // job's commit would otherwise move in beside the rows the resume writes again.
            Path temporary = new Path(target, "_temporary");
            FileKinds.requireOnlyFilesAndFolders(fs, temporary, "--output", temporary.toString());
            fs.delete(temporary, true);
        }
        return this;
    }

    /** The folder the run writes its part files into. */
    public Path target() {
        return target;
    }

    /** Whether the target already holds rows of this run (a resume). */
    public boolean resumesRows() {
        return resumesRows;
    }

    /** The output path as given, qualified. */
    public Path output() {
        return out;
    }

    /** Puts the finished run in place of the output: the last step of a successful run. */
    public void commit() throws IOException {
        if (lease != null) {
            lease.requireHeld();
        }
        if (target.equals(out)) {
            return; // a resume of a finished output: the rows were added in place
        }
        ObjectNode m = readMarker(fs, partial);
        writeMarker(
                fs,
                partial,
                (m == null ? JSON.createObjectNode().put("job", job) : m)
                        .put("complete", true)
                        .put("finished", Instant.now().toString()));
        if (fs.exists(out)) {
            FileKinds.requireOnlyFilesAndFolders(fs, out, "--output", out.toString());
            rename(fs, out, replaced);
            rename(fs, partial, out);
            fs.delete(replaced, true);
        } else {
            rename(fs, partial, out);
        }
    }

    /** A line for the user when the run failed: where its partial rows are and what to do with them. */
    public String afterFailure() {
        return target.equals(out)
                ? "the rows written before the failure stay in " + out + "; --resume finishes the run"
                : "the partial run is kept in " + partial + " (" + out
                        + " is as it was); --resume finishes it, --overwrite starts over";
    }

    /**
     * A swap cut short (a killed driver between its renames) leaves the old output renamed aside: put it back, or finish
     * the swap when the partial run beside it is complete.
     */
    static void finishInterruptedSwap(FileSystem fs, Path out) throws IOException {
        Path replaced = beside(out, ".scorch-replaced");
        if (!fs.exists(replaced)) {
            return;
        }
        if (!fs.exists(out)) {
            Path partial = partialOf(out);
            ObjectNode m = fs.exists(partial) ? readMarker(fs, partial) : null;
            if (m != null && m.path("complete").asBoolean(false)) {
                rename(fs, partial, out);
            } else {
                rename(fs, replaced, out);
                return;
            }
        }
        FileKinds.requireOnlyFilesAndFolders(fs, replaced, "--output", replaced.toString());
        fs.delete(replaced, true);
    }

    /**
     * Marks a folder a job keeps adding to (the eval job's history) as that job's, after checking it is absent, empty,
     * marked by that job, or holds only names that job writes.
     */
    public static void claim(FileSystem fs, String folder, String job, Pattern jobNames) throws IOException {
        Path dir = fs.makeQualified(new Path(folder));
        if (fs.exists(dir)) {
            if (!fs.getFileStatus(dir).isDirectory()) {
                throw new IllegalArgumentException("--output " + folder + " is a file; " + job + " writes a folder");
            }
            ObjectNode m = readMarker(fs, dir);
            if (m != null) {
                if (!job.equals(m.path("job").asText())) {
                    throw new IllegalArgumentException("--output " + folder + " holds a "
                            + m.path("job").asText() + " output, not a " + job + " output");
                }
                return;
            }
            for (FileStatus s : fs.listStatus(dir)) {
                if (!jobNames.matcher(s.getPath().getName()).matches()) {
                    throw new IllegalArgumentException(
                            "--output " + folder + " holds " + s.getPath().getName()
                                    + ", which Scorch did not write; choose another (new or empty) folder");
                }
            }
        }
        fs.mkdirs(dir);
        writeMarker(
                fs,
                dir,
                JSON.createObjectNode()
                        .put("scorch_output", 1)
                        .put("job", job)
                        .put("started", Instant.now().toString()));
    }

    /** Null when dir is a Scorch output (of job, when given); else why not, for a message. */
    static String notScorchs(FileSystem fs, Path dir, String job) throws IOException {
        FileStatus st = fs.getFileStatus(dir);
        if (!st.isDirectory()) {
            return "is a file, not a Scorch output folder";
        }
        ObjectNode m = readMarker(fs, dir);
        if (m != null) {
            String wrote = m.path("job").asText();
            return job == null || job.equals(wrote) ? null : "holds a " + wrote + " output, not a " + job + " output";
        }
        for (FileStatus s : fs.listStatus(dir)) {
            if (!SPARK_FILE.matcher(s.getPath().getName()).matches()) {
                return "holds " + s.getPath().getName() + ", which Scorch did not write";
            }
        }
        return null;
    }

    private static boolean holdsRows(FileSystem fs, Path dir) throws IOException {
        for (FileStatus s : fs.listStatus(dir)) {
            if (s.getPath().getName().startsWith("part-")) {
                return true;
            }
        }
        return false;
    }

    private static void requireJob(FileSystem fs, Path dir, String job, String option) throws IOException {
        String whose = notScorchs(fs, dir, job);
        if (whose != null) {
            throw new IllegalArgumentException(option + ": " + dir + " " + whose);
        }
    }

    static ObjectNode readMarker(FileSystem fs, Path dir) throws IOException {
        Path f = new Path(dir, MARKER);
        if (!fs.exists(f)) {
            return null;
        }
        try (InputStream in = fs.open(f)) {
            JsonNode n = JSON.readTree(in);
            return n instanceof ObjectNode o ? o : null;
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            return null;
        }
    }

    private static void writeMarker(FileSystem fs, Path dir, ObjectNode m) throws IOException {
        try (OutputStream o = fs.create(new Path(dir, MARKER), true)) {
            o.write(JSON.writerWithDefaultPrettyPrinter().writeValueAsString(m).getBytes(StandardCharsets.UTF_8));
        }
    }

    private static void rename(FileSystem fs, Path from, Path to) throws IOException {
        if (!fs.rename(from, to)) {
            throw new IOException("cannot rename " + from + " to " + to);
        }
    }
}
