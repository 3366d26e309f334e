package dev.scorch.jobs.lmeval.task;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.PathMatcher;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * Which local files hold which split of a task's data; reading them is the Spark job's.
 *
 * <p>Two ways, as lm-eval's tasks are written:
 *
 * <ul>
 *   <li>{@code dataset_path: json | csv | parquet} with {@code dataset_kwargs.data_files}: one file or a list
 *       (both the split {@code train}, as Hugging Face datasets reads them) or a mapping split -> file(s).
 *       A relative name is looked up beside the task file first, then in the working folder (where
 *       lm-eval would look); a name with {@code *} or {@code ?} is a glob, matched in its folder.
 *   <li>a hub dataset ({@code dataset_path: owner/name}, with dataset_name) mapped with
 *       {@code --dataset_dir NAME[/CONFIG]=PATH} to a folder holding SPLIT.jsonl, SPLIT.json, SPLIT.parquet or
 *       SPLIT.csv, or shards SPLIT-*.EXT (as the hub's own parquet exports are named). The longest key wins:
 *       {@code dataset_path/dataset_name}, then {@code dataset_path}.
 * </ul>
 *
 * Scorch downloads nothing: a hub dataset without a --dataset_dir is refused, naming the key to give.
 *
 * @param format json (JSON Lines or a JSON array), csv or parquet
 * @param splits split name -> its files, in order
 */
public record DataFiles(String format, Map<String, List<Path>> splits) {
    private static final Set<String> LOCAL_BUILDERS = Set.of("json", "csv", "parquet");
    private static final Map<String, String> FORMAT_OF_EXT =
            Map.of("jsonl", "json", "json", "json", "parquet", "parquet", "csv", "csv");

    /** The files of one split; IllegalArgumentException naming the task and the splits there are. */
    public List<Path> split(TaskConfig task, String split) {
        List<Path> files = splits.get(split);
        if (files == null || files.isEmpty()) {
            throw new IllegalArgumentException(TaskConfig.where(task.task(), task.file()) + "no data for split '"
                    + split + "' (there are: " + splits.keySet() + ")");
        }
        return files;
    }

    /**
     * Parses --dataset_dir values: {@code NAME[/CONFIG]=PATH} each, NAME as the task's dataset_path spells it.
     */
    public static Map<String, Path> parseDatasetDirs(List<String> specs) {
        Map<String, Path> out = new LinkedHashMap<>();
        for (String s : specs) {
            int eq = s.lastIndexOf('=');
            if (eq <= 0 || eq == s.length() - 1) {
                throw new IllegalArgumentException("--dataset_dir '" + s + "': expected NAME[/CONFIG]=PATH");
            }
            out.put(s.substring(0, eq).strip(), Path.of(s.substring(eq + 1).strip()));
        }
        return out;
    }

    /** The task's data files. */
    public static DataFiles resolve(TaskConfig task, Map<String, Path> datasetDirs) {
        String at = TaskConfig.where(task.task(), task.file());
        String path = task.datasetPath();
        if (path == null) {
            throw new IllegalArgumentException(at + "field 'dataset_path' is missing");
        }
        String name = task.datasetName();
        Path dir = name != null ? datasetDirs.get(path + "/" + name) : null;
        if (dir == null) {
            dir = datasetDirs.get(path);
        }
        if (dir != null) {
            return fromDir(at, dir);
        }
        if (LOCAL_BUILDERS.contains(path)) {
            Map<String, Object> kw = task.datasetKwargs() == null ? Map.of() : task.datasetKwargs();
            Object df = kw.get("data_files");
            if (df == null) {
                throw new IllegalArgumentException(at + "field 'dataset_kwargs.data_files' is missing (dataset_path: "
                        + path + " reads local files)");
            }
            Path base = task.file().toAbsolutePath().getParent();
            Map<String, List<Path>> splits = new LinkedHashMap<>();
            if (df instanceof Map<?, ?> m) {
                for (Map.Entry<?, ?> e : m.entrySet()) {
                    String field = "dataset_kwargs.data_files." + e.getKey();
                    splits.put(String.valueOf(e.getKey()), files(at, field, e.getValue(), base));
                }
            } else {
                splits.put("train", files(at, "dataset_kwargs.data_files", df, base));
            }
            return new DataFiles(path, splits);
        }
        String key = name == null ? path : path + "/" + name;
        throw new IllegalArgumentException(at + "field 'dataset_path': '" + path + "' is a Hugging Face hub dataset"
                + (name == null ? "" : " (dataset_name '" + name + "')")
                + "; Scorch downloads nothing: give --dataset_dir " + key + "=FOLDER with its split files");
    }

    private static List<Path> files(String at, String field, Object v, Path base) {
        List<?> names = v instanceof List<?> l ? l : List.of(v);
        List<Path> out = new ArrayList<>();
        for (Object o : names) {
            if (!(o instanceof String s) || s.isBlank()) {
                throw new IllegalArgumentException(at + "field '" + field + "' must be a file name or a list of them");
            }
            out.addAll(find(at, field, s, base));
        }
        return List.copyOf(out);
    }

    private static List<Path> find(String at, String field, String name, Path base) {
        Path p = Path.of(name);
        List<Path> bases = p.isAbsolute()
                ? List.of(Path.of("/"))
                : List.of(base, Path.of("").toAbsolutePath());
        for (Path b : bases) {
            Path full = b.resolve(p).normalize();
            if (name.contains("*") || name.contains("?")) {
                List<Path> hits = glob(full);
                if (!hits.isEmpty()) {
                    return hits;
                }
            } else if (Files.isRegularFile(full)) {
                return List.of(full);
            }
        }
        throw new IllegalArgumentException(at + "field '" + field + "': '" + name
                + "' matches no file beside the task file (" + base + ") or in the working folder");
    }

    private static List<Path> glob(Path pattern) {
        Path dir = pattern.getParent();
        if (dir == null || !Files.isDirectory(dir)) {
            return List.of();
        }
        PathMatcher m = FileSystems.getDefault().getPathMatcher("glob:" + pattern.getFileName());
        try (Stream<Path> s = Files.list(dir)) {
            return s.filter(f -> Files.isRegularFile(f) && m.matches(f.getFileName()))
                    .sorted()
                    .toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static DataFiles fromDir(String at, Path dir) {
        if (!Files.isDirectory(dir)) {
            throw new IllegalArgumentException(at + "--dataset_dir " + dir + " is not a folder");
        }
        Map<String, List<Path>> splits = new TreeMap<>();
        String format = null;
        List<Path> files;
        try (Stream<Path> s = Files.list(dir)) {
            files = s.filter(Files::isRegularFile).sorted().toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        for (Path f : files) {
            String n = f.getFileName().toString();
            int dot = n.lastIndexOf('.');
            if (dot <= 0) {
                continue;
            }
            String fmt = FORMAT_OF_EXT.get(n.substring(dot + 1).toLowerCase(Locale.ROOT));
            if (fmt == null) {
                continue;
            }
            String stem = n.substring(0, dot);
            int dash = stem.indexOf('-');
            String split = dash > 0 ? stem.substring(0, dash) : stem;
            if (format != null && !format.equals(fmt)) {
                throw new IllegalArgumentException(
                        at + "--dataset_dir " + dir + " mixes " + format + " and " + fmt + " files");
            }
            format = fmt;
            splits.computeIfAbsent(split, k -> new ArrayList<>()).add(f);
        }
        if (format == null) {
            throw new IllegalArgumentException(at + "--dataset_dir " + dir
                    + " holds no SPLIT.jsonl, SPLIT.json, SPLIT.parquet or SPLIT.csv files");
        }
        Map<String, List<Path>> out = new LinkedHashMap<>();
        splits.forEach((k, v) -> out.put(k, List.copyOf(v)));
        return new DataFiles(format, out);
    }
}
