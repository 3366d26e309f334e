package dev.scorch.jobs.lmeval.task;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;

/**
 * lm-eval's task index over folders of task YAML files (the built-in conf/evals/lm-eval/, then each
 * --include_path folder; a later folder's name overrides an earlier one's, within one folder the first file
 * in path order wins). Every {@code *.yaml} below a folder is read with its includes; a mapping with
 * {@code class} is a Python task, one with {@code group} a group, one with {@code task} a task, and each
 * task's {@code tag}s become tags (a tag names all the tasks that carry it). A file that cannot be read or
 * has none of these keys is left out of the index, as lm-eval leaves it out; {@link #skipped()} says why, and
 * an unknown name's error lists them.
 *
 * <p>{@link #resolve(String)} turns a --tasks name into what lm-eval's TaskManager builds: a task, a tag's
 * tasks (in name order), or a group with its members ({@code task:} names of tasks, tags and groups, dicts
 * {@code {task: NAME, ...overrides}}, or inline groups {@code {group: NAME, task: [...]}}); the keys of a
 * group file other than group, group_alias, task, aggregate_metric_list and metadata are overrides applied to
 * every task in it, an item's own keys override those. A name that is a path to a YAML file is read as one.
 */
public final class TaskRegistry {
    public enum Kind {
        TASK,
        PY_TASK,
        GROUP,
        TAG
    }

    /** One indexed name: a task's or group's merged YAML, or a tag's member task names. */
    public record Entry(String name, Kind kind, Path file, Map<String, Object> cfg, Set<String> members) {}

    /** What a name resolves to. */
    public sealed interface Node permits TaskNode, GroupNode {
        String name();
    }

    public record TaskNode(TaskConfig config) implements Node {
        @Override
        public String name() {
            return config.task();
        }
    }

    public record GroupNode(GroupConfig group, List<Node> children) implements Node {
        @Override
        public String name() {
            return group.group();
        }

        /** Every task below this group, depth first. */
        public List<TaskConfig> leaves() {
            List<TaskConfig> out = new ArrayList<>();
            collect(this, out);
            return out;
        }
    }

    /** A group's own fields (lm-eval's GroupConfig). */
    public record GroupConfig(
            String group,
            String groupAlias,
            List<AggregateMetric> aggregateMetricList,
            Map<String, Object> metadata,
            Path file) {}

    /** One aggregate_metric_list entry; aggregation is always "mean" (lm-eval knows no other by name). */
    public record AggregateMetric(String metric, List<String> filterList, String aggregation, boolean weightBySize) {}

    private static final Set<String> GROUP_FIELDS =
            Set.of("group", "group_alias", "task", "aggregate_metric_list", "metadata");

    private final List<Path> dirs;
    private final Map<String, Entry> index;
    private final Map<Path, String> skipped;

    private TaskRegistry(List<Path> dirs, Map<String, Entry> index, Map<Path, String> skipped) {
        this.dirs = dirs;
        this.index = index;
        this.skipped = skipped;
    }

    /** The index over these folders, earlier ones first (a later folder's names win). */
    public static TaskRegistry scan(List<Path> dirs) {
        Map<String, Entry> index = new LinkedHashMap<>();
        Map<Path, String> skipped = new LinkedHashMap<>();
        for (Path dir : dirs) {
            if (!Files.isDirectory(dir)) {
                throw new IllegalArgumentException("--include_path " + dir + " is not a folder");
            }
            Map<String, Entry> local = new LinkedHashMap<>();
            for (Path file : yamlFiles(dir)) {
                Map<String, Object> cfg;
                try {
                    cfg = TaskYaml.load(file);
                } catch (IllegalArgumentException e) {
                    skipped.put(file, e.getMessage());
                    continue;
                }
                index(file, cfg, local, skipped);
            }
            index.putAll(local);
        }
        return new TaskRegistry(List.copyOf(dirs), index, skipped);
    }

    private static List<Path> yamlFiles(Path dir) {
        try (Stream<Path> s = Files.walk(dir)) {
            return s.filter(p -> p.getFileName().toString().endsWith(".yaml") && Files.isRegularFile(p))
                    .filter(p -> {
                        for (Path part : dir.relativize(p)) {
                            String n = part.toString();
                            if (n.equals("__pycache__") || n.equals(".ipynb_checkpoints")) {
                                return false;
                            }
                        }
                        return true;
                    })
                    .sorted((a, b) -> a.toString()
                            .replace('\\', '/')
                            .compareTo(b.toString().replace('\\', '/')))
                    .toList();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot list " + dir, e);
        }
    }

    private static void index(Path file, Map<String, Object> cfg, Map<String, Entry> local, Map<Path, String> skipped) {
        Kind kind;
        String name;
        if (cfg.containsKey("class")) {
            kind = Kind.PY_TASK;
            name = String.valueOf(cfg.get("task"));
        } else if (cfg.containsKey("group")) {
            kind = Kind.GROUP;
            name = String.valueOf(cfg.get("group"));
        } else if (cfg.containsKey("task")) {
            kind = Kind.TASK;
            name = String.valueOf(cfg.get("task"));
        } else {
            skipped.put(file, "has none of the keys task, group, class");
            return;
        }
        if (local.containsKey(name) && local.get(name).kind() != Kind.TAG) {
            skipped.put(
                    file,
                    "'" + name + "' is already defined by " + local.get(name).file());
            return;
        }
        local.put(name, new Entry(name, kind, file, cfg, Set.of()));
        if (kind != Kind.GROUP) {
            Object tags = cfg.get("tag");
            List<?> list = tags instanceof List<?> l ? l : tags == null ? List.of() : List.of(tags);
            for (Object t : list) {
                String tag = String.valueOf(t);
                Entry e = local.get(tag);
                if (e == null) {
                    local.put(tag, new Entry(tag, Kind.TAG, null, Map.of(), new TreeSet<>(Set.of(name))));
                } else if (e.kind() == Kind.TAG) {
                    e.members().add(name);
                }
            }
        }
    }

    public Map<String, Entry> index() {
        return Collections.unmodifiableMap(index);
    }

    /** Files left out of the index, and why. */
    public Map<Path, String> skipped() {
        return Collections.unmodifiableMap(skipped);
    }

    /**
     * The names given to --tasks, resolved; a tag gives its tasks. A task that falls under more than one of
     * the named groups is refused, as lm-eval refuses it.
     */
    public List<Node> resolve(List<String> names) {
        List<Node> out = new ArrayList<>();
        for (String n : names) {
            out.addAll(resolve(n));
        }
        Map<String, String> owner = new LinkedHashMap<>();
        for (Node n : out) {
            if (n instanceof GroupNode g) {
                for (TaskConfig t : new LinkedHashSet<>(g.leaves())) {
                    String prev = owner.putIfAbsent(t.task(), g.name());
                    if (prev != null && !prev.equals(g.name())) {
                        throw new IllegalArgumentException("task '" + t.task() + "' is in both group '" + prev
                                + "' and group '" + g.name() + "': evaluate overlapping groups in separate runs");
                    }
                }
            }
        }
        return out;
    }

    /** One --tasks name: a task (one node), a group (one node), or a tag (its tasks). */
    public List<Node> resolve(String name) {
        Entry e = index.get(name);
        if (e == null && name.endsWith(".yaml") && Files.isRegularFile(Path.of(name))) {
            Path file = Path.of(name).toAbsolutePath().normalize();
            Map<String, Object> cfg = TaskYaml.load(file);
            Map<String, Entry> one = new LinkedHashMap<>();
            Map<Path, String> why = new LinkedHashMap<>();
            index(file, cfg, one, why);
            if (!why.isEmpty()) {
                throw new IllegalArgumentException(file + ": " + why.get(file));
            }
            e = one.values().iterator().next();
        }
        if (e == null) {
            StringBuilder b = new StringBuilder("'" + name + "' is not an lm-eval task, group or tag under " + dirs);
            if (!skipped.isEmpty()) {
                b.append("; files not indexed:");
                skipped.forEach(
                        (f, why) -> b.append("\n  ").append(f).append(": ").append(why));
            }
            throw new IllegalArgumentException(b.toString());
        }
        return switch (e.kind()) {
            case TAG -> {
                List<Node> out = new ArrayList<>();
                for (String t : e.members()) {
                    out.add(new TaskNode(task(index.get(t), Map.of())));
                }
                yield out;
            }
            case GROUP -> List.of(group(e.name(), e.cfg(), e.file(), Map.of()));
            default -> List.of(new TaskNode(task(e, Map.of())));
        };
    }

    private TaskConfig task(Entry e, Map<String, Object> overrides) {
        if (e.kind() == Kind.PY_TASK) {
            throw new IllegalArgumentException(TaskConfig.where(e.name(), e.file())
                    + "field 'class': a task defined by a Python class cannot run: Scorch runs no Python");
        }
        Map<String, Object> cfg = new LinkedHashMap<>(e.cfg());
        cfg.putAll(overrides);
        return build(cfg, e.file());
    }

    private static TaskConfig build(Map<String, Object> cfg, Path file) {
        cfg.remove("group");
        cfg.remove("task_list");
        return TaskConfig.from(cfg, file);
    }

    private GroupNode group(String name, Map<String, Object> raw, Path file, Map<String, Object> overrides) {
        String at = "lm-eval group '" + name + "' (" + file + "): ";
        Map<String, Object> taskOverrides = new LinkedHashMap<>();
        for (Map.Entry<String, Object> kv : raw.entrySet()) {
            if (!GROUP_FIELDS.contains(kv.getKey())) {
                taskOverrides.put(kv.getKey(), kv.getValue());
            }
        }
        taskOverrides.putAll(overrides);
        Object alias = raw.get("group_alias");
        Object meta = raw.get("metadata");
        GroupConfig g = new GroupConfig(
                name,
                alias == null ? null : Py.str(alias),
                aggregates(at, raw.get("aggregate_metric_list")),
                meta instanceof Map<?, ?> m ? TaskConfig.stringKeys(at, "metadata", m) : Map.of(),
                file);
        Object members = raw.get("task");
        List<?> items = members instanceof List<?> l ? l : members == null ? List.of() : List.of(members);
        List<Node> children = new ArrayList<>();
        for (int i = 0; i < items.size(); i++) {
            Object item = items.get(i);
            String field = "task[" + i + "]";
            String base;
            Map<String, Object> itemOverrides;
            if (item instanceof String s) {
                base = s;
                itemOverrides = taskOverrides;
                if (!index.containsKey(base)) {
                    throw new IllegalArgumentException(
                            at + "field '" + field + "': '" + s + "' is not a known task, group or tag");
                }
            } else if (item instanceof Map<?, ?> m) {
                Map<String, Object> mm = TaskConfig.stringKeys(at, field, m);
                if (mm.containsKey("group")) {
                    String sub = Py.str(mm.get("group"));
                    Entry known = index.get(sub);
                    if (known != null && known.kind() == Kind.GROUP) {
                        Map<String, Object> merged = new LinkedHashMap<>(taskOverrides);
                        mm.forEach((k, v) -> {
                            if (!k.equals("group")) {
                                merged.put(k, v);
                            }
                        });
                        children.add(group(sub, known.cfg(), known.file(), merged));
                    } else {
                        children.add(group(name + "::" + sub, mm, file, taskOverrides));
                    }
                    continue;
                }
                if (!(mm.get("task") instanceof String t)) {
                    throw new IllegalArgumentException(at + "field '" + field + "' must have a 'task' or 'group' key");
                }
                base = t;
                itemOverrides = new LinkedHashMap<>(taskOverrides);
                itemOverrides.putAll(mm);
            } else {
                throw new IllegalArgumentException(
                        at + "field '" + field + "' must be a name or a mapping, got " + Py.typeName(item));
            }
            Entry child = index.get(base);
            if (child == null) { // an inline task, defined in full by the item
                Map<String, Object> cfg = new LinkedHashMap<>(itemOverrides);
                cfg.put("task", name + "::" + base);
                children.add(new TaskNode(build(cfg, file)));
                continue;
            }
            switch (child.kind()) {
                case GROUP -> children.add(group(child.name(), child.cfg(), child.file(), itemOverrides));
                case TAG -> {
                    for (String t : child.members()) {
                        Map<String, Object> o = new LinkedHashMap<>(itemOverrides);
                        o.put("task", t);
                        children.add(new TaskNode(task(index.get(t), o)));
                    }
                }
                default -> {
                    Map<String, Object> o = new LinkedHashMap<>(itemOverrides);
                    o.put("task", base);
                    children.add(new TaskNode(task(child, o)));
                }
            }
        }
        return new GroupNode(g, List.copyOf(children));
    }

    private static List<AggregateMetric> aggregates(String at, Object raw) {
        if (raw == null) {
            return null;
        }
        List<?> items = raw instanceof List<?> l ? l : List.of(raw);
        List<AggregateMetric> out = new ArrayList<>();
        for (int i = 0; i < items.size(); i++) {
            String field = "aggregate_metric_list[" + i + "]";
            if (!(items.get(i) instanceof Map<?, ?> m) || !(m.get("metric") instanceof String metric)) {
                throw new IllegalArgumentException(at + "field '" + field + "' must be a mapping with a metric");
            }
            for (Object k : m.keySet()) {
                if (!Set.of("metric", "filter_list", "aggregation", "weight_by_size")
                        .contains(k)) {
                    throw new IllegalArgumentException(at + "unknown field '" + field + "." + k + "'");
                }
            }
            Object agg = m.get("aggregation");
            if (agg instanceof FunctionRef r) {
                throw new IllegalArgumentException(at + "field '" + field + ".aggregation' is the Python function "
                        + r.name() + " (!function): Scorch runs no Python");
            }
            if (agg != null && !"mean".equals(agg)) {
                throw new IllegalArgumentException(at + "field '" + field + ".aggregation': '" + agg
                        + "' is not an aggregation: 'mean' is the only one");
            }
            Object fl = m.get("filter_list");
            List<String> filters = null;
            if (fl instanceof String s) {
                filters = List.of(s);
            } else if (fl instanceof List<?> l && l.stream().allMatch(x -> x instanceof String)) {
                filters = l.stream().map(x -> (String) x).toList();
            } else if (fl != null) {
                throw new IllegalArgumentException(
                        at + "field '" + field + ".filter_list' must be a name or a list of names");
            }
            Object w = m.get("weight_by_size");
            if (w != null && !(w instanceof Boolean)) {
                throw new IllegalArgumentException(at + "field '" + field + ".weight_by_size' must be true or false");
            }
            out.add(new AggregateMetric(metric, filters, "mean", w == null || (Boolean) w));
        }
        return List.copyOf(out);
    }

    private static void collect(Node n, List<TaskConfig> out) {
        if (n instanceof TaskNode t) {
            out.add(t.config());
        } else if (n instanceof GroupNode g) {
            for (Node c : g.children()) {
                collect(c, out);
            }
        }
    }
}
