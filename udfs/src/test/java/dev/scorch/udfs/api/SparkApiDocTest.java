package dev.scorch.udfs.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.apache.spark.sql.Row;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Java example of docs/spark-api.md, compiled from the page and run on the demo model: it must compile against
 * the API as it is, and do what the page says (two fluent reviews, two samples each, their columns kept).
 */
class SparkApiDocTest {
    static final Path PAGE = Path.of("..", "docs", "spark-api.md");

    @TempDir
    Path tmp;

    /** The page's first java code block, whose public class it names. */
    static String example() throws IOException {
        Matcher m = Pattern.compile("```java\n(.*?)```", Pattern.DOTALL).matcher(Files.readString(PAGE));
        assertTrue(m.find(), PAGE + " has no java code block");
        return m.group(1);
    }

    @Test
    void javaExampleCompilesAndRuns() throws Exception {
        String source = example();
        Matcher name = Pattern.compile("public class (\\w+)").matcher(source);
        assertTrue(name.find(), "the example declares a public class");
        Path src = Files.createDirectories(tmp.resolve("src")).resolve(name.group(1) + ".java");
        Files.writeString(src, source);
        Path classes = Files.createDirectories(tmp.resolve("classes"));
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        int rc = javac.run(null, null, null, "-classpath", cp, "-d", classes.toString(), src.toString());
        assertEquals(0, rc, "the example compiles");

        ApiTests.spark(); // the example's getOrCreate finds this session
        Path out = tmp.resolve("out");
        try (URLClassLoader loader = new URLClassLoader(
                new URL[] {classes.toUri().toURL()}, getClass().getClassLoader())) {
            loader.loadClass(name.group(1)).getMethod("main", String[].class).invoke(null, (Object)
                    new String[] {ApiTests.demoModel().toString(), out.toString()});
        }

        List<Row> rows = ApiTests.spark().read().parquet(out.toString()).collectAsList();
        assertEquals(4, rows.size(), "two reviews, two samples each");
        Set<Integer> ids = new HashSet<>();
        for (Row r : rows) {
            ids.add(r.getAs("id"));
            assertNull(r.getAs("error"));
            assertNotNull(r.getAs("meta"), "the review's own columns come along");
            assertTrue((double) r.getAs("perplexity") > 0);
            assertTrue((int) r.getAs("num_completion_tokens") <= 8);
        }
        assertEquals(2, ids.size());
        assertTrue(!ids.contains(4), "the empty review is an error row, not kept");
    }
}
