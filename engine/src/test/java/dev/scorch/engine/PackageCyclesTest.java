package dev.scorch.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The engine's main packages depend on each other without a cycle, and none depends on {@code diagnostics}. A package
 * depends on another when one of its files names a class of it in code: an import (static ones too) or a
 * fully-qualified {@code dev.scorch.engine.x.Y}; comments and string literals do not count.
 */
class PackageCyclesTest {
    private static final Path MAIN = Path.of("src", "main", "java");
    private static final String ROOT = "dev.scorch.engine";
    private static final Pattern PACKAGE = Pattern.compile("\\bpackage\\s+([\\w.]+)\\s*;");
    // A class of the engine: its package is the lower-case names before the first capitalised one.
    private static final Pattern REFERENCE = Pattern.compile(
            "\\bdev\\s*\\.\\s*scorch\\s*\\.\\s*engine((?:\\s*\\.\\s*[a-z_][a-z0-9_]*)*)\\s*\\.\\s*([A-Z*])");

    @Test
    void engineMainPackagesHaveNoCycle() throws IOException {
        Map<String, Map<String, Set<String>>> graph = packageGraph(MAIN);
        assertTrue(graph.size() > 10, "found the engine's packages under " + MAIN.toAbsolutePath());
        List<List<String>> cycles = cycles(graph);
        StringBuilder why = new StringBuilder();
        for (List<String> c : cycles) {
            why.append("\n  cycle ").append(c);
            for (String from : c) {
                for (String to : c) {
                    Set<String> files = graph.get(from).get(to);
                    if (files != null) {
                        why.append("\n    ")
                                .append(from)
                                .append(" -> ")
                                .append(to)
                                .append(": ")
                                .append(files);
                    }
                }
            }
        }
        assertTrue(cycles.isEmpty(), "engine packages that depend on each other:" + why);
    }

    @Test
    void noMainPackageDependsOnDiagnostics() throws IOException {
        Map<String, Map<String, Set<String>>> graph = packageGraph(MAIN);
        String diagnostics = ROOT + ".diagnostics";
        Map<String, Set<String>> users = new TreeMap<>();
        graph.forEach((from, to) -> {
            if (!from.equals(diagnostics) && to.containsKey(diagnostics)) {
                users.put(from, to.get(diagnostics));
            }
        });
        assertEquals(Map.of(), users, "production code that reaches into diagnostics");
    }

    @Test
    void theCheckFindsACycle() {
        Map<String, Map<String, Set<String>>> g = new TreeMap<>();
        g.put("a", Map.of("b", Set.of()));
        g.put("b", Map.of("c", Set.of()));
        g.put("c", Map.of("a", Set.of(), "d", Set.of()));
        g.put("d", Map.of());
        assertEquals(List.of(List.of("a", "b", "c")), cycles(g));
        String stripped =
                code("x(); // dev.scorch.engine.a.B\n int y; /* \"*/ \"dev.scorch.engine.c.D\"; char q = '\"'; z");
        assertEquals("x(); int y; \"\"; char q = ''; z", stripped.replaceAll("\\s+", " "));
    }

    /** package → package it references → the files that reference it. */
    static Map<String, Map<String, Set<String>>> packageGraph(Path main) throws IOException {
        Map<String, Map<String, Set<String>>> graph = new TreeMap<>();
        List<Path> files;
        try (Stream<Path> s = Files.walk(main)) {
            files = s.filter(p -> p.toString().endsWith(".java")).sorted().toList();
        }
        Map<Path, String> code = new HashMap<>();
        for (Path f : files) {
            String c = code(Files.readString(f));
            Matcher m = PACKAGE.matcher(c);
            if (m.find() && m.group(1).startsWith(ROOT)) {
                code.put(f, c);
                graph.computeIfAbsent(m.group(1), k -> new TreeMap<>());
            }
        }
        for (Path f : files) {
            String c = code.get(f);
            if (c == null) {
                continue;
            }
            Matcher pm = PACKAGE.matcher(c);
            pm.find();
            String from = pm.group(1);
            Matcher m = REFERENCE.matcher(c);
            while (m.find()) {
                String to = ROOT + m.group(1).replaceAll("\\s", "");
                if (!to.equals(from) && graph.containsKey(to)) {
                    graph.get(from)
                            .computeIfAbsent(to, k -> new TreeSet<>())
                            .add(f.getFileName().toString());
                }
            }
        }
        return graph;
    }

    /** The strongly connected components of more than one package (Tarjan), each sorted, in order of their first. */
    static List<List<String>> cycles(Map<String, Map<String, Set<String>>> graph) {
        Map<String, Integer> index = new HashMap<>();
        Map<String, Integer> low = new HashMap<>();
        Deque<String> stack = new ArrayDeque<>();
        Set<String> onStack = new TreeSet<>();
        List<List<String>> out = new ArrayList<>();
        for (String v : graph.keySet()) {
            if (!index.containsKey(v)) {
                connect(v, graph, index, low, stack, onStack, out);
            }
        }
        out.sort((a, b) -> a.get(0).compareTo(b.get(0)));
        return out;
    }

    private static void connect(
            String v,
            Map<String, Map<String, Set<String>>> graph,
            Map<String, Integer> index,
            Map<String, Integer> low,
            Deque<String> stack,
            Set<String> onStack,
            List<List<String>> out) {
        index.put(v, index.size());
        low.put(v, index.get(v));
        stack.push(v);
        onStack.add(v);
        for (String w : graph.getOrDefault(v, Map.of()).keySet()) {
            if (!index.containsKey(w)) {
                connect(w, graph, index, low, stack, onStack, out);
                low.put(v, Math.min(low.get(v), low.get(w)));
            } else if (onStack.contains(w)) {
                low.put(v, Math.min(low.get(v), index.get(w)));
            }
        }
        if (low.get(v).equals(index.get(v))) {
            List<String> component = new ArrayList<>();
            String w;
            do {
                w = stack.pop();
                onStack.remove(w);
                component.add(w);
            } while (!w.equals(v));
            if (component.size() > 1) {
                component.sort(null);
                out.add(component);
            }
        }
    }

    /** source with its comments blanked and its string, text-block and char literals emptied; lines kept. */
    static String code(String source) {
        StringBuilder out = new StringBuilder(source.length());
        int n = source.length();
        int i = 0;
        while (i < n) {
            char c = source.charAt(i);
            if (source.startsWith("//", i)) {
                while (i < n && source.charAt(i) != '\n') {
                    i++;
                }
            } else if (source.startsWith("/*", i)) {
                int end = source.indexOf("*/", i + 2);
                end = end < 0 ? n : end + 2;
                source.substring(i, end).chars().filter(ch -> ch == '\n').forEach(ch -> out.append('\n'));
                out.append(' ');
                i = end;
            } else if (source.startsWith("\"\"\"", i)) {
                int end = source.indexOf("\"\"\"", i + 3);
                while (end > 0 && source.charAt(end - 1) == '\\') {
                    end = source.indexOf("\"\"\"", end + 1);
                }
                end = end < 0 ? n : end + 3;
                out.append("\"\"");
                i = end;
            } else if (c == '"' || c == '\'') {
                int j = i + 1;
                while (j < n && source.charAt(j) != c && source.charAt(j) != '\n') {
                    j += source.charAt(j) == '\\' ? 2 : 1;
                }
                out.append(c).append(c);
                i = Math.min(n, j + 1);
            } else {
                out.append(c);
                i++;
            }
        }
        return out.toString();
    }
}
